"""The ``datasets:`` section of ``config.yaml``: ingested folders and live mappings.

A dataset is either *ingested* (``path``: a BEIR folder copied into the harness schema) or
*live* (``live``: the RAG system's own relations, read in place). A live mapping names every
relation and column the harness reads; the keys are fixed (users' configs and the README rely
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
``queries: {relation, id, query}``. Exactly one of the two is given; the queries of such a
dataset carry no expected documents, and its labels come from the judges (``eval-harness
judge``, then ``calibrate --labels judges``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

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


class DatasetConfigError(ValueError):
    """A dataset entry is invalid; the message names the dotted key (the caller adds the file)."""


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
    ground_truth: GroundTruthMapping  # from ``ground_truth`` or, unlabelled, ``queries``
    write_judge_scores: bool = False


@dataclass(frozen=True)
class DatasetWeights:
    """Weights calibration wrote for one dataset (``datasets.<name>.hybrid_search``)."""

    semantic: float
    keyword: float


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


def parse_embedder(value: Any, where: str) -> str:
    """``provider:model`` with a known provider, as given."""
    text = str(value) if value is not None else ""
    provider, colon, model = text.partition(":")
    if not colon or provider not in EMBEDDER_PROVIDERS or not model.strip():
        raise DatasetConfigError(
            f"'{where}' must be provider:model with provider local or openai "
            f"(e.g. local:all-MiniLM-L6-v2 or openai:text-embedding-3-small), got {value!r}.")
    return text


def parse_datasets(section: Mapping[str, Any], root: Path,
                   reject_unknown_keys) -> dict[str, DatasetConfig]:
    """Each entry of ``datasets:``; ``reject_unknown_keys(mapping, where, known)`` is the
    settings' check (it names close matches)."""
    result = {}
    for name, entry in section.items():
        where = f"datasets.{name}"
        if not isinstance(entry, Mapping):
            raise DatasetConfigError(f"'{where}' needs a 'path' (an ingested BEIR folder) or a "
                                     "'live' mapping onto your own tables.")
        reject_unknown_keys(entry, where, DATASET_KEYS)
        live = _live(entry["live"], where, reject_unknown_keys) if "live" in entry else None
        if live is None and "path" not in entry:
            raise DatasetConfigError(f"'{where}' needs a 'path' (an ingested BEIR folder) or a "
                                     "'live' mapping onto your own tables.")
        if live is not None and "path" in entry:
            raise DatasetConfigError(f"'{where}' has both 'path' and 'live': a dataset is "
                                     "either ingested from a folder or read in place.")
        embeddings = entry.get("embeddings")
        embedder = entry.get("embedder")
        if live is not None and embedder is None:
            raise DatasetConfigError(
                f"'{where}.embedder' is needed for a live dataset: the model that made the "
                "corpus embeddings (e.g. openai:text-embedding-3-small), so queries are "
                "embedded by the same one.")
        result[str(name)] = DatasetConfig(
            name=str(name),
            path=(root / str(entry["path"])).resolve() if "path" in entry else None,
            language=str(entry.get("language", "english")),
            split=str(entry.get("split", "test")),
            embeddings=(root / str(embeddings)).resolve() if embeddings else None,
            embedder=parse_embedder(embedder, f"{where}.embedder") if embedder else None,
            live=live,
            weights=_weights(entry.get("hybrid_search"), f"{where}.hybrid_search",
                             reject_unknown_keys),
            language_given="language" in entry)
    return result


def _weights(section: Any, where: str, reject_unknown_keys) -> DatasetWeights | None:
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise DatasetConfigError(f"'{where}' must be a mapping with semantic and keyword.")
    reject_unknown_keys(section, where, DATASET_WEIGHT_KEYS)
    values = []
    for key in DATASET_WEIGHT_KEYS:
        value = section.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0.0 <= value <= 1.0:
            raise DatasetConfigError(f"'{where}.{key}' must be a number in [0, 1], "
                                     f"got {value!r}.")
        values.append(float(value))
    return DatasetWeights(*values)


def _live(section: Any, where: str, reject_unknown_keys) -> LiveMapping:
    where = f"{where}.live"
    if not isinstance(section, Mapping):
        raise DatasetConfigError(f"'{where}' must be a mapping with corpus and "
                                 "ground_truth (or queries).")
    reject_unknown_keys(section, where, LIVE_KEYS)
    if "corpus" not in section:
        raise DatasetConfigError(f"'{where}.corpus' is missing: the relation holding the "
                                 "documents (id, content, embedding).")
    if isinstance(section["corpus"], Mapping) and "preset" in section["corpus"]:
        corpus = _preset(section["corpus"], f"{where}.corpus", reject_unknown_keys)
    else:
        corpus = _mapping(section["corpus"], f"{where}.corpus", CORPUS_KEYS,
                          reject_unknown_keys, optional=("tsvector",))
    ground_truth, queries = section.get("ground_truth"), section.get("queries")
    if (ground_truth is None) == (queries is None):
        raise DatasetConfigError(
            f"'{where}' needs exactly one of 'ground_truth' (queries with expected_docs) and "
            "'queries' (queries without labels, which the judges label); set the other to "
            "null or leave it out.")
    if ground_truth is not None:
        mapped = _mapping(ground_truth, f"{where}.ground_truth", GROUND_TRUTH_KEYS,
                          reject_unknown_keys, optional=())
    else:
        mapped = dict(_mapping(queries, f"{where}.queries", QUERIES_KEYS, reject_unknown_keys,
                               optional=()), expected_docs=None)
    write = section.get("write_judge_scores", False)
    if not isinstance(write, bool):
        raise DatasetConfigError(f"'{where}.write_judge_scores' must be true or false.")
    return LiveMapping(CorpusMapping(**corpus), GroundTruthMapping(**mapped), write)


def _preset(section: Mapping[str, Any], where: str, reject_unknown_keys) -> dict[str, Any]:
    """The corpus mapping of a store a RAG library made (module docstring)."""
    preset = section["preset"]
    if preset not in PRESET_KEYS:
        raise DatasetConfigError(f"'{where}.preset' must be langchain (langchain-postgres "
                                 "PGVector) or llamaindex (llama-index PGVectorStore), got "
                                 f"{_shown(preset)}.")
    reject_unknown_keys(section, where, PRESET_KEYS[preset])
    if preset == "langchain":
        collection = section.get("collection")
        if not isinstance(collection, str) or not collection:
            raise DatasetConfigError(
                f"'{where}.collection' must be the name of the LangChain collection to "
                f"evaluate (the collection_name you gave PGVector; {LANGCHAIN_COLLECTIONS}"
                f".name), got {_shown(collection)}.")
        schema = section.get("schema", "public")
        names = parse_sql_name(schema) if isinstance(schema, str) else None
        if names is None or len(names) != 1:
            raise DatasetConfigError(f"'{where}.schema' must be the schema holding "
                                     f"{LANGCHAIN_TABLE} as SQL writes it (default public), "
                                     f"got {_shown(schema)}.")
        return dict(relation=Relation(names[0], LANGCHAIN_TABLE), id="id", content="document",
                    embedding="embedding", tsvector=None, preset=preset, collection=collection)
    table = section.get("table")
    names = parse_sql_name(table) if isinstance(table, str) else None
    if names is None or len(names) > 2:
        raise DatasetConfigError(
            f"'{where}.table' must be the table PGVectorStore made, data_ and its table_name "
            f"(e.g. public.data_docs), got {_shown(table)}.")
    return dict(relation=Relation(*(["public"] + names)[-2:]), id="node_id", content="text",
                embedding="embedding", tsvector=LLAMAINDEX_TSVECTOR, preset=preset)


def _mapping(section: Any, where: str, keys: tuple[str, ...], reject_unknown_keys, *,
             optional: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(section, Mapping):
        raise DatasetConfigError(f"'{where}' must be a mapping with keys {', '.join(keys)}.")
    reject_unknown_keys(section, where, keys)
    parsed: dict[str, Any] = {}
    for key in keys:
        value = section.get(key)
        if value is None and key in optional:
            parsed[key] = None
            continue
        if value is None:
            raise DatasetConfigError(f"'{where}.{key}' is missing.")
        names = parse_sql_name(value) if isinstance(value, str) else None
        if key == "relation":
            if names is None or len(names) > 2:
                raise DatasetConfigError(
                    f"'{where}.relation' must be a table or view name as SQL writes it, such "
                    f"as public.l2_insights or '\"My Schema\".\"My Table\"', got "
                    f"{_shown(value)}.")
            parsed[key] = Relation(*(["public"] + names)[-2:])
        elif names is None or len(names) != 1:
            raise DatasetConfigError(f"'{where}.{key}' must be a column name as SQL writes it "
                                     f"(content, or '\"Content\"' for a quoted one), got "
                                     f"{_shown(value)}.")
        else:
            parsed[key] = names[0]
    return parsed


def _shown(value: Any, limit: int = 80) -> str:
    """``value`` as a message quotes it, cut at ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
