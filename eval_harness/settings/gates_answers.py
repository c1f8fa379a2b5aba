"""``quality_gates.answers``: the RAG system's own answers table, read in place by the gates.

The long form of ``quality_gates.answers_relation`` (which names a relation holding the
answers contract as it is). Like a live corpus mapping, it names the relation and the
column of each field::

    quality_gates:
      answers:
        relation: rag.answers      # table or view of the RAG system (only read)
        id: id                     # integer or text column, unique
        query: query               # text
        answer: answer             # text (Markdown)
        created_at: created_at     # timestamptz: the daily partitions
        sources: {column: source_ids, kind: ids}   # ids: integer[] of corpus ids
        dataset: scifact           # whose corpus the ids are (kind ids only)

``sources.kind``: ``ids``, an integer array of the dataset's corpus ids whose texts are read
from that dataset's corpus in citation order (``[1]`` is the first id); ``json``, the answers
contract's ``[{"id", "text"}]`` list (json or jsonb). The column names default to the field
names (``id``, ``query``, ...; ``sources.column``: ``sources``); ``relation`` and
``sources.kind`` are required, ``dataset`` too for ``ids``. Names are read as SQL reads them
(:func:`eval_harness.settings.datasets.parse_sql_name`); whether they exist, have usable types
and may be read is checked against the store before any work
(:mod:`eval_harness.gates.answers_mapping`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import PlainValidator, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import ArgsKwargs, PydanticCustomError

from eval_harness.settings.datasets import Relation, parse_sql_name, relation_of
from eval_harness.settings.errors import problem, unknown
from eval_harness.settings.values import SECTION

WHERE = "quality_gates.answers"  # its dotted key, for messages about it
ANSWERS_KEYS = ("relation", "id", "query", "answer", "created_at", "sources", "dataset")
SOURCES_KEYS = ("column", "kind")
SOURCE_KINDS = ("ids", "json")


def _column(default: str) -> Callable[[Any], str]:
    def column(value: Any) -> str:
        names = parse_sql_name(value) if isinstance(value, str) else None
        if names is None or len(names) != 1:
            raise problem(f"must be a column name as SQL writes it (e.g. {default}, or "
                          f"'\"{default.title()}\"' for a quoted one), got {value!r}.")
        return names[0]
    return column


def _relation(value: Any) -> Relation:
    relation = relation_of(value)
    if relation is None:
        raise problem(_relation_needed(value))
    return relation


@dataclass(frozen=True, config=SECTION)
class AnswersMapping:
    """``quality_gates.answers``: where the RAG system keeps its answers (module docstring).
    ``sources`` and ``kind`` are the file's ``sources: {column, kind}``."""

    relation: Annotated[Relation, PlainValidator(_relation)]   # the answers table or view
    id: Annotated[str, PlainValidator(_column("id"))] = "id"   # its unique id column
    query: Annotated[str, PlainValidator(_column("query"))] = "query"   # the question
    answer: Annotated[str, PlainValidator(_column("answer"))] = "answer"   # the answer (Markdown)
    # timestamptz: the day partitions
    created_at: Annotated[str, PlainValidator(_column("created_at"))] = "created_at"
    # in the file sources: {column, kind}: the column of the cited sources ...
    sources: Annotated[str, PlainValidator(_column("sources"))] = "sources"
    kind: Literal["ids", "json"] = "json"   # ... and their kind: ids (integer[]) or json
    dataset: str | None = None    # kind ids: the dataset whose corpus the ids are

    def __str__(self) -> str:
        return str(self.relation)

    @model_validator(mode="before")
    @classmethod
    def _from_the_file(cls, data: Any) -> Any:
        """The file's form: ``sources: {column, kind}``, ``relation`` required."""
        if not isinstance(data, Mapping):
            if isinstance(data, ArgsKwargs):  # built in code, not read from a file
                return data
            raise problem("must be a mapping with relation, id, query, answer, created_at, "
                          "sources and (for sources.kind ids) dataset.")
        extra = [str(key) for key in data if str(key) not in ANSWERS_KEYS]
        if extra:
            raise unknown(extra, ANSWERS_KEYS)
        if "relation" not in data:
            raise problem(_relation_needed(None), key="relation")
        sources = data.get("sources")
        if not isinstance(sources, Mapping):
            raise problem("must be a mapping {column, kind} with kind ids (an integer array "
                          "of corpus ids) or json ([{id, text}]).", key="sources")
        extra = [str(key) for key in sources if str(key) not in SOURCES_KEYS]
        if extra:
            raise unknown(extra, SOURCES_KEYS, key="sources")
        kind = sources.get("kind")
        if kind not in SOURCE_KINDS:
            raise problem("must be ids (an integer array of the dataset's corpus ids) or json "
                          f"(a [{{id, text}}] list), got {kind!r}.", key="sources.kind")
        dataset = data.get("dataset")
        if kind == "ids" and (not isinstance(dataset, str) or not dataset.strip()):
            raise problem("must name the dataset whose corpus the source ids are (a live or "
                          f"ingested dataset), got {dataset!r}.", key="dataset")
        if kind == "json" and dataset is not None:
            raise problem("is only read with sources.kind ids (json sources carry their own "
                          "text); remove it.", key="dataset")
        column = sources.get("column", "sources")
        try:
            _column("sources")(column)
        except PydanticCustomError as exc:
            raise problem(str((exc.context or {})["rest"]), key="sources.column") from None
        flat = {key: value for key, value in data.items() if key != "sources"}
        return {**flat, "sources": column, "kind": kind}


def _relation_needed(value: Any) -> str:
    return ("must be the RAG system's answers table or view as SQL writes it, such as "
            f"rag.answers, got {value!r}.")
