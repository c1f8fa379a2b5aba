"""The ``datasets:`` section of ``config.yaml``: ingested folders and live mappings.

A dataset is either *ingested* (``path``: a BEIR folder copied into the harness schema) or
*live* (``live``: the RAG system's own relations, read in place). A live mapping names every
relation and column the harness reads; the keys are fixed (users' configs and the manual rely
on them)::

    datasets:
      prod:
        language: german
        embedder: openai:text-embedding-3-small
        live:
          corpus: {relation: public.l2_insights, id: id, content: content,
                   embedding: embedding, tsvector: null}
          ground_truth: {relation: public.ground_truth, id: id, query: query,
                         expected_docs: expected_docs}
          write_judge_scores: false

A RAG system without relevance labels maps its queries only: ``ground_truth: null`` and
``queries: {relation, id, query}``. At most one of the two is given; the queries of such a
dataset carry no expected documents, and its labels come from the judges (``eval-harness
judge``, then ``calibrate --labels judges``). A RAG system with neither maps its corpus
alone (``live: {corpus: ...}``): it has no ground-truth relation, so its queries are made
by ``eval-harness ground-truth generate`` or ``ground-truth from-answers``, and
``write_judge_scores`` (which writes into that relation) is refused.

A store made by a RAG library is mapped by its preset, one line, its columns known:

    corpus: {preset: langchain, collection: NAME}          # langchain-postgres PGVector
    corpus: {preset: llamaindex, table: public.data_NAME}  # llama-index PGVectorStore

``langchain``: the rows of ``langchain_pg_embedding`` (``id``, ``document``, ``embedding``)
whose ``collection_id`` is the collection named NAME in ``langchain_pg_collection``, in the
schema the library put them in (``schema:``, default ``public``); no tsvector (the keyword
index stands in). ``llamaindex``: the table PGVectorStore made (``data_`` and its
``table_name``), ``node_id`` as the id, ``text``, ``embedding``, and the generated
``text_search_tsv`` when the store was made with ``hybrid_search=True`` (the check,
:mod:`eval_harness.datasets.live_mapping`, looks; its ``text_search_config`` is then the
dataset's language). The collection and the tsvector are resolved against the store there.

Relation and column names are read as PostgreSQL reads them in SQL (:func:`parse_sql_name`):
an unquoted name (letters, digits, ``_``, ``$``) is folded to lower case, so ``Rag.L2Insights``
is ``rag.l2insights``; a double-quoted one keeps its case and may hold any character, dots
and spaces included (``'"Probe Mixed"."L2 Insights"'`` in YAML; ``""`` is a quote inside
it). A relation may carry its schema (``public`` otherwise). Names are only parsed here;
whether they exist is checked against the store before any work
(:mod:`eval_harness.datasets.live`). Either kind may carry the weights calibration found for it
(``hybrid_search: {semantic, keyword}``), which override the global ``hybrid_search``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainValidator, model_validator
from pydantic.dataclasses import dataclass as section
from pydantic_core import ArgsKwargs

from eval_harness.settings.errors import problem, unknown
from eval_harness.settings.values import SECTION, Flag, Share, resolved_path, validated

DATASET_KEYS = ("path", "language", "split", "embeddings", "embedder", "live", "hybrid_search")
LIVE_KEYS = ("corpus", "ground_truth", "queries", "write_judge_scores")
CORPUS_KEYS = ("relation", "id", "content", "embedding", "tsvector")
GROUND_TRUTH_KEYS = ("relation", "id", "query", "expected_docs")
QUERIES_KEYS = ("relation", "id", "query")
DATASET_WEIGHT_KEYS = ("semantic", "keyword")
# corpus: {preset: ...}: the keys each preset takes (module docstring)
PRESET_KEYS = {"langchain": ("preset", "collection", "schema"),
               "llamaindex": ("preset", "table")}
LANGCHAIN_TABLE, LANGCHAIN_COLLECTIONS = "langchain_pg_embedding", "langchain_pg_collection"
LLAMAINDEX_TSVECTOR = "text_search_tsv"  # PGVectorStore(hybrid_search=True)'s generated column
EMBEDDER_PROVIDERS = ("local", "openai")

# One part of a name as SQL writes it: unquoted (folded to lower case) or double-quoted
# (kept as written; "" is one quote inside).
_NAME_PART = re.compile(r'\s*(?:([A-Za-z_][A-Za-z0-9_$]*)|"((?:[^"]|"")*)")\s*')
_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_$]*$")  # prints without quotes
MAX_NAME_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1: a longer name would be cut short


@dataclass(frozen=True)
class Relation:
    """A schema-qualified relation name (``public`` when the config gave none)."""

    schema: str
    name: str

    def __str__(self) -> str:
        return sql_name(self.schema, self.name)


def sql_name(*parts: str) -> str:
    """A (dotted) name as SQL must write it, for messages and GRANT statements a user may
    paste: each part quoted only when unquoted SQL would not read it back as it is
    (``rag.l2_insights``, ``"Probe Mixed"."L2 Insights"``)."""
    return ".".join(part if _PLAIN_NAME.match(part) else '"' + part.replace('"', '""') + '"'
                    for part in parts)


def parse_sql_name(text: str) -> list[str] | None:
    """The parts of a dotted name read as PostgreSQL reads one in SQL (module docstring):
    unquoted parts folded to lower case, quoted ones as written; None when ``text`` is not
    such a name (an empty or over-long part, a stray quote or character)."""
    parts, position = [], 0
    while True:
        match = _NAME_PART.match(text, position)
        if match is None:
            return None
        part = match.group(1).lower() if match.group(1) is not None \
            else match.group(2).replace('""', '"')
        if not part or len(part.encode("utf-8")) > MAX_NAME_BYTES or "\x00" in part:
            return None
        parts.append(part)
        position = match.end()
        if position == len(text):
            return parts
        if text[position] != ".":
            return None
        position += 1


@dataclass(frozen=True)
class CorpusMapping:
    relation: Relation
    id: str
    content: str
    embedding: str
    tsvector: str | None  # None: to_tsvector(language, content)
    preset: str | None = None      # langchain | llamaindex: the library that made the store
    collection: str | None = None  # langchain: the collection's name (langchain_pg_collection)

    @property
    def collections(self) -> Relation:
        """LangChain's table of collections, beside its embeddings."""
        return Relation(self.relation.schema, LANGCHAIN_COLLECTIONS)


@dataclass(frozen=True)
class GroundTruthMapping:
    relation: Relation
    id: str
    query: str
    expected_docs: str | None  # None: a ``queries`` mapping, no labels (judges make them)

    @property
    def labelled(self) -> bool:
        return self.expected_docs is not None


@dataclass(frozen=True)
class LiveMapping:
    corpus: CorpusMapping
    # from ``ground_truth`` or, unlabelled, ``queries``; None: the corpus alone is mapped
    ground_truth: GroundTruthMapping | None
    write_judge_scores: bool = False


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    path: Path | None = None            # the BEIR folder of an ingested dataset
    language: str = "english"
    split: str = "test"
    embeddings: Path | None = None      # embeddings.npz kept outside the dataset folder
    embedder: str | None = None         # "local:all-MiniLM-L6-v2", "openai:text-embedding-3-small"
    live: LiveMapping | None = None
    weights: DatasetWeights | None = None
    language_given: bool = False        # ``language`` was in config.yaml (not the default)

    @property
    def is_live(self) -> bool:
        return self.live is not None


# --- the file's form: what config.yaml may hold under datasets: ----------------------------

def _shown(value: Any, limit: int = 80) -> str:
    """``value`` as a message quotes it, cut at ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def relation_of(value: Any) -> Relation | None:
    """``value`` read as a relation name, ``schema.name`` or ``name`` (schema ``public``), as
    SQL reads it; None when it is no such name."""
    if isinstance(value, Relation):
        return value
    names = parse_sql_name(value) if isinstance(value, str) else None
    if names is None or len(names) > 2:
        return None
    return Relation(*(["public"] + names)[-2:])


def _relation(value: Any) -> Relation:
    relation = relation_of(value)
    if relation is None:
        raise problem("must be a table or view name as SQL writes it, such as "
                      "public.l2_insights or '\"My Schema\".\"My Table\"', got "
                      f"{_shown(value)}.")
    return relation


def _column(value: Any) -> str:
    names = parse_sql_name(value) if isinstance(value, str) else None
    if names is None or len(names) != 1:
        raise problem("must be a column name as SQL writes it (content, or '\"Content\"' for "
                      f"a quoted one), got {_shown(value)}.")
    return names[0]


def _collection_needed(value: Any) -> str:
    return ("must be the name of the LangChain collection to evaluate (the collection_name you "
            f"gave PGVector; {LANGCHAIN_COLLECTIONS}.name), got {_shown(value)}.")


def _collection(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise problem(_collection_needed(value))
    return value


def _langchain_schema(value: Any) -> str:
    names = parse_sql_name(value) if isinstance(value, str) else None
    if names is None or len(names) != 1:
        raise problem(f"must be the schema holding {LANGCHAIN_TABLE} as SQL writes it "
                      f"(default public), got {_shown(value)}.")
    return names[0]


def _llamaindex_table(value: Any) -> Relation:
    relation = relation_of(value)
    if relation is None:
        raise problem(_table_needed(value))
    return relation


def _embedder(value: Any) -> str:
    """``provider:model`` with a known provider, as given."""
    text = str(value) if value is not None else ""
    provider, colon, model = text.partition(":")
    if not colon or provider not in EMBEDDER_PROVIDERS or not model.strip():
        raise problem("must be provider:model with provider local or openai (e.g. "
                      "local:all-MiniLM-L6-v2 or openai:text-embedding-3-small), got "
                      f"{value!r}.")
    return text


RelationName = Annotated[Relation, PlainValidator(_relation)]
ColumnName = Annotated[str, PlainValidator(_column)]


def _a_mapping_with(data: Any, keys: tuple[str, ...], required: tuple[str, ...]) -> Any:
    """The checks of a mapping of names read from the file: a mapping, no other key, each of
    ``required`` given."""
    if isinstance(data, ArgsKwargs):
        return data
    if not isinstance(data, Mapping):
        raise problem(f"must be a mapping with keys {', '.join(keys)}.")
    extra = [str(key) for key in data if str(key) not in keys]
    if extra:
        raise unknown(extra, keys)
    for key in required:
        if data.get(key) is None:
            raise problem("is missing.", key=key)
    return data


@section(frozen=True, config=SECTION)
class CorpusEntry:
    """``live.corpus``: its relation and columns, or a RAG library's preset (module
    docstring); the keys of the form given are checked before the values."""

    # the relation of the documents, schema.name (not with a preset)
    relation: RelationName | None = None
    # its id column: integer, text or uuid (not with a preset)
    id: ColumnName | None = None
    # its text column (not with a preset)
    content: ColumnName | None = None
    # its vector column (not with a preset)
    embedding: ColumnName | None = None
    tsvector: ColumnName | None = None   # None: to_tsvector(language, content)
    preset: str | None = None            # langchain or llamaindex: the library that made it
    # langchain: the collection_name given to PGVector
    collection: Annotated[str, PlainValidator(_collection)] | None = None
    # langchain: the schema of its tables
    schema: Annotated[str, PlainValidator(_langchain_schema)] = "public"
    # llamaindex: the table PGVectorStore made (data_ and its table_name)
    table: Annotated[Relation, PlainValidator(_llamaindex_table)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_form(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "preset" not in data:
            return _a_mapping_with(data, CORPUS_KEYS, ("relation", "id", "content", "embedding"))
        preset = data["preset"]
        if preset not in PRESET_KEYS:
            raise problem("must be langchain (langchain-postgres PGVector) or llamaindex "
                          f"(llama-index PGVectorStore), got {_shown(preset)}.", key="preset")
        _a_mapping_with(data, PRESET_KEYS[preset], ())
        if preset == "langchain" and data.get("collection") is None:
            raise problem(_collection_needed(None), key="collection")
        if preset == "llamaindex" and data.get("table") is None:
            raise problem(_table_needed(None), key="table")
        return data

    def mapping(self) -> CorpusMapping:
        """The corpus as the code reads it (a preset's relation and columns filled in)."""
        if self.preset == "langchain":
            return CorpusMapping(Relation(self.schema, LANGCHAIN_TABLE), "id", "document",
                                 "embedding", None, preset="langchain",
                                 collection=self.collection)
        if self.preset == "llamaindex":
            assert self.table is not None
            return CorpusMapping(self.table, "node_id", "text", "embedding", LLAMAINDEX_TSVECTOR,
                                 preset="llamaindex")
        assert self.relation and self.id and self.content and self.embedding
        return CorpusMapping(self.relation, self.id, self.content, self.embedding, self.tsvector)


def _table_needed(value: Any) -> str:
    return ("must be the table PGVectorStore made, data_ and its table_name (e.g. "
            f"public.data_docs), got {_shown(value)}.")


@section(frozen=True, config=SECTION)
class GroundTruthEntry:
    """``live.ground_truth``: queries with their expected documents."""

    relation: RelationName       # the table or view of the evaluation queries
    id: ColumnName               # its id column
    query: ColumnName            # the query text
    expected_docs: ColumnName    # an array of the corpus ids each query should find

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return _a_mapping_with(data, GROUND_TRUTH_KEYS, GROUND_TRUTH_KEYS)


@section(frozen=True, config=SECTION)
class QueriesEntry:
    """``live.queries``: queries without labels (the judges label them)."""

    relation: RelationName       # the table or view of the queries
    id: ColumnName               # its id column
    query: ColumnName            # the query text

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return _a_mapping_with(data, QUERIES_KEYS, QUERIES_KEYS)


@section(frozen=True, config=SECTION)
class LiveEntry:
    """``datasets.<name>.live``: the RAG system's relations, read in place."""

    corpus: CorpusEntry
    ground_truth: GroundTruthEntry | None = None
    queries: QueriesEntry | None = None
    # true: the judges' labels may be written into the ground truth's table (only read otherwise)
    write_judge_scores: Flag = False

    @model_validator(mode="before")
    @classmethod
    def _at_most_one_source(cls, data: Any) -> Any:
        if isinstance(data, ArgsKwargs):
            return data
        if not isinstance(data, Mapping):
            raise problem("must be a mapping with corpus and, optionally, ground_truth or "
                          "queries.")
        extra = [str(key) for key in data if str(key) not in LIVE_KEYS]
        if extra:
            raise unknown(extra, LIVE_KEYS)
        if "corpus" not in data:
            raise problem("is missing: the relation holding the documents (id, content, "
                          "embedding).", key="corpus")
        sourced = data.get("ground_truth") is not None or data.get("queries") is not None
        if data.get("ground_truth") is not None and data.get("queries") is not None:
            raise problem("takes at most one of 'ground_truth' (queries with expected_docs) "
                          "and 'queries' (queries without labels, which the judges label); set "
                          "the other to null or leave it out.")
        # Flag is a strict bool: anything but True is false or refused by the field itself
        if data.get("write_judge_scores") is True and not sourced:
            raise problem("is true, but no ground_truth (or queries) relation is mapped to "
                          "write the judge scores into; map one or set it to false.",
                          key="write_judge_scores")
        return data

    def mapping(self) -> LiveMapping:
        truth: GroundTruthMapping | None = None
        if self.ground_truth is not None:
            gt = self.ground_truth
            truth = GroundTruthMapping(gt.relation, gt.id, gt.query, gt.expected_docs)
        elif self.queries is not None:
            q = self.queries
            truth = GroundTruthMapping(q.relation, q.id, q.query, None)
        return LiveMapping(self.corpus.mapping(), truth, self.write_judge_scores)


@section(frozen=True, config=SECTION)
class DatasetWeights:
    """Weights calibration wrote for one dataset (``datasets.<name>.hybrid_search``)."""

    # the calibrated semantic weight (written by calibrate)
    semantic: Share
    # the calibrated keyword weight (1 - semantic)
    keyword: Share


@section(frozen=True, config=SECTION)
class DatasetEntry:
    """One entry of ``datasets:`` (module docstring); paths relative to the config file."""

    # an ingested dataset: its BEIR folder (corpus.jsonl, queries.jsonl, qrels/)
    path: Annotated[Path, BeforeValidator(resolved_path)] | None = None
    # the text search configuration of the keyword side (german, simple, ...)
    language: str = "english"
    split: str = "test"          # the qrels split read (qrels/<split>.tsv)
    # embeddings.npz kept outside the dataset folder (None: the folder's own, or computed)
    embeddings: Annotated[Path, BeforeValidator(resolved_path)] | None = None
    # provider:model that embedded the corpus (local:NAME or openai:NAME); needed for live
    embedder: Annotated[str, PlainValidator(_embedder)] | None = None
    live: LiveEntry | None = None
    hybrid_search: DatasetWeights | None = None

    @model_validator(mode="before")
    @classmethod
    def _ingested_or_live(cls, data: Any) -> Any:
        if isinstance(data, ArgsKwargs):
            return data
        needs = ("needs a 'path' (an ingested BEIR folder) or a 'live' mapping onto your own "
                 "tables.")
        if not isinstance(data, Mapping):
            raise problem(needs)
        extra = [str(key) for key in data if str(key) not in DATASET_KEYS]
        if extra:
            raise unknown(extra, DATASET_KEYS)
        if "live" not in data and "path" not in data:
            raise problem(needs)
        if "live" in data and "path" in data:
            raise problem("has both 'path' and 'live': a dataset is either ingested from a "
                          "folder or read in place.")
        if "live" in data and data.get("embedder") is None:
            raise problem("is needed for a live dataset: the model that made the corpus "
                          "embeddings (e.g. openai:text-embedding-3-small), so queries are "
                          "embedded by the same one.", key="embedder")
        if not data.get("embeddings"):
            data = {**data, "embeddings": None}
        if not data.get("embedder"):
            data = {**data, "embedder": None}
        return data


def dataset_config(name: str, entry: DatasetEntry, given: Mapping[str, Any]) -> DatasetConfig:
    """The typed dataset of one validated entry (``given``: the entry as the file had it)."""
    return DatasetConfig(
        name=name, path=entry.path, language=entry.language, split=entry.split,
        embeddings=entry.embeddings, embedder=entry.embedder,
        live=entry.live.mapping() if entry.live is not None else None,
        weights=entry.hybrid_search, language_given="language" in given)


def parse_datasets(section: Any, root: Path) -> dict[str, DatasetConfig]:
    """Each entry of ``datasets:`` (a mapping of names), paths relative to ``root``."""
    entries = validated(dict[str, DatasetEntry], section or {}, ("datasets",), {"root": root})
    return {str(name): dataset_config(str(name), entry, section[name])
            for name, entry in entries.items()}
