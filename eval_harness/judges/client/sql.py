"""Every SQL statement on the call logs of the LLM client (``api_cost_log``, ``api_retry_log``,
``api_cache_hit_log``; written by :class:`~eval_harness.judges.client.ledger.JudgeLedger`, the
cost reads are the run report's) and on the register of provider batches (``judge_batches``).
The reply cache's table (``judge_cache``) is :mod:`.reply_cache`'s; the dual-judge run's reads
and writes of ``ground_truth`` are :mod:`eval_harness.datasets.ground_truth`'s.

Each function runs in the caller's transaction: committing, rolling back and the advisory
locks (their statements too) stay with the callers (:mod:`.ledger`, :mod:`.batch`,
:mod:`eval_harness.judges.dual.dry_run`, :mod:`eval_harness.reporting.sections.cost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from eval_harness.datasets.ground_truth import EXISTING_QUERY_ID

# ------------------------------------------------------------------------------ call logs

# query_id may name a query deleted meanwhile; the row is kept without it
_INSERT_COST = (
    "INSERT INTO api_cost_log (run_id, api_name, model, operation, input_tokens, "
    "output_tokens, cached_tokens, estimated_cost, batch, purpose, query_id) "
    "SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, " + EXISTING_QUERY_ID)
_INSERT_RETRY = (
    "INSERT INTO api_retry_log (run_id, api_name, model, operation, error_type, status_code, "
    "retry_count, wait_seconds, success) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")
_INSERT_HITS = (
    "INSERT INTO api_cache_hit_log (run_id, api_name, model, operation, hits, saved_cost) "
    "VALUES (%s, %s, %s, %s, %s, %s)")


def log_costs(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Insert billed calls into ``api_cost_log``: ``(run_id, api_name, model, operation,
    input_tokens, output_tokens, cached_tokens, estimated_cost, batch, purpose, query_id)``;
    ``purpose``: 'label' (the run's judgements) or 'retest' (a test-retest scoring)."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_COST, rows)


def log_retry(conn: psycopg.Connection, row: tuple) -> int:
    """Insert one retry into ``api_retry_log``: ``(run_id, api_name, model, operation,
    error_type, status_code, retry_count, wait_seconds, success)``;
    returns its id, for :func:`mark_retries_succeeded`."""
    with conn.cursor() as cur:
        cur.execute(_INSERT_RETRY + " RETURNING id", row)
        return int(cur.fetchone()[0])


def mark_retries_succeeded(conn: psycopg.Connection, ids: Sequence[int]) -> None:
    """The call these retries belong to finally got its reply."""
    with conn.cursor() as cur:
        cur.execute("UPDATE api_retry_log SET success = true WHERE id = ANY(%s)", (list(ids),))


def log_cache_hits(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Insert cache-hit counts into ``api_cache_hit_log``: ``(run_id, api_name, model,
    operation, hits, saved_cost)``."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_HITS, rows)


# ---------------------------------------------------------------------- cost reads (the run report)

# a call made for another purpose than the run's labels (a retest) is a line of its own:
# its operation reads "relevance (retest)"
_COST_SQL = """
    SELECT api_name, model,
           CASE WHEN purpose = 'label' THEN operation
                ELSE operation || ' (' || purpose || ')' END AS shown_operation,
           count(*), count(*) FILTER (WHERE batch),
           coalesce(sum(input_tokens), 0), coalesce(sum(cached_tokens), 0),
           coalesce(sum(output_tokens), 0), coalesce(sum(estimated_cost), 0),
           coalesce(sum(input_tokens) FILTER (WHERE batch), 0),
           coalesce(sum(least(cached_tokens, input_tokens)) FILTER (WHERE batch), 0),
           coalesce(sum(output_tokens) FILTER (WHERE batch), 0),
           coalesce(sum(estimated_cost) FILTER (WHERE batch), 0), max(created_at)
    FROM api_cost_log
    WHERE (%(run_ids)s::text[] IS NULL OR run_id = ANY(%(run_ids)s))
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
    GROUP BY api_name, model, shown_operation"""

_HITS_SQL = """
    SELECT api_name, model, operation, sum(hits), coalesce(sum(saved_cost), 0), max(created_at)
    FROM api_cache_hit_log
    WHERE (%(run_ids)s::text[] IS NULL OR run_id = ANY(%(run_ids)s))
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
    GROUP BY api_name, model, operation"""


def _cost_params(run_ids: Sequence[str] | None, since: datetime | None) -> dict:
    return {"run_ids": None if run_ids is None else list(run_ids), "since": since}


def billed_call_rows(conn: psycopg.Connection, *, run_ids: Sequence[str] | None,
                     since: datetime | None) -> list[tuple]:
    """``api_cost_log`` per (provider, model, operation), of the runs ``run_ids`` and/or
    since ``since`` (None: no limit; a retest's calls under operation ``"relevance
    (retest)"``): ``(api, model, operation, calls, batch_calls,
    input_tokens, cached_tokens, output_tokens, cost, batch_input_tokens,
    batch_cached_tokens, batch_output_tokens, batch_cost, last_at)``."""
    return conn.execute(_COST_SQL, _cost_params(run_ids, since)).fetchall()


def cache_hit_rows(conn: psycopg.Connection, *, run_ids: Sequence[str] | None,
                   since: datetime | None) -> list[tuple] | None:
    """``api_cache_hit_log`` per (provider, model, operation), limited as
    :func:`billed_call_rows`: ``(api, model, operation, hits, saved_cost, last_at)``; None
    when the store predates migration 0005 (the table is missing)."""
    try:
        with conn.transaction():
            return conn.execute(_HITS_SQL, _cost_params(run_ids, since)).fetchall()
    except psycopg.errors.UndefinedTable:
        return None


def billed_calls_ever(conn: psycopg.Connection) -> tuple[int, float]:
    """Every billed call in ``api_cost_log``: how many, and their cost (USD)."""
    calls, cost = conn.execute(
        "SELECT count(*), coalesce(sum(estimated_cost), 0) FROM api_cost_log").fetchone()
    return calls, float(cost)


# ------------------------------------------------------------------------------ provider batches

def open_batch_rows(conn: psycopg.Connection, provider: str,
                    keys: Sequence[str]) -> list[tuple[str, dict, str | None]]:
    """``(batch_id, requests, run_id)`` of ``provider``'s submitted batches holding any of
    ``keys``, oldest first."""
    return conn.execute(
        "SELECT batch_id, requests, run_id FROM judge_batches WHERE provider = %s "
        "AND status = 'submitted' AND keys && %s::text[] ORDER BY submitted_at, id",
        (provider, list(keys))).fetchall()


def register_batch(conn: psycopg.Connection, provider: str, batch_id: str, *,
                   models: Sequence[str], keys: Sequence[str], requests: dict,
                   run_id: str | None) -> None:
    """Record a submitted batch in ``judge_batches`` (a batch already recorded is kept)."""
    conn.execute(
        "INSERT INTO judge_batches (provider, batch_id, models, keys, requests, run_id) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (provider, batch_id) DO NOTHING",
        (provider, batch_id, list(models), list(keys), Jsonb(requests), run_id))


def abandon_batch(conn: psycopg.Connection, provider: str, batch_id: str) -> None:
    """Mark a still submitted batch abandoned (never polled again)."""
    conn.execute(
        "UPDATE judge_batches SET status = 'abandoned', ended_at = now() "
        "WHERE provider = %s AND batch_id = %s AND status = 'submitted'",
        (provider, batch_id))


def end_batch(conn: psycopg.Connection, provider: str, batch_id: str, status: str) -> bool:
    """Set a submitted batch's final ``status``; False when it was no longer submitted."""
    return bool(conn.execute(
        "UPDATE judge_batches SET status = %s, ended_at = now() WHERE provider = %s "
        "AND batch_id = %s AND status = 'submitted'",
        (status, provider, batch_id)).rowcount)
