"""Answers in place: the RAG system's own answers table, checked and read through a mapping.

``quality_gates.answers`` (:mod:`eval_harness.settings.gates_answers`) maps the relation
where the RAG system keeps its served answers. Before any work, :func:`check_answers_mapping`
checks it against the store, reading only the catalog (and, for a relation without a unique
index on its id, the id column once): the relation exists and this role may SELECT it, each
mapped column exists with a usable type, the ids are unique, and for ``sources.kind: ids``
the array holds ids of the kind the corpus has (integer, text or uuid) and the dataset
exists, live (its corpus mapping in config.yaml) or ingested (its copy in the harness schema). Each problem is one sentence naming the key
(:class:`AnswersMappingError`).

The checked mapping (:class:`MappedAnswers`) then stands wherever the gates read the
answers relation: :func:`eval_harness.gates.sql.relation_sql` composes it as a subquery with
the answers contract's columns (``id`` as text, ``query``, ``answer``, ``sources`` as jsonb,
``created_at``). With ``kind: ids`` each answer's ``sources`` is resolved from the corpus,
in citation order (``[1]`` is the first id): ``{"id": 4983, "text": "..."}`` (the id as the
array holds it: a text or uuid id is a JSON string); an id that is not a document of the
corpus becomes ``{"id": 4983, "text": "", "missing": true}``, a source
without text (the citation gate counts a marker citing it as invalid and names the id). The
content hash is taken over the resolved sources, so an edit to one cited document re-gates
exactly the answers citing it. Nothing is ever written to the mapped relations: results,
logs and queues stay in the harness schema, and ``answers import`` is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from eval_harness.settings import Settings
from eval_harness.settings.datasets import Relation, sql_name
from eval_harness.settings.gates_answers import WHERE, AnswersMapping
from eval_harness.datasets import register
from eval_harness.store.connection import StoreLocation
from eval_harness.datasets.corpus import Corpus
from eval_harness.datasets.live_mapping import (ID_ARRAY_TYPES, ID_TYPES, TEXT_TYPES, UUID_TYPES,
                                             check_mapping, relation_columns)
from eval_harness.datasets.live_rows import EXAMPLES, LiveMappingError, has_unique_index

TIMESTAMP_TYPES = ("timestamp with time zone",)
JSON_TYPES = ("jsonb", "json")


class AnswersMappingError(ValueError):
    """``quality_gates.answers`` does not fit the store; one sentence naming the key."""


@dataclass(frozen=True)
class MappedAnswers:
    """``quality_gates.answers`` checked against the store: the relation the gates read in
    place of the harness's ``answers`` (module docstring). ``corpus``: where ``kind: ids``
    reads the sources' texts."""

    mapping: AnswersMapping
    corpus: Corpus | None = None

    def __str__(self) -> str:
        return str(self.mapping.relation)

    def from_item(self) -> sql.Composed:
        """A subquery with the answers contract's columns, for ``FROM ... AS alias``."""
        m = self.mapping
        column = sql.Identifier("m", m.sources)
        if m.kind == "json":
            sources = sql.SQL("coalesce({}::jsonb, '[]'::jsonb)").format(column)
        else:
            assert self.corpus is not None
            corpus = self.corpus
            # a corpus read through the harness's ids is matched by its own ids as text;
            # any other by its id column, in the column's type (check_answers_mapping)
            found = (sql.SQL("{} = u.e::text").format(corpus.external_id_of("d"))
                     if corpus.has_own_ids else sql.SQL("{} = u.e").format(corpus.id_of("d")))
            sources = sql.SQL("""(
                SELECT coalesce(jsonb_agg(CASE WHEN {did} IS NULL
                         THEN jsonb_build_object('id', u.e, 'text', '', 'missing', true)
                         ELSE jsonb_build_object('id', u.e, 'text', {content}) END
                       ORDER BY u.n), '[]'::jsonb)
                FROM unnest({column}) WITH ORDINALITY AS u (e, n)
                LEFT JOIN {corpus} ON {found} AND {rows})""").format(
                did=corpus.id_of("d"), found=found, content=corpus.content_of("d"), column=column,
                corpus=corpus.table("d"), rows=corpus.rows_of_dataset("d"))
        return sql.SQL("""(SELECT m.{id}::text AS id, coalesce(m.{query}, '') AS query,
                                  coalesce(m.{answer}, '') AS answer, {sources} AS sources,
                                  m.{created_at} AS created_at
                           FROM {relation} AS m)""").format(
            id=sql.Identifier(m.id), query=sql.Identifier(m.query),
            answer=sql.Identifier(m.answer), sources=sources,
            created_at=sql.Identifier(m.created_at),
            relation=sql.Identifier(m.relation.schema, m.relation.name))


def answers_relation(conn: psycopg.Connection, settings: Settings) -> str | MappedAnswers:
    """What the gates read: ``quality_gates.answers`` checked (:func:`check_answers_mapping`),
    else the relation ``quality_gates.answers_relation`` names."""
    gates = settings.quality_gates
    if gates.answers is None:
        return gates.answers_relation
    return check_answers_mapping(conn, settings)


def answers_relation_of(store: StoreLocation, settings: Settings) -> str | MappedAnswers:
    """:func:`answers_relation` on a connection of its own (none for the short form)."""
    if settings.quality_gates.answers is None:
        return settings.quality_gates.answers_relation
    with store.connection() as conn:
        return check_answers_mapping(conn, settings)


def import_refusal(settings: Settings) -> str | None:
    """Why ``answers import`` may not write the configured answers (None: it may)."""
    mapping = settings.quality_gates.answers
    if mapping is None:
        return None
    return (f"'{WHERE}' maps the RAG system's own table {mapping.relation}, which the harness "
            "only reads; answers there are gated in place (`eval-harness gate`), so there is "
            "nothing to import (remove quality_gates.answers to gate imported answers).")


# ------------------------------------------------------------------------------ checks

def check_answers_mapping(conn: psycopg.Connection, settings: Settings) -> MappedAnswers:
    """``quality_gates.answers`` checked against the store, reading only (module
    docstring); raises :class:`AnswersMappingError`."""
    mapping = settings.quality_gates.answers
    assert mapping is not None
    on_demo = mapping.relation.schema == settings.demo_rag_schema
    oid = _readable(conn, mapping.relation, f"{WHERE}.relation",
                    missing=_demo_hint(settings) if on_demo else None)
    columns = relation_columns(conn, oid)
    shown = mapping.relation
    _typed(columns, mapping.id, ID_TYPES, f"{WHERE}.id", shown)
    _typed(columns, mapping.query, TEXT_TYPES, f"{WHERE}.query", shown)
    _typed(columns, mapping.answer, TEXT_TYPES, f"{WHERE}.answer", shown)
    _typed(columns, mapping.created_at, TIMESTAMP_TYPES, f"{WHERE}.created_at", shown)
    if mapping.kind == "json":
        _typed(columns, mapping.sources, JSON_TYPES, f"{WHERE}.sources.column", shown,
               why=" (sources.kind json: a [{id, text}] list)")
    else:
        _typed(columns, mapping.sources, ID_ARRAY_TYPES, f"{WHERE}.sources.column",
               shown, why=" (sources.kind ids: an array of corpus ids)")
    _unique_ids(conn, mapping, oid)
    corpus = None
    if mapping.kind == "ids":
        corpus, id_types = _corpus(conn, settings, mapping.dataset)
        array_type = columns[mapping.sources][0]
        if array_type.removesuffix("[]") not in id_types:
            raise AnswersMappingError(
                f"'{WHERE}.sources.column': column {shown}.{mapping.sources} is {array_type} "
                f"but the ids of dataset '{mapping.dataset}' ({corpus.relation_name}) are "
                f"{' or '.join(id_types)}; map an array of the corpus's kind of id "
                f"({' or '.join(t + '[]' for t in id_types)}).")
    return MappedAnswers(mapping, corpus)


def _demo_hint(settings: Settings) -> str:
    schema = settings.demo_rag_schema
    if settings.database_url:
        return (f"the demo schema '{schema}' (store.demo_rag_schema) is laid out only in the "
                "embedded store, never in yours; map quality_gates.answers onto your own "
                "answers table, or unset DATABASE_URL to run the demo")
    return (f"the demo schema '{schema}' (store.demo_rag_schema) gets it, from "
            "store.demo_rag_answers, when `eval-harness run` (or `attach`) lays the demo store "
            "out; run that first")


def _readable(conn: psycopg.Connection, relation: Relation, key: str, *,
              missing: str | None = None) -> int:
    """The oid of ``relation``, which this role may read; ``missing``: what to say when it
    does not exist (instead of the usual clause)."""
    name = sql.Identifier(relation.schema, relation.name).as_string(conn)
    try:
        with conn.transaction():
            oid, may_read = conn.execute(
                "SELECT to_regclass(%s)::oid, has_table_privilege(to_regclass(%s), 'SELECT')",
                (name, name)).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        raise AnswersMappingError(
            f"'{key}': this role may not use schema {sql_name(relation.schema)}; GRANT USAGE "
            f"ON SCHEMA {sql_name(relation.schema)} and SELECT ON {relation} TO the harness's "
            "role.") from None
    if oid is None:
        raise AnswersMappingError(f"'{key}': {relation} does not exist in the store" + (
            f": {missing}." if missing else " (or this role cannot see its schema)."))
    if not may_read:
        raise AnswersMappingError(f"'{key}': this role may not SELECT from {relation}; GRANT "
                                  f"SELECT ON {relation} TO the harness's role.")
    return oid


def _typed(columns: dict, name: str, allowed: tuple[str, ...], key: str, relation,
           why: str = "") -> None:
    if name not in columns:
        raise AnswersMappingError(f"'{key}': {relation} has no column '{name}' (columns: "
                                  f"{', '.join(sorted(columns))}).")
    kind = columns[name][0]
    if kind not in allowed:
        raise AnswersMappingError(f"'{key}': column {relation}.{name} is {kind}; it must be "
                                  f"{' or '.join(allowed)}{why}.")


def _unique_ids(conn: psycopg.Connection, mapping: AnswersMapping, oid: int) -> None:
    """Gate results are kept per answer id: two answers with one id would share them. A
    unique index proves it from the catalog; otherwise the id column is read once."""
    if has_unique_index(conn, oid, mapping.id):
        return
    repeated, examples, without = conn.execute(sql.SQL("""
        SELECT count(*) FILTER (WHERE g.n > 1 AND g.id IS NOT NULL),
               (array_agg(g.id::text ORDER BY g.id)
                   FILTER (WHERE g.n > 1 AND g.id IS NOT NULL))[1:{shown}],
               coalesce(sum(g.n) FILTER (WHERE g.id IS NULL), 0)
        FROM (SELECT {id} AS id, count(*) AS n FROM {rel} GROUP BY {id}) g""").format(
        id=sql.Identifier(mapping.id), shown=sql.Literal(EXAMPLES),
        rel=sql.Identifier(mapping.relation.schema, mapping.relation.name))).fetchone()
    if repeated:
        raise AnswersMappingError(
            f"'{WHERE}.id': {mapping.relation}.{mapping.id} is not unique: {repeated} ids occur "
            f"in more than one row (e.g. {', '.join(examples)}); map a column (or a view) with "
            "one row per answer.")
    if without:
        raise AnswersMappingError(f"'{WHERE}.id': {without} rows of {mapping.relation} have no "
                                  f"id (NULL in {mapping.id}); map a column every answer has.")


# The element types a sources array may have, by the family of the corpus's ids.
_ID_FAMILIES = (("smallint", "integer", "bigint"), TEXT_TYPES, UUID_TYPES)


def _id_family(column_type: str) -> tuple[str, ...]:
    return next(family for family in _ID_FAMILIES if column_type in family)


def _corpus(conn: psycopg.Connection, settings: Settings,
            name: str | None) -> tuple[Corpus, tuple[str, ...]]:
    """The corpus the source ids point into, and the element types a sources array of its
    ids may have: a live dataset's mapping from config.yaml (checked like attach checks it:
    readable, integer, text or uuid ids, text content; read as it is now, by its own ids),
    else the dataset as the store has it (an ingested copy, by the harness's ids, or a live
    dataset attached earlier)."""
    key = f"{WHERE}.dataset"
    configured = settings.datasets.get(name or "")
    if configured is not None and configured.live is not None:
        corpus = configured.live.corpus
        if corpus.preset is not None:  # the library's layout, resolved as attach resolves it
            try:
                return check_mapping(conn, configured).corpus
            except LiveMappingError as exc:
                raise AnswersMappingError(f"'{key}': {exc}") from None
        where = f"datasets.{name}.live.corpus"
        columns = relation_columns(conn, _readable(conn, corpus.relation, f"{where}.relation"))
        _typed(columns, corpus.id, ID_TYPES, f"{where}.id", corpus.relation)
        _typed(columns, corpus.content, TEXT_TYPES, f"{where}.content", corpus.relation)
        # no own_ids: the relation itself, its id column compared with the sources' ids
        record = Corpus.mapping_record(corpus.relation.schema, corpus.relation.name, corpus.id,
                                       corpus.content, corpus.embedding, corpus.tsvector,
                                       typed=False)
        return (Corpus.live(configured.name, configured.language, 0, record),
                _id_family(columns[corpus.id][0]))
    row = register.dataset_row(conn, name or "")
    if row is None:
        hint = (f"ingest it first (`eval-harness ingest PATH --name {name}`)"
                if configured is not None else
                "name a live dataset of config.yaml (datasets:) or an ingested one")
        raise AnswersMappingError(f"'{key}': dataset '{name}' is neither a live dataset of "
                                  f"config.yaml nor ingested in the store; {hint}.")
    dataset, language, _model, dim, kind, recorded = row
    corpus = (Corpus.live(dataset, language, dim, recorded) if kind == "live"
              else Corpus.ingested(dataset, language, dim))
    # a corpus read through the harness's ids is matched by its own ids' text
    return corpus, (ID_TYPES if corpus.has_own_ids else _ID_FAMILIES[0])
