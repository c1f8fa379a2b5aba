"""The live mapping checked against the store, before any work and reading only.

Each relation of a live dataset's mapping (``datasets.<name>.live``) exists and may be read,
each column exists with a usable type (integer, text or uuid ids, text content, a pgvector
``vector`` embedding, a ``tsvector`` when one is named, an array of expected ids: integer
for an integer corpus, integer, text or uuid for a text or uuid one), the
embedding's dimensions match the dataset's embedder and the corpus's ids are unique. Each
problem is one sentence naming the config key (:class:`LiveMappingError`). A mapping of the
corpus alone (no ``ground_truth`` or ``queries``) has only its corpus checked. Rows without an
embedding or text are counted and named by :mod:`eval_harness.datasets.live_rows`; attaching
(:mod:`eval_harness.datasets.live`) then checks that every expected id is a document.

A preset mapping (``preset: langchain`` / ``llamaindex``, :mod:`eval_harness.settings.datasets`)
is resolved here against what the library made: LangChain's collection name to its uuid in
``langchain_pg_collection`` (the corpus is that collection's rows, every check reads only
them), LlamaIndex's ``text_search_tsv`` to the tsvector when the table has it (and the
text-search configuration it was generated with to the dataset's language).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import psycopg
from psycopg import sql

from eval_harness.datasets.corpus import Corpus, Subset
from eval_harness.datasets.document_ids import own_id_kind
from eval_harness.datasets.live_rows import LiveMappingError, check_unique_ids, sampled_dimensions
from eval_harness.settings.datasets import CorpusMapping, DatasetConfig, GroundTruthMapping

INTEGER_TYPES = ("smallint", "integer", "bigint")
TEXT_TYPES = ("text", "character varying", "character")
INTEGER_ARRAY_TYPES = ("smallint[]", "integer[]", "bigint[]")
UUID_TYPES = ("uuid",)
# The types a corpus id (and so a ground-truth or answer id) may have, and arrays of them.
ID_TYPES = INTEGER_TYPES + TEXT_TYPES + UUID_TYPES
ID_ARRAY_TYPES = INTEGER_ARRAY_TYPES + ("text[]", "character varying[]", "character[]",
                                        "uuid[]")

# Dimensions of the embedders people name; another model's are taken from the corpus.
KNOWN_DIMENSIONS = {"all-MiniLM-L6-v2": 384, "text-embedding-3-small": 1536,
                    "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


@dataclass(frozen=True)
class CheckedMapping:
    corpus: Corpus
    ground_truth: GroundTruthMapping | None  # None: the corpus alone is mapped
    corpus_record: dict
    ground_truth_record: dict | None


def embedder_model(spec: str) -> str:
    """The model of an embedder spec (``local:all-MiniLM-L6-v2`` -> ``all-MiniLM-L6-v2``)."""
    return spec.partition(":")[2]


def relation_columns(conn: psycopg.Connection, oid: int) -> dict[str, tuple[str, int]]:
    """{column: (type as format_type prints it without modifiers, typmod)}."""
    return {name: (kind, typmod) for name, kind, typmod in conn.execute("""
        SELECT a.attname, format_type(a.atttypid, NULL), a.atttypmod
        FROM pg_attribute a WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped""",
                                                                   (oid,))}


def _relation(conn: psycopg.Connection, relation, where: str) -> int:
    name = sql.Identifier(relation.schema, relation.name).as_string(conn)
    row = conn.execute("SELECT to_regclass(%s)::oid, "
                       "has_table_privilege(to_regclass(%s), 'SELECT')", (name, name)).fetchone()
    if row[0] is None:
        raise LiveMappingError(f"'{where}.relation': {relation} does not exist in the store "
                               "(or this role cannot see its schema).")
    if not row[1]:
        raise LiveMappingError(f"'{where}.relation': this role may not SELECT from "
                               f"{relation}; GRANT SELECT ON {relation} TO the harness's role.")
    return row[0]


def _has_xmin(conn: psycopg.Connection, oid: int) -> bool:
    """Whether the rows of relation ``oid`` have ``xmin`` (a table, partitioned table or
    materialized view; not a view or foreign table)."""
    return conn.execute("SELECT relkind IN ('r', 'p', 'm') FROM pg_class WHERE oid = %s",
                        (oid,)).fetchone()[0]


def _column(columns: dict, name: str, allowed: Sequence[str], where: str, key: str,
            relation, why: str = "") -> tuple[str, int]:
    if name not in columns:
        known = ", ".join(sorted(columns))
        raise LiveMappingError(f"'{where}.{key}': {relation} has no column '{name}' "
                               f"(columns: {known}).")
    kind, typmod = columns[name]
    if kind not in allowed:
        raise LiveMappingError(f"'{where}.{key}': column {relation}.{name} is {kind}; it "
                               f"must be {' or '.join(allowed)}{why}.")
    return kind, typmod


def check_mapping(conn: psycopg.Connection, cfg: DatasetConfig) -> CheckedMapping:
    """Check ``cfg``'s live mapping against the store (reads only); see the module
    docstring. Raises :class:`LiveMappingError`."""
    assert cfg.live is not None
    base = f"datasets.{cfg.name}.live"
    if not conn.execute("SELECT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = %s)",
                        (cfg.language.rpartition(".")[2],)).fetchone()[0]:
        raise LiveMappingError(f"'datasets.{cfg.name}.language': '{cfg.language}' is not a "
                               "text-search configuration of this server (\\dF lists them).")
    mapping: CorpusMapping = cfg.live.corpus
    where = f"{base}.corpus"
    oid = _relation(conn, mapping.relation, where)
    columns = relation_columns(conn, oid)
    subset = _collection(conn, mapping, where) if mapping.preset == "langchain" else None
    language = cfg.language
    if mapping.preset == "llamaindex":
        mapping, language = _llamaindex_tsvector(conn, cfg, mapping, oid, columns, where)
    id_type, _ = _column(columns, mapping.id, ID_TYPES, where, "id", mapping.relation)
    own_ids = own_id_kind(id_type)
    _column(columns, mapping.content, TEXT_TYPES, where, "content", mapping.relation)
    _, typmod = _column(columns, mapping.embedding, ("vector",), where, "embedding",
                        mapping.relation)
    if mapping.tsvector is not None:
        _column(columns, mapping.tsvector, ("tsvector",), where, "tsvector", mapping.relation)
    dim = typmod if typmod > 0 else sampled_dimensions(conn, mapping, where, subset)
    model = embedder_model(cfg.embedder or "")
    expected_dim = KNOWN_DIMENSIONS.get(model)
    if expected_dim is not None and expected_dim != dim:
        raise LiveMappingError(
            f"'{where}.embedding': {mapping.relation}.{mapping.embedding} has {dim} dimensions "
            f"but the embedder {cfg.embedder} makes {expected_dim}; set "
            f"datasets.{cfg.name}.embedder to the model that embedded the corpus.")
    check_unique_ids(conn, mapping, oid, where, subset)
    record = Corpus.mapping_record(mapping.relation.schema, mapping.relation.name, mapping.id,
                                   mapping.content, mapping.embedding, mapping.tsvector,
                                   typed=typmod > 0, own_ids=own_ids,
                                   versioned=_has_xmin(conn, oid), subset=subset)
    corpus = Corpus.live(cfg.name, language, dim, record)
    gt = cfg.live.ground_truth
    if gt is None:  # a corpus alone: its queries are generated or users' ones
        return CheckedMapping(corpus, None, record, None)
    where = f"{base}.{ground_truth_key(gt)}"
    columns = relation_columns(conn, _relation(conn, gt.relation, where))
    _column(columns, gt.id, ID_TYPES, where, "id", gt.relation)
    _column(columns, gt.query, TEXT_TYPES, where, "query", gt.relation)
    if gt.labelled:
        # an integer corpus's expected ids are its ids as they are; a text or uuid corpus's
        # are matched by their text
        _column(columns, gt.expected_docs,
                INTEGER_ARRAY_TYPES if own_ids is None else ID_ARRAY_TYPES, where,
                "expected_docs", gt.relation,
                why="" if own_ids is None else f" (the ids of {mapping.relation}.{mapping.id})")
    gt_record = {"schema": gt.relation.schema, "relation": gt.relation.name, "id": gt.id,
                 "query": gt.query, "expected_docs": gt.expected_docs}
    return CheckedMapping(corpus, gt, record, gt_record)


def _collection(conn: psycopg.Connection, mapping: CorpusMapping, where: str) -> Subset:
    """LangChain's collection named in the mapping, as the rows it selects (its uuid)."""
    collections = mapping.collections
    _relation(conn, collections, where)
    rows = conn.execute(sql.SQL("SELECT name, uuid::text FROM {} ORDER BY name").format(
        sql.Identifier(collections.schema, collections.name))).fetchall()
    found: dict[str, str] = dict(rows)
    if mapping.collection not in found:
        there = (f"collections: {', '.join(repr(name) for name in found)}" if found
                 else "it holds no collection yet")
        raise LiveMappingError(f"'{where}.collection': {collections} has no collection "
                               f"{mapping.collection!r} ({there}).")
    return Subset("collection_id", found[mapping.collection],
                  f"collection {mapping.collection!r}")


# to_tsvector('english'::regconfig, (text)::text), as pg_get_expr prints the generated column
_GENERATED_CONFIG = re.compile(r"^to_tsvector\('((?:[^']|'')+)'::regconfig,")


def _llamaindex_tsvector(conn: psycopg.Connection, cfg: DatasetConfig, mapping: CorpusMapping,
                         oid: int, columns: dict, where: str) -> tuple[CorpusMapping, str]:
    """The mapping with LlamaIndex's ``text_search_tsv`` when the table has it (else
    ``tsvector: null``), and the dataset's language: the column's text-search configuration
    (PGVectorStore's ``text_search_config``), which a ``language`` in config.yaml must name."""
    if mapping.tsvector not in columns:
        return replace(mapping, tsvector=None), cfg.language
    expression = conn.execute(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a "
        "ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
        "WHERE d.adrelid = %s AND a.attname = %s AND a.attgenerated = 's'",
        (oid, mapping.tsvector)).fetchone()
    match = _GENERATED_CONFIG.match(expression[0]) if expression else None
    if match is None:  # not the library's column: its words are not ours to guess
        return mapping, cfg.language
    config = match.group(1).replace("''", "'")
    if cfg.language_given and cfg.language.rpartition(".")[2] != config.rpartition(".")[2]:
        raise LiveMappingError(
            f"'datasets.{cfg.name}.language': {cfg.language}, but {mapping.relation}."
            f"{mapping.tsvector} holds to_tsvector('{config}', {mapping.content}) (the "
            f"text_search_config the store was made with); set language: {config} or leave "
            "it out.")
    return mapping, config


def ground_truth_key(gt: GroundTruthMapping) -> str:
    """The config key that mapped the queries: ``ground_truth`` or (unlabelled) ``queries``."""
    return "ground_truth" if gt.labelled else "queries"
