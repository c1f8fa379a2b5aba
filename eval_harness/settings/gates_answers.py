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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_harness.settings.datasets import Relation, parse_sql_name
from eval_harness.settings.errors import ConfigError, reject_unknown_keys

WHERE = "quality_gates.answers"
ANSWERS_KEYS = ("relation", "id", "query", "answer", "created_at", "sources", "dataset")
COLUMN_KEYS = ("id", "query", "answer", "created_at")
SOURCES_KEYS = ("column", "kind")
SOURCE_KINDS = ("ids", "json")


@dataclass(frozen=True)
class AnswersMapping:
    """``quality_gates.answers``: where the RAG system keeps its answers (module docstring)."""

    relation: Relation
    id: str = "id"
    query: str = "query"
    answer: str = "answer"
    created_at: str = "created_at"
    sources: str = "sources"
    kind: str = "json"            # ids | json
    dataset: str | None = None    # kind ids: the dataset whose corpus the ids are

    def __str__(self) -> str:
        return str(self.relation)


def _column(section: Mapping[str, Any], key: str, default: str, where: str) -> str:
    value = section.get(key, default)
    names = parse_sql_name(value) if isinstance(value, str) else None
    if names is None or len(names) != 1:
        raise ConfigError(f"'{where}.{key}' must be a column name as SQL writes it (e.g. "
                          f"{default}, or '\"{default.title()}\"' for a quoted one), got "
                          f"{value!r}.")
    return names[0]


def parse_answers_mapping(section: Any) -> AnswersMapping:
    """``quality_gates.answers`` parsed (names only; the store is checked later)."""
    if not isinstance(section, Mapping):
        raise ConfigError(f"'{WHERE}' must be a mapping with relation, id, query, answer, "
                          "created_at, sources and (for sources.kind ids) dataset.")
    reject_unknown_keys(section, WHERE, ANSWERS_KEYS)
    relation = section.get("relation")
    names = parse_sql_name(relation) if isinstance(relation, str) else None
    if names is None or len(names) > 2:
        raise ConfigError(f"'{WHERE}.relation' must be the RAG system's answers table or view "
                          f"as SQL writes it, such as rag.answers, got {relation!r}.")
    columns = {key: _column(section, key, key, WHERE) for key in COLUMN_KEYS}
    sources = section.get("sources")
    if not isinstance(sources, Mapping):
        raise ConfigError(f"'{WHERE}.sources' must be a mapping {{column, kind}} with kind "
                          "ids (an integer array of corpus ids) or json ([{id, text}]).")
    reject_unknown_keys(sources, f"{WHERE}.sources", SOURCES_KEYS)
    kind = sources.get("kind")
    if kind not in SOURCE_KINDS:
        raise ConfigError(f"'{WHERE}.sources.kind' must be ids (an integer array of the "
                          "dataset's corpus ids) or json (a [{id, text}] list), got "
                          f"{kind!r}.")
    column = _column(sources, "column", "sources", f"{WHERE}.sources")
    dataset = section.get("dataset")
    if kind == "ids" and (not isinstance(dataset, str) or not dataset.strip()):
        raise ConfigError(f"'{WHERE}.dataset' must name the dataset whose corpus the source "
                          f"ids are (a live or ingested dataset), got {dataset!r}.")
    if kind == "json" and dataset is not None:
        raise ConfigError(f"'{WHERE}.dataset' is only read with sources.kind ids (json "
                          "sources carry their own text); remove it.")
    return AnswersMapping(Relation(*(["public"] + names)[-2:]), sources=column, kind=kind,
                          dataset=dataset, **columns)
