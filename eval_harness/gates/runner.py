"""Run the quality gates over a window of stored answers, incrementally, in bounded memory.

:func:`evaluate_window` streams, through a server-side cursor, only the answers of the window
that have a stale result for at least one enabled gate (no stored result, or one stored for
other content or another gate version; see :mod:`eval_harness.gates.registry`). Each batch is
evaluated gate by gate and its results are upserted into ``gate_results`` in one transaction,
so an interrupted run keeps every finished batch and the next run evaluates only the rest.
Rerunning on unchanged answers evaluates nothing, except answers a judge failed on (an
unscored result with ``details["retry"]``, e.g. the provider was down): those are asked again.

:func:`summarize_gates` then computes each gate's figures over ALL answers of the window from
the stored results (SQL aggregates, so memory does not grow with the window), following the
rule in :mod:`eval_harness.gates.report`.

Reading and writing use two connections: the reading one holds the cursor's transaction open
while the writing one commits batch by batch.

Crashes and concurrent runs. A batch's results and the side effects of its gates (evaluation
log, reflexions, regeneration queue) commit together, so a killed run leaves whole batches
and the rerun evaluates only answers without a current result. Two runs of the same window
(the same day, or the same ``--since``) take turns under a session-level advisory lock on the
window: the second waits, then finds nothing stale, so no judgement is paid for twice. Runs of
overlapping but different windows do not wait for each other; there, a result that another
run stored while this one was evaluating is kept, and this run's result for that answer and
its side effects are dropped (one result, one log row, one queue entry per answer). Rows are
upserted in key order, so such runs cannot deadlock on ``gate_results``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from eval_harness.gates.answers import (DEFAULT_RELATION, Answer, TimeWindow, content_hash_sql,
                                  relation_sql, stream_rows, window_condition, window_params)
from eval_harness.gates.registry import Gate, GateRun, configured_scale, score_safely
from eval_harness.gates.report import FAILING_LISTED, WORST_LISTED, GateReport, GateSummary
from eval_harness.gates.result import GateResult
from eval_harness.progress import ProgressCallback
from eval_harness.store.connection import StoreLocation

EVALUATION_BATCH_SIZE = 1000
WINDOW_LOCK_PREFIX = "eval_harness.gates:"  # + relation and window: advisory lock key
log = logging.getLogger("eval_harness.gates")


@dataclass(frozen=True)
class EvaluationRun:
    """What one call of :func:`evaluate_window` did."""

    run_id: str
    window: TimeWindow
    answers_read: int                                  # answers with a stale gate, evaluated
    evaluated: dict[str, int] = field(default_factory=dict)  # gate -> answers evaluated now
    unscored: dict[str, int] = field(default_factory=dict)   # gate -> of those, unscored
    seconds: float = 0.0


def _pending_query(relation: str, window: TimeWindow) -> sql.Composable:
    """Answers of the window with the names of the gates whose stored result is stale."""
    return sql.SQL("""
        SELECT p.id, p.query, p.answer, p.sources, p.created_at, p.content_hash, p.stale
        FROM (
            SELECT a.*, ARRAY(
                SELECT g.gate FROM unnest(%(gates)s::text[], %(versions)s::text[])
                                   AS g (gate, version)
                WHERE NOT EXISTS (
                    SELECT 1 FROM gate_results r
                    WHERE r.answer_id = a.id AND r.gate = g.gate
                      AND r.content_hash = a.content_hash AND r.gate_version = g.version
                      AND NOT (r.score IS NULL AND r.details @> '{{"retry": true}}'))
                ORDER BY g.gate) AS stale
            FROM (SELECT x.id, x.query, x.answer, x.sources::jsonb AS sources, x.created_at,
                         {hash} AS content_hash
                  FROM {relation} AS x WHERE {window}) AS a
        ) AS p
        WHERE cardinality(p.stale) > 0""").format(
        hash=content_hash_sql("x"), relation=relation_sql(relation),
        window=window_condition("x", window))


_STAGING = """CREATE TEMP TABLE IF NOT EXISTS _gate_results_batch (
    answer_id text NOT NULL, gate text NOT NULL, content_hash text NOT NULL,
    gate_version text NOT NULL, score float8, passed boolean NOT NULL, threshold float8 NOT NULL,
    details jsonb NOT NULL, latency_ms float8 NOT NULL, run_id text) ON COMMIT DELETE ROWS"""

# Rows go in key order (no deadlock between concurrent runs); a stored result that is already
# current was written by another run meanwhile and is kept. RETURNING names what was written.
_UPSERT = """
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
               AND NOT (r.score IS NULL AND r.details @> '{"retry": true}'))
    RETURNING answer_id, gate"""


def _evaluate_gate(gate: Gate, answers: Sequence[Answer], run: GateRun) -> list[GateResult]:
    """The gate's results for ``answers``; never raises, and ``passed`` follows the threshold.

    A failing evaluator (a judge that is down) yields unscored results carrying the error,
    so the run goes on and those answers count as not passing.
    """
    started = perf_counter()
    try:
        results = list(gate.evaluate_batch(answers, run))
        if len(results) != len(answers):
            raise RuntimeError(f"the evaluator returned {len(results)} results for "
                               f"{len(answers)} answers")
    except Exception as exc:  # a judge failure is a failed result, never a crashed run
        latency = (perf_counter() - started) * 1000.0 / max(1, len(answers))
        return [GateResult.unscored(gate.name, gate.threshold, f"{type(exc).__name__}: {exc}",
                                    latency_ms=latency) for _ in answers]
    return _normalise(gate, results)


def _normalise(gate: Gate, results: list[GateResult]) -> list[GateResult]:
    """Every result names the gate and passes by ``score >= gate.threshold``."""
    normalised = []
    for result in results:
        passed = result.score is not None and result.score >= gate.threshold
        if (result.gate, result.threshold, result.passed) != (gate.name, gate.threshold, passed):
            result = replace(result, gate=gate.name, threshold=gate.threshold, passed=passed)
        normalised.append(result)
    return normalised


def _evaluate_batch(batch: list[tuple[Answer, list[str]]], gates: Sequence[Gate],
                    run: GateRun) -> list[tuple[Gate, list[Answer], list[GateResult]]]:
    """Each gate's stale answers of the batch and its results for them.

    Gates with a per-answer function run answer by answer, one gate after the other on the
    same answer, so that they share its parse (cached in the citations module); the others
    get their answers as one batch (a judge can then work on them concurrently).
    """
    rule_gates = [gate for gate in gates if gate.score_one is not None]
    rule_results: dict[str, tuple[list[Answer], list[GateResult]]] = {
        gate.name: ([], []) for gate in rule_gates}
    for answer, stale in batch:
        for gate in rule_gates:
            if gate.name in stale:
                answers, results = rule_results[gate.name]
                answers.append(answer)
                results.append(score_safely(gate.name, gate.threshold, gate.score_one, answer))
    evaluated = []
    for gate in gates:
        if gate.score_one is not None:
            answers, results = rule_results[gate.name]
            results = _normalise(gate, results)
        else:
            answers = [answer for answer, stale in batch if gate.name in stale]
            results = _evaluate_gate(gate, answers, run) if answers else []
        if answers:
            evaluated.append((gate, answers, results))
    return evaluated


def _store_batch(conn: psycopg.Connection, batch: list[tuple[Answer, list[str]]],
                 gates: Sequence[Gate], run: GateRun, evaluation: dict[str, list[int]]) -> None:
    results_by_gate = _evaluate_batch(batch, gates, run)
    for gate, answers, results in results_by_gate:
        counts = evaluation.setdefault(gate.name, [0, 0])
        counts[0] += len(answers)
        counts[1] += sum(1 for result in results if result.score is None)
    with conn.transaction():
        with conn.cursor().copy("COPY _gate_results_batch FROM STDIN") as copy:
            for gate, answers, results in results_by_gate:
                for answer, result in zip(answers, results):
                    copy.write_row((answer.id, gate.name, answer.content_hash, gate.version,
                                    result.score, result.passed, result.threshold,
                                    Jsonb(result.details), max(0.0, result.latency_ms),
                                    run.run_id))
        written = set(conn.execute(_UPSERT).fetchall())
        for gate, answers, results in results_by_gate:
            if gate.record is not None:
                kept = [(a, r) for a, r in zip(answers, results) if (a.id, gate.name) in written]
                if kept:
                    gate.record(conn, [a for a, _ in kept], [r for _, r in kept], run)


def _rethreshold(conn: psycopg.Connection, window: TimeWindow, gates: Sequence[Gate],
                 relation: str) -> None:
    """Re-derive ``passed`` of stored results whose gate threshold was changed in config."""
    query = sql.SQL("""
        UPDATE gate_results AS r
        SET threshold = %(threshold)s,
            passed = (r.score IS NOT NULL AND r.score >= %(threshold)s)
        FROM {relation} AS a
        WHERE r.answer_id = a.id AND r.gate = %(gate)s AND r.threshold <> %(threshold)s
          AND {window}""").format(relation=relation_sql(relation),
                                  window=window_condition("a", window))
    with conn.transaction():
        for gate in gates:
            conn.execute(query, {**window_params(window), "gate": gate.name,
                                 "threshold": gate.threshold})


def _lock_window(conn: psycopg.Connection, window: TimeWindow, relation: str) -> None:
    """Wait for (and then hold, until ``conn`` closes) the window's advisory lock."""
    key = (f"{WINDOW_LOCK_PREFIX}{relation}:{window.start.isoformat()}:"
           f"{window.end.isoformat() if window.end else ''}")
    if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
        log.warning(f"another quality-gate run of {window.describe()} is in progress; waiting "
                    "for it to end (its results are kept, so this run then evaluates only what "
                    "is left)")
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))


def _count_pending(conn: psycopg.Connection, relation: str, window: TimeWindow,
                   params: dict[str, Any]) -> int:
    query = sql.SQL("SELECT count(*) FROM ({}) AS pending").format(
        _pending_query(relation, window))
    return conn.execute(query, params).fetchone()[0]


def evaluate_window(store: StoreLocation, window: TimeWindow, gates: Sequence[Gate], *,
                    relation: str = DEFAULT_RELATION, run_id: str | None = None,
                    batch_size: int = EVALUATION_BATCH_SIZE,
                    progress: ProgressCallback | None = None) -> EvaluationRun:
    """Evaluate every answer of ``window`` whose result for some gate is stale; store results.

    ``run_id`` (a Dagster run id, or a new UUID) is stored with each result, so a summary can
    count what this run evaluated. One run per window at a time (see the module docstring).
    ``progress(done, total)`` is called after each stored batch; passing it costs one count
    of the stale answers first (see :mod:`eval_harness.progress`).
    """
    run = GateRun(run_id or uuid.uuid4().hex)
    started = perf_counter()
    read = 0
    evaluation: dict[str, list[int]] = {}
    if gates:
        params = {**window_params(window), "gates": [g.name for g in gates],
                  "versions": [g.version for g in gates]}
        # write_conn holds the window's lock for the whole run; closing it releases the lock,
        # also when the process dies.
        with store.connection() as read_conn, store.connection(autocommit=True) as write_conn:
            _lock_window(write_conn, window, relation)
            write_conn.execute(_STAGING)
            total = None
            if progress is not None:
                total = _count_pending(write_conn, relation, window, params)
                progress(0, total)
            batch: list[tuple[Answer, list[str]]] = []
            for row in stream_rows(read_conn, _pending_query(relation, window), params,
                                   batch_size=batch_size, relation=relation):
                batch.append((Answer(*row[:6]), row[6]))
                if len(batch) >= batch_size:
                    _store_batch(write_conn, batch, gates, run, evaluation)
                    read += len(batch)
                    batch = []
                    if progress is not None:
                        progress(read, max(read, total or 0))
            if batch:
                _store_batch(write_conn, batch, gates, run, evaluation)
                read += len(batch)
                if progress is not None:
                    progress(read, max(read, total or 0))
            _rethreshold(write_conn, window, gates, relation)
    return EvaluationRun(run.run_id, window, read,
                         evaluated={name: counts[0] for name, counts in evaluation.items()},
                         unscored={name: counts[1] for name, counts in evaluation.items()},
                         seconds=perf_counter() - started)


def _summary_query(relation: str, window: TimeWindow) -> sql.Composable:
    return sql.SQL("""
        WITH current AS MATERIALIZED (
            SELECT a.id, r.score, r.latency_ms, r.run_id
            FROM {relation} AS a
            LEFT JOIN gate_results AS r
              ON r.answer_id = a.id AND r.gate = %(gate)s AND r.gate_version = %(version)s
             AND r.content_hash = {hash}
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
        relation=relation_sql(relation), hash=content_hash_sql("a"),
        window=window_condition("a", window))


def summarize_gates(conn: psycopg.Connection, window: TimeWindow, gates: Sequence[Gate], *,
                    relation: str = DEFAULT_RELATION,
                    run_id: str | None = None) -> list[GateSummary]:
    """Each gate's figures over every answer of ``window``, from the current stored results."""
    query = _summary_query(relation, window)
    summaries = []
    for gate in gates:
        params: dict[str, Any] = {**window_params(window), "gate": gate.name,
                                  "version": gate.version, "threshold": gate.threshold,
                                  "run_id": run_id, "worst": WORST_LISTED,
                                  "listed": FAILING_LISTED}
        (answers, passed, unscored, evaluated_now, mean, p50, p95, worst, failing,
         failing_count, seconds) = conn.execute(query, params).fetchone()
        summaries.append(GateSummary(  # threshold and mean as configured (see GateSummary)
            gate=gate.name, threshold=configured_scale(gate.name, gate.threshold),
            min_pass_rate=gate.min_pass_rate, blocking=gate.blocking, answers=answers,
            passed_answers=passed, unscored=unscored, evaluated_now=evaluated_now,
            mean_score=configured_scale(gate.name, None if mean is None else float(mean)),
            latency_p50_ms=p50, latency_p95_ms=p95, worst_answer_ids=tuple(worst),
            failing_answer_ids=tuple(failing), failing_count=failing_count,
            seconds=float(seconds)))
    return summaries


def run_quality_gates(store: StoreLocation, window: TimeWindow, gates: Sequence[Gate], *,
                      relation: str = DEFAULT_RELATION, run_id: str | None = None,
                      batch_size: int = EVALUATION_BATCH_SIZE,
                      progress: ProgressCallback | None = None) -> GateReport:
    """Evaluate the window (incrementally) and summarize every gate: the library's gate run."""
    run = evaluate_window(store, window, gates, relation=relation, run_id=run_id,
                          batch_size=batch_size, progress=progress)
    with store.connection() as conn:
        summaries = summarize_gates(conn, window, gates, relation=relation, run_id=run.run_id)
    return GateReport(window, tuple(summaries), run.run_id)
