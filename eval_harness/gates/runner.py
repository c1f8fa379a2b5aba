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

A run the user stops (SIGINT / SIGTERM, :mod:`eval_harness.stopping`) stops evaluating at
once (a judge sends no new request), stores every result it has (per answer and gate) and
raises :class:`~eval_harness.stopping.Interrupted` saying how many answers are gated; the
rerun evaluates the rest. A store that goes away ends the run with
:class:`~eval_harness.judges.client.stops.StoreLost` (the judges stop buying at once).

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

import psycopg

from eval_harness import stopping
from eval_harness.gates import sql
from eval_harness.gates.answers import DEFAULT_RELATION, readable_rows
from eval_harness.gates.gate import Gate, GateRun, configured_scale, score_safely
from eval_harness.gates.report import (FAILING_LISTED, WORST_LISTED, AnswersElsewhere,
                                       GateReport, GateSummary)
from eval_harness.gates.result import GateResult
from eval_harness.gates.window import Answer, TimeWindow
from eval_harness.judges.client.stops import StoreLost
from eval_harness.progress import ProgressCallback
from eval_harness.store.connection import StoreLocation
from eval_harness.store.crash import is_server_failure
from eval_harness.store.locks import take_session_lock

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


def _evaluate_gate(gate: Gate, answers: Sequence[Answer],
                   run: GateRun) -> list[GateResult | None]:
    """The gate's results for ``answers`` (None: not evaluated, the run was stopped); never
    raises but for a lost store, and ``passed`` follows the threshold.

    A failing evaluator (a judge that is down) yields unscored results carrying the error,
    so the run goes on and those answers count as not passing.
    """
    started = perf_counter()
    try:
        results = list(gate.evaluate_batch(answers, run))
        if len(results) != len(answers):
            raise RuntimeError(f"the evaluator returned {len(results)} results for "
                               f"{len(answers)} answers")
    except StoreLost:
        raise
    except Exception as exc:  # a judge failure is a failed result, never a crashed run
        latency = (perf_counter() - started) * 1000.0 / max(1, len(answers))
        return [GateResult.unscored(gate.name, gate.threshold, f"{type(exc).__name__}: {exc}",
                                    latency_ms=latency) for _ in answers]
    return _normalise(gate, results)


def _normalise(gate: Gate, results: list[GateResult | None]) -> list[GateResult | None]:
    """Every result names the gate and passes by ``score >= gate.threshold``."""
    normalised = []
    for result in results:
        if result is None:
            normalised.append(None)
            continue
        passed = result.score is not None and result.score >= gate.threshold
        if (result.gate, result.threshold, result.passed) != (gate.name, gate.threshold, passed):
            result = replace(result, gate=gate.name, threshold=gate.threshold, passed=passed)
        normalised.append(result)
    return normalised


def _evaluate_batch(batch: list[tuple[Answer, list[str]]], gates: Sequence[Gate],
                    run: GateRun) -> list[tuple[Gate, list[Answer], list[GateResult | None]]]:
    """Each gate's stale answers of the batch and its results for them (None where a stop
    came first: the answer was not evaluated by that gate).

    Gates with a per-answer function run answer by answer, one gate after the other on the
    same answer, so that they share its parse (cached in the citations module); the others
    get their answers as one batch (a judge can then work on them concurrently).
    """
    rule_gates = [gate for gate in gates if gate.score_one is not None]
    rule_results: dict[str, tuple[list[Answer], list[GateResult]]] = {
        gate.name: ([], []) for gate in rule_gates}
    for answer, stale in batch:
        if stopping.requested() is not None:
            break
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
            if stopping.requested() is not None:
                results = [None] * len(answers)
            else:
                results = _evaluate_gate(gate, answers, run) if answers else []
        if answers:
            evaluated.append((gate, answers, results))
    return evaluated


def _store_batch(conn: psycopg.Connection, batch: list[tuple[Answer, list[str]]],
                 gates: Sequence[Gate], run: GateRun,
                 evaluation: dict[str, list[int]]) -> tuple[int, int]:
    """Evaluate and store one batch; returns how many of its answers now have every stale
    gate's result stored (all of them, unless a stop came first), and how many results."""
    results_by_gate = _without_unevaluated(_evaluate_batch(batch, gates, run))
    done = {(answer.id, gate.name) for gate, answers, _ in results_by_gate for answer in answers}
    for gate, answers, results in results_by_gate:
        counts = evaluation.setdefault(gate.name, [0, 0])
        counts[0] += len(answers)
        counts[1] += sum(1 for result in results if result.score is None)
    with conn.transaction():
        written = sql.upsert_gate_results(conn, (
            (answer.id, gate.name, answer.content_hash, gate.version, result.score,
             result.passed, result.threshold, result.details, max(0.0, result.latency_ms),
             run.run_id)
            for gate, answers, results in results_by_gate
            for answer, result in zip(answers, results)))
        for gate, answers, results in results_by_gate:
            if gate.record is not None:
                kept = [(a, r) for a, r in zip(answers, results) if (a.id, gate.name) in written]
                if kept:
                    gate.record(conn, [a for a, _ in kept], [r for _, r in kept], run)
    return (sum(all((answer.id, name) in done for name in stale) for answer, stale in batch),
            len(done))


def _without_unevaluated(evaluated):
    """``evaluated`` without the answers a stop left unevaluated (their result is None)."""
    kept = []
    for gate, answers, results in evaluated:
        pairs = [(a, r) for a, r in zip(answers, results) if r is not None]
        if pairs:
            kept.append((gate, [a for a, _ in pairs], [r for _, r in pairs]))
    return kept


def _rethreshold(conn: psycopg.Connection, window: TimeWindow, gates: Sequence[Gate],
                 relation: str) -> None:
    """Re-derive ``passed`` of stored results whose gate threshold was changed in config."""
    with conn.transaction():
        for gate in gates:
            sql.rethreshold_results(conn, relation, window, gate.name, gate.threshold)


def _lock_window(conn: psycopg.Connection, window: TimeWindow, relation: str) -> None:
    """Wait for (and then hold, until ``conn`` closes) the window's advisory lock."""
    key = (f"{WINDOW_LOCK_PREFIX}{relation}:{window.start.isoformat()}:"
           f"{window.end.isoformat() if window.end else ''}")
    take_session_lock(conn, key, on_wait=lambda: log.warning(
        f"another quality-gate run of {window.describe()} is in progress; waiting for it to end "
        "(its results are kept, so this run then evaluates only what is left)"))


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
        with stopping.cooperative():  # a stop signal: store what is evaluated, then raise
            read = _evaluate_pending(store, window, gates, relation, run, batch_size,
                                     progress, evaluation)
    return EvaluationRun(run.run_id, window, read,
                         evaluated={name: counts[0] for name, counts in evaluation.items()},
                         unscored={name: counts[1] for name, counts in evaluation.items()},
                         seconds=perf_counter() - started)


def _evaluate_pending(store: StoreLocation, window: TimeWindow, gates: Sequence[Gate],
                      relation: str, run: GateRun, batch_size: int,
                      progress: ProgressCallback | None,
                      evaluation: dict[str, list[int]]) -> int:
    """:func:`evaluate_window`'s work; returns the answers read. Stops after the batch in
    which a stop signal came (noting what is gated, see :mod:`eval_harness.stopping`)."""
    names, versions = [g.name for g in gates], [g.version for g in gates]
    read = gated = results = 0

    def store_batch() -> None:
        nonlocal read, gated, results, batch
        answers, stored = _store_batch(write_conn, batch, gates, run, evaluation)
        read, gated, results, batch = read + len(batch), gated + answers, results + stored, []
        if progress is not None:
            progress(gated, max(gated, total or 0))

    # write_conn holds the window's lock for the whole run; closing it releases the lock,
    # also when the process dies.
    with store.connection() as read_conn, store.connection(autocommit=True) as write_conn:
        _lock_window(write_conn, window, relation)
        sql.create_results_staging(write_conn)
        total = None
        if progress is not None:
            total = sql.count_pending_answers(write_conn, relation, window, names, versions)
            progress(0, total)
        batch: list[tuple[Answer, list[str]]] = []
        pending = sql.pending_answer_rows(read_conn, relation, window, names, versions,
                                              batch_size=batch_size)
        try:
            for row in readable_rows(pending, relation):
                batch.append((Answer(*row[:6]), row[6]))
                if len(batch) >= batch_size or stopping.requested() is not None:
                    store_batch()
                    if stopping.requested() is not None:
                        break
            if batch:
                store_batch()
        except StoreLost as exc:
            raise _store_lost(exc, gated) from None
        except psycopg.OperationalError as exc:
            if not is_server_failure(exc):
                raise
            raise _store_lost(exc, gated) from exc
        if stopping.requested() is not None:  # what is stored, not what this run added
            answers, stored, current = sql.stored_gate_progress(write_conn, relation, window,
                                                                names, versions)
            stopping.note_kept(f"{stored:,} of {answers:,} answers gated ({current:,} gate "
                               "results stored)")
            return read
        _rethreshold(write_conn, window, gates, relation)
    return read


def _store_lost(error: BaseException, gated: int) -> StoreLost:
    """The store went away under the run: what happened and what was kept."""
    lost = error if isinstance(error, StoreLost) else StoreLost(str(error), error)
    lost.kept = f"{gated:,} answers gated and stored before it"
    return lost


def summarize_gates(conn: psycopg.Connection, window: TimeWindow, gates: Sequence[Gate], *,
                    relation: str = DEFAULT_RELATION,
                    run_id: str | None = None) -> list[GateSummary]:
    """Each gate's figures over every answer of ``window``, from the current stored results."""
    summaries = []
    for gate in gates:
        (answers, passed, unscored, evaluated_now, mean, p50, p95, worst, failing,
         failing_count, seconds) = sql.gate_summary_row(
            conn, relation, window, gate=gate.name, version=gate.version,
            threshold=gate.threshold, run_id=run_id, worst=WORST_LISTED,
            listed=FAILING_LISTED)
        summaries.append(GateSummary(  # threshold and mean as configured (see GateSummary)
            gate=gate.name, threshold=configured_scale(gate.name, gate.threshold),
            min_pass_rate=gate.min_pass_rate, blocking=gate.blocking, answers=answers,
            passed_answers=passed, unscored=unscored, evaluated_now=evaluated_now,
            mean_score=configured_scale(gate.name, None if mean is None else float(mean)),
            latency_p50_ms=p50, latency_p95_ms=p95, worst_answer_ids=tuple(worst),
            failing_answer_ids=tuple(failing), failing_count=failing_count,
            seconds=float(seconds), decided_by=gate.decided_by))
    return summaries


def run_quality_gates(store: StoreLocation, window: TimeWindow, gates: Sequence[Gate], *,
                      relation: str = DEFAULT_RELATION, run_id: str | None = None,
                      batch_size: int = EVALUATION_BATCH_SIZE,
                      progress: ProgressCallback | None = None) -> GateReport:
    """Evaluate the window (incrementally) and summarize every gate: the library's gate run."""
    run = evaluate_window(store, window, gates, relation=relation, run_id=run_id,
                          batch_size=batch_size, progress=progress)
    return stored_gate_report(store, window, gates, relation=relation, run_id=run.run_id)


def stored_gate_report(store: StoreLocation, window: TimeWindow, gates: Sequence[Gate], *,
                       relation: str = DEFAULT_RELATION, run_id: str) -> GateReport:
    """The report of run ``run_id`` over ``window``, read from the stored results: every
    gate's figures over all answers of the window, with what that run evaluated and the time
    it spent; when the window has no answer, how many the relation holds on which days. The
    library's gate run (:func:`run_quality_gates`) and a Dagster
    ``quality_gate_job`` run (``eval-harness gate --partition``) are reported through it."""
    with store.connection() as conn:
        summaries = summarize_gates(conn, window, gates, relation=relation, run_id=run_id)
        elsewhere = None
        if not any(s.answers for s in summaries):  # say where the answers are instead
            elsewhere = AnswersElsewhere(*sql.answer_days_span(conn, relation))
    return GateReport(window, tuple(summaries), run_id, elsewhere)
