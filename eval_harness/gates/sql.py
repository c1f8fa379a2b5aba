"""Every SQL statement of the quality gates, the owner of the answers relation (import, window
reads, the run report's reads), ``gate_results`` (staging, upsert, re-threshold, summaries),
and the window lock; the rows the answer_reward gate writes (``evaluation_log``,
``episode_memory``, ``regeneration_queue``) are :mod:`eval_harness.gates.reflexion_sql`'s;
tests/test_layers.py holds the owner map.

Each function takes a connection and plain values and returns rows or plain values.
Transactions and locks stay with the callers (:mod:`eval_harness.gates.answers`,
:mod:`eval_harness.gates.runner`, :mod:`eval_harness.gates.llm_gates`): a function that writes
runs in the caller's transaction. The answers relation comes from configuration
(``quality_gates.answers_relation``, or the ``quality_gates.answers`` mapping onto the RAG
system's own table, read in place) and is composed with :mod:`psycopg.sql`, never formatted
in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from eval_harness.gates.answers_mapping import MappedAnswers
from eval_harness.gates.gate import Gate
from eval_harness.gates.window import TimeWindow

AnswersRelation = str | MappedAnswers  # the answers table's name, or a checked mapping

# ------------------------------------------------------------------------------ fragments


def relation_sql(relation: AnswersRelation) -> sql.Composable:
    """``answers`` or ``schema.answers`` as a quoted SQL identifier; a checked
    ``quality_gates.answers`` mapping as the subquery that reads it in place
    (:mod:`eval_harness.gates.answers_mapping`)."""
    if not isinstance(relation, str):
        return relation.from_item()
    return sql.Identifier(*relation.split("."))


def content_hash_sql(alias: str) -> sql.Composable:
    """SQL for the hex SHA-256 of an answer's query, answer and sources.

    The jsonb text form is canonical (key order and spacing normalised), so equal content
    always hashes equal whatever wrote it. ``created_at`` is left out: moving an answer in time
    does not change what the gates say about it.
    """
    a = sql.Identifier(alias)
    return sql.SQL("encode(sha256(convert_to(jsonb_build_array({a}.query, {a}.answer, "
                   "{a}.sources::jsonb)::text, 'UTF8')), 'hex')").format(a=a)


def window_condition(alias: str, window: TimeWindow) -> sql.Composable:
    """``created_at`` inside the window, with ``%(start)s`` / ``%(end)s`` placeholders."""
    column = sql.SQL("{}.created_at").format(sql.Identifier(alias))
    condition = sql.SQL("{c} >= %(start)s").format(c=column)
    if window.end is not None:
        condition = sql.SQL("{} AND {c} < %(end)s").format(condition, c=column)
    return condition


def window_params(window: TimeWindow) -> dict[str, Any]:
    return {"start": window.start, "end": window.end}


# A stored result (alias r) that a judge failed on without a usable reply: stale, asked again.
_ASKED_AGAIN = sql.SQL("""r.score IS NULL AND r.details @> '{"retry": true}'""")

# The current result of one gate for answer ``a``, as ``r`` (NULLs when there is none): same
# gate, gate version and content. Placeholders ``%(gate)s`` and ``%(version)s``.
CURRENT_RESULT_JOIN = sql.SQL("""LEFT JOIN gate_results AS r
          ON r.answer_id = a.id AND r.gate = %(gate)s AND r.gate_version = %(version)s
         AND r.content_hash = {hash}""").format(hash=content_hash_sql("a"))

# ------------------------------------------------------------------------------ answers


def _stream(conn: psycopg.Connection, query: sql.Composed, params: Mapping[str, Any],
            batch_size: int) -> Iterator[tuple]:
    """Rows of ``query`` through a server-side cursor, fetched ``batch_size`` at a time.

    Client memory stays at one batch whatever the result size. The cursor lives in its own
    transaction (a savepoint when one is open), so ``conn`` must not be used for anything else
    while the iterator is being consumed.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    with conn.transaction(), conn.cursor(name="eval_harness_answers") as cursor:
        cursor.itersize = batch_size
        cursor.execute(query, params)
        yield from cursor


def window_answer_rows(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow, *,
                       batch_size: int) -> Iterator[tuple]:
    """``(id, query, answer, sources, created_at, content_hash)`` of every answer of
    ``window``, streamed (see :func:`_stream`)."""
    query = sql.SQL("SELECT a.id, a.query, a.answer, a.sources::jsonb, a.created_at, {hash} "
                    "FROM {relation} AS a WHERE {window}").format(
        hash=content_hash_sql("a"), relation=relation_sql(relation),
        window=window_condition("a", window))
    return _stream(conn, query, window_params(window), batch_size)


def lock_answers_import(conn: psycopg.Connection, key: str) -> None:
    """Wait for the transaction-level advisory lock ``key`` (held until the transaction ends)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))


def merge_answers(conn: psycopg.Connection, relation: AnswersRelation, rows: Iterable[tuple], *,
                  traced: bool = False) -> tuple[int, int, int, tuple[date, ...]]:
    """Merge ``rows`` ``(id, query, answer, sources, created_at or None)`` into ``relation`` by
    id, in the caller's transaction: ``(rows, updated, inserted, days)``, ``days`` the UTC
    days the rows' answers are in. A missing ``created_at`` keeps the stored time (now, for a
    new answer); identical answers are left untouched. With ``traced`` each row also carries
    ``trace_id, span_id`` (migration 0019), written and compared like the rest."""
    target = relation_sql(relation)
    extra = ["trace_id", "span_id"] if traced else []
    conn.execute(sql.SQL("""CREATE TEMP TABLE _import_answers (
                        id text PRIMARY KEY, query text NOT NULL, answer text NOT NULL,
                        sources jsonb NOT NULL, created_at timestamptz{extra}) ON COMMIT DROP""")
                 .format(extra=sql.SQL("".join(f", {c} text" for c in extra))))
    with conn.cursor().copy("COPY _import_answers FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "text", "text", "jsonb", "timestamptz"] + ["text"] * len(extra))
        for answer_id, query, answer, sources, created_at, *ids in rows:
            copy.write_row((answer_id, query, answer, Jsonb(sources), created_at, *ids))
    total = conn.execute("SELECT count(*) FROM _import_answers").fetchone()[0]
    columns = [sql.Identifier(c) for c in extra]
    updated = conn.execute(sql.SQL("""
        UPDATE {target} AS a SET query = s.query, answer = s.answer, sources = s.sources,
               created_at = COALESCE(s.created_at, a.created_at){set_extra}
        FROM _import_answers s
        WHERE a.id = s.id
          AND (a.query, a.answer, a.sources::jsonb, a.created_at{a_extra}) IS DISTINCT FROM
              (s.query, s.answer, s.sources, COALESCE(s.created_at, a.created_at){s_extra})
        """).format(
        target=target,
        set_extra=sql.SQL("").join(sql.SQL(", {c} = s.{c}").format(c=c) for c in columns),
        a_extra=sql.SQL("").join(sql.SQL(", a.{}").format(c) for c in columns),
        s_extra=sql.SQL("").join(sql.SQL(", s.{}").format(c) for c in columns))).rowcount
    inserted = conn.execute(sql.SQL("""
        INSERT INTO {target} (id, query, answer, sources, created_at{extra})
        SELECT s.id, s.query, s.answer, s.sources, COALESCE(s.created_at, now()){s_extra}
        FROM _import_answers s
        WHERE NOT EXISTS (SELECT 1 FROM {target} a WHERE a.id = s.id)
        """).format(target=target,
                    extra=sql.SQL("").join(sql.SQL(", {}").format(c) for c in columns),
                    s_extra=sql.SQL("").join(sql.SQL(", s.{}").format(c) for c in columns))
    ).rowcount
    days = tuple(row[0] for row in conn.execute(sql.SQL("""
        SELECT DISTINCT (a.created_at AT TIME ZONE 'UTC')::date FROM {target} a
        JOIN _import_answers s USING (id) ORDER BY 1""").format(target=target)))
    # ON COMMIT DROP does not fire when the caller's transaction is still open.
    conn.execute("DROP TABLE _import_answers")
    return total, updated, inserted, days


def answer_trace_links(conn: psycopg.Connection, relation: AnswersRelation,
                       ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{answer id: (trace_id, span_id)}`` for those of ``ids`` imported from traces (a
    mapped relation of the RAG system's own has no trace columns: none)."""
    if not isinstance(relation, str):
        return {}
    rows = conn.execute(sql.SQL("SELECT id, trace_id, span_id FROM {} WHERE id = ANY(%s) "
                                "AND trace_id IS NOT NULL").format(relation_sql(relation)),
                        (list(ids),)).fetchall()
    return {answer_id: (trace_id, span_id) for answer_id, trace_id, span_id in rows}


def recent_answer_days(conn: psycopg.Connection, relation: AnswersRelation, *,
                       days: int) -> list[date]:
    """The UTC days with an answer in ``relation`` among the ``days`` days up to the latest
    one, oldest first (``max(created_at)``, then a ``created_at`` range: an index on the
    column serves both)."""
    latest = latest_answer_at(conn, relation)
    if latest is None:
        return []
    last_day = latest.astimezone(UTC).date()
    start = datetime.combine(last_day - timedelta(days=days - 1), time(0), tzinfo=UTC)
    return [row[0] for row in conn.execute(sql.SQL(
        "SELECT DISTINCT (a.created_at AT TIME ZONE 'UTC')::date FROM {} AS a "
        "WHERE a.created_at >= %s ORDER BY 1").format(relation_sql(relation)), (start,))]


def answer_days_span(conn: psycopg.Connection, relation: AnswersRelation
                     ) -> tuple[int, date | None, date | None]:
    """How many answers ``relation`` holds and the first and last UTC day they were created
    on (None, None when it holds none): where the answers are when a window has none."""
    count, first, last = conn.execute(sql.SQL(
        "SELECT count(*), min((created_at AT TIME ZONE 'UTC')::date), "
        "max((created_at AT TIME ZONE 'UTC')::date) FROM {}").format(
        relation_sql(relation))).fetchone()
    return count, first, last


def latest_answer_day(conn: psycopg.Connection, relation: AnswersRelation) -> date | None:
    """The latest UTC day with an answer in ``relation``; None when it holds none."""
    return conn.execute(sql.SQL("SELECT max((created_at AT TIME ZONE 'UTC')::date) FROM {}")
                        .format(relation_sql(relation))).fetchone()[0]


# ------------------------------------------------------------------------------ evaluation


def _pending_query(relation: AnswersRelation, window: TimeWindow) -> sql.Composed:
    """Answers of the window with the names of the gates whose stored result is stale."""
    return sql.SQL("""
        SELECT p.id, p.query, p.answer, p.sources, p.created_at, p.content_hash, p.stale
        FROM ({answers}) AS p
        WHERE cardinality(p.stale) > 0""").format(answers=_answers_with_stale(relation, window))


def _answers_with_stale(relation: AnswersRelation, window: TimeWindow) -> sql.Composed:
    """Every answer of the window with the names of the gates whose stored result is stale
    (none: every gate's result is current)."""
    return sql.SQL("""
            SELECT a.*, ARRAY(
                SELECT g.gate FROM unnest(%(gates)s::text[], %(versions)s::text[])
                                   AS g (gate, version)
                WHERE NOT EXISTS (
                    SELECT 1 FROM gate_results r
                    WHERE r.answer_id = a.id AND r.gate = g.gate
                      AND r.content_hash = a.content_hash AND r.gate_version = g.version
                      AND NOT ({asked_again}))
                ORDER BY g.gate) AS stale
            FROM (SELECT x.id, x.query, x.answer, x.sources::jsonb AS sources, x.created_at,
                         {hash} AS content_hash
                  FROM {relation} AS x WHERE {window}) AS a""").format(
        asked_again=_ASKED_AGAIN, hash=content_hash_sql("x"), relation=relation_sql(relation),
        window=window_condition("x", window))


def _pending_params(window: TimeWindow, gates: Sequence[str],
                    versions: Sequence[str]) -> dict[str, Any]:
    return {**window_params(window), "gates": list(gates), "versions": list(versions)}


def pending_answer_rows(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow,
                        gates: Sequence[str], versions: Sequence[str], *,
                        batch_size: int) -> Iterator[tuple]:
    """The answers of ``window`` whose result of some gate (``gates[i]`` at
    ``versions[i]``) is stale, streamed: the :func:`window_answer_rows` columns, then the
    names of those gates."""
    return _stream(conn, _pending_query(relation, window),
                   _pending_params(window, gates, versions), batch_size)


def count_pending_answers(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow,
                          gates: Sequence[str], versions: Sequence[str]) -> int:
    """How many rows :func:`pending_answer_rows` would give."""
    query = sql.SQL("SELECT count(*) FROM ({}) AS pending").format(
        _pending_query(relation, window))
    return conn.execute(query, _pending_params(window, gates, versions)).fetchone()[0]


def stored_gate_progress(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow,
                         gates: Sequence[str], versions: Sequence[str]) -> tuple[int, int, int]:
    """``(answers, answers gated, gate results)`` of ``window`` as stored: its answers, those
    with a current result of every gate (``gates[i]`` at ``versions[i]``), and the current
    results, whichever run stored them."""
    query = sql.SQL("""
        SELECT count(*), count(*) FILTER (WHERE cardinality(p.stale) = 0),
               coalesce(sum(%(n_gates)s - cardinality(p.stale)), 0)
        FROM ({answers}) AS p""").format(answers=_answers_with_stale(relation, window))
    row = conn.execute(query, {**_pending_params(window, gates, versions),
                               "n_gates": len(gates)}).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def create_results_staging(conn: psycopg.Connection) -> None:
    """The session's staging table for :func:`upsert_gate_results` (emptied at each commit)."""
    conn.execute("""CREATE TEMP TABLE IF NOT EXISTS _gate_results_batch (
        answer_id text NOT NULL, gate text NOT NULL, content_hash text NOT NULL,
        gate_version text NOT NULL, score float8, passed boolean NOT NULL,
        threshold float8 NOT NULL, details jsonb NOT NULL, latency_ms float8 NOT NULL,
        run_id text) ON COMMIT DELETE ROWS""")


# Rows go in key order (no deadlock between concurrent runs); a stored result that is already
# current was written by another run meanwhile and is kept. RETURNING names what was written.
_UPSERT = sql.SQL("""
    INSERT INTO gate_results AS r (answer_id, gate, content_hash, gate_version, score, passed,
                                   threshold, details, latency_ms, evaluated_at, run_id)
    SELECT answer_id, gate, content_hash, gate_version, score, passed, threshold, details,
           latency_ms, now(), run_id
    FROM _gate_results_batch
    ORDER BY answer_id, gate
    ON CONFLICT (answer_id, gate) DO UPDATE SET
        content_hash = EXCLUDED.content_hash, gate_version = EXCLUDED.gate_version,
        score = EXCLUDED.score, passed = EXCLUDED.passed, threshold = EXCLUDED.threshold,
        details = EXCLUDED.details, latency_ms = EXCLUDED.latency_ms,
        evaluated_at = EXCLUDED.evaluated_at, run_id = EXCLUDED.run_id
    WHERE NOT (r.content_hash = EXCLUDED.content_hash AND r.gate_version = EXCLUDED.gate_version
               AND NOT ({asked_again}))
    RETURNING answer_id, gate""").format(asked_again=_ASKED_AGAIN)


def upsert_gate_results(conn: psycopg.Connection, rows: Iterable[tuple]) -> set[tuple[str, str]]:
    """Store ``rows`` ``(answer_id, gate, content_hash, gate_version, score, passed,
    threshold, details, latency_ms, run_id)`` in ``gate_results``, in the caller's
    transaction (through the staging table of :func:`create_results_staging`); the
    ``(answer_id, gate)`` written, without those another run stored meanwhile."""
    with conn.cursor().copy("COPY _gate_results_batch FROM STDIN") as copy:
        for (answer_id, gate, content_hash, version, score, passed, threshold, details,
             latency_ms, run_id) in rows:
            copy.write_row((answer_id, gate, content_hash, version, score, passed, threshold,
                            Jsonb(details), latency_ms, run_id))
    return set(conn.execute(_UPSERT).fetchall())


def rethreshold_results(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow,
                        gate: str, threshold: float) -> None:
    """Give the results of ``gate`` for answers of ``window`` stored under another threshold
    this one, and ``passed`` by it."""
    query = sql.SQL("""
        UPDATE gate_results AS r
        SET threshold = %(threshold)s,
            passed = (r.score IS NOT NULL AND r.score >= %(threshold)s)
        FROM {relation} AS a
        WHERE r.answer_id = a.id AND r.gate = %(gate)s AND r.threshold <> %(threshold)s
          AND {window}""").format(relation=relation_sql(relation),
                                  window=window_condition("a", window))
    conn.execute(query, {**window_params(window), "gate": gate, "threshold": threshold})


def gate_summary_row(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow, *,
                     gate: str, version: str, threshold: float, run_id: str | None,
                     worst: int, listed: int) -> tuple:
    """One gate's figures over every answer of ``window``, from its current results:
    ``(answers, passed, unscored, evaluated by run_id, mean score, latency p50, latency p95,
    the ``worst`` lowest-scored ids, the first ``listed`` failing ids, failing, seconds spent
    by run_id)``; ids lowest score first, unscored before all."""
    query = sql.SQL("""
        WITH current AS MATERIALIZED (
            SELECT a.id, r.score, r.latency_ms, r.run_id
            FROM {relation} AS a
            {current_result}
            WHERE {window}),
        failing AS (
            SELECT id, score FROM current
            WHERE score IS NULL OR score < %(threshold)s)
        SELECT
            (SELECT count(*) FROM current),
            (SELECT count(*) FROM current WHERE score >= %(threshold)s),
            (SELECT count(*) FROM current WHERE score IS NULL),
            (SELECT count(*) FROM current WHERE run_id = %(run_id)s),
            (SELECT avg(score) FROM current),
            (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FROM current),
            (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) FROM current),
            (SELECT coalesce(array_agg(id ORDER BY score ASC NULLS FIRST, id), '{{}}')
             FROM (SELECT id, score FROM current
                   ORDER BY score ASC NULLS FIRST, id LIMIT %(worst)s) AS w),
            (SELECT coalesce(array_agg(id ORDER BY score ASC NULLS FIRST, id), '{{}}')
             FROM (SELECT id, score FROM failing
                   ORDER BY score ASC NULLS FIRST, id LIMIT %(listed)s) AS f),
            (SELECT count(*) FROM failing),
            (SELECT coalesce(sum(latency_ms), 0) / 1000.0 FROM current
             WHERE run_id = %(run_id)s)""").format(
        relation=relation_sql(relation), current_result=CURRENT_RESULT_JOIN,
        window=window_condition("a", window))
    return conn.execute(query, {**window_params(window), "gate": gate, "version": version,
                                "threshold": threshold, "run_id": run_id, "worst": worst,
                                "listed": listed}).fetchone()


# ------------------------------------------------------------------------------ run report

def latest_answer_at(conn: psycopg.Connection, relation: AnswersRelation) -> datetime | None:
    """When the newest answer in ``relation`` was created (None: no answer)."""
    return conn.execute(sql.SQL("SELECT max(created_at) FROM {}").format(
        relation_sql(relation))).fetchone()[0]


def gate_results_as_of(conn: psycopg.Connection, relation: AnswersRelation,
                       window: TimeWindow) -> datetime | None:
    """When the newest gate result of an answer in ``window`` was stored."""
    return conn.execute(sql.SQL(
        "SELECT max(r.evaluated_at) FROM {relation} AS a JOIN gate_results AS r "
        "ON r.answer_id = a.id WHERE {window}").format(
        relation=relation_sql(relation), window=window_condition("a", window)),
        window_params(window)).fetchone()[0]


def answers_with_result(conn: psycopg.Connection, relation: AnswersRelation, gate: Gate,
                        ids: Sequence[str]) -> list[tuple[str, str, float | None, dict | None]]:
    """The answers ``ids`` (in that order) with their current result for ``gate``:
    ``(id, query, score, details)``, score and details None when no current result exists."""
    if not ids:
        return []
    rows = conn.execute(sql.SQL("""
        SELECT a.id, a.query, r.score, r.details
        FROM {relation} AS a
        {current_result}
        WHERE a.id = ANY(%(ids)s)""").format(relation=relation_sql(relation),
                                             current_result=CURRENT_RESULT_JOIN),
        {"gate": gate.name, "version": gate.version, "ids": list(ids)}).fetchall()
    found = {row[0]: row for row in rows}
    return [found[answer_id] for answer_id in ids if answer_id in found]


def relation_has_trace_ids(conn: psycopg.Connection, relation: str) -> bool:
    """Whether ``relation`` has the ``trace_id`` and ``span_id`` columns (migration 0019; a
    user's view over their own tables may not)."""
    return conn.execute("""
        SELECT count(*) = 2 FROM pg_attribute
        WHERE attrelid = to_regclass(%s) AND attname IN ('trace_id', 'span_id')
          AND attnum > 0 AND NOT attisdropped""",
        (".".join(f'"{part}"' for part in relation.split(".")),)).fetchone()[0]


def window_current_results(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow,
                           gate: str, version: str, *, traced: bool) -> list[tuple]:
    """The current results of ``gate`` (at ``version``) for the answers of ``window``:
    ``(answer_id, score, passed, threshold, details, trace_id, span_id)`` by answer id; the
    ids are None unless ``traced`` (the relation has them) and the answer came from a trace."""
    ids = sql.SQL("a.trace_id, a.span_id" if traced else "NULL::text, NULL::text")
    return conn.execute(sql.SQL("""
        SELECT a.id, r.score, r.passed, r.threshold, r.details, {ids}
        FROM {relation} AS a
        JOIN gate_results AS r
          ON r.answer_id = a.id AND r.gate = %(gate)s AND r.gate_version = %(version)s
         AND r.content_hash = {hash}
        WHERE {window}
        ORDER BY a.id""").format(ids=ids, relation=relation_sql(relation),
                                 hash=content_hash_sql("a"),
                                 window=window_condition("a", window)),
        {**window_params(window), "gate": gate, "version": version}).fetchall()


def window_query_scores(conn: psycopg.Connection, relation: AnswersRelation, window: TimeWindow,
                        gate: str, version: str) -> list[tuple[str, float | None]]:
    """``(query, score)`` of the current result of ``gate`` (at ``version``) on every answer
    of ``window``, by answer id (what ``gate --record`` stores)."""
    return conn.execute(sql.SQL("""
        SELECT a.query, r.score
        FROM {relation} AS a
        JOIN gate_results AS r
          ON r.answer_id = a.id AND r.gate = %(gate)s AND r.gate_version = %(version)s
         AND r.content_hash = {hash}
        WHERE {window}
        ORDER BY a.id""").format(relation=relation_sql(relation), hash=content_hash_sql("a"),
                                 window=window_condition("a", window)),
        {**window_params(window), "gate": gate, "version": version}).fetchall()
