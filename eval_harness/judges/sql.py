"""Every SQL statement of the judges: the reply cache and the call logs (written by
:class:`~eval_harness.judges.cache.JudgeLedger`), the register of provider batches, and the
dual-judge run's reads and writes of ``ground_truth`` (documents are read through
:mod:`eval_harness.store.corpus`).

Each function runs in the caller's transaction: committing, rolling back and the advisory
locks (their statements too) stay with the callers (:mod:`.cache`, :mod:`.dual`, :mod:`.dual_plan`,
:mod:`.dual_scores`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

# ------------------------------------------------------------------------------ reply cache

_INSERT_CACHE = (
    "INSERT INTO judge_cache (key, provider, model, operation, prompt_version, reply, "
    "input_tokens, output_tokens, cached_tokens, batch, run_id) VALUES "
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING")


def cached_reply(conn: psycopg.Connection, key: str) -> tuple | None:
    """The ``judge_cache`` row of ``key`` laid out as :func:`store_replies` takes it, without
    the last two columns: ``(key, provider, model, operation, prompt_version, reply,
    input_tokens, output_tokens, cached_tokens)``; None when the cache has no such reply."""
    return conn.execute(
        "SELECT key, provider, model, operation, prompt_version, reply, input_tokens, "
        "output_tokens, cached_tokens FROM judge_cache WHERE key = %s", (key,)).fetchone()


def cached_keys_among(conn: psycopg.Connection, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` have a reply in ``judge_cache``."""
    rows = conn.execute("SELECT key FROM judge_cache WHERE key = ANY(%s)",
                        (list(keys),)).fetchall()
    return {row[0] for row in rows}


def replace_replies(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Like :func:`store_replies`, but a key already cached takes the new reply (a question
    re-asked because its cached replies left it unscored)."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_CACHE.replace(
            "DO NOTHING", "DO UPDATE SET reply = EXCLUDED.reply, input_tokens = "
            "EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, cached_tokens = "
            "EXCLUDED.cached_tokens, batch = EXCLUDED.batch, run_id = EXCLUDED.run_id"), rows)


def store_replies(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Insert replies into ``judge_cache``: ``(key, provider, model, operation,
    prompt_version, reply, input_tokens, output_tokens, cached_tokens, batch, run_id)``; a
    key already cached keeps its first reply."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_CACHE, rows)


# ------------------------------------------------------------------------------ call logs

# query_id may name a query deleted meanwhile; the row is kept without it
_INSERT_COST = (
    "INSERT INTO api_cost_log (run_id, api_name, model, operation, input_tokens, "
    "output_tokens, cached_tokens, estimated_cost, batch, query_id) "
    "SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, (SELECT id FROM ground_truth WHERE id = %s)")
_INSERT_RETRY = (
    "INSERT INTO api_retry_log (run_id, api_name, model, operation, error_type, status_code, "
    "retry_count, wait_seconds, success) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")
_INSERT_HITS = (
    "INSERT INTO api_cache_hit_log (run_id, api_name, model, operation, hits, saved_cost) "
    "VALUES (%s, %s, %s, %s, %s, %s)")


def log_costs(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Insert billed calls into ``api_cost_log``: ``(run_id, api_name, model, operation,
    input_tokens, output_tokens, cached_tokens, estimated_cost, batch, query_id)``."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_COST, rows)


def log_retries(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Insert retries into ``api_retry_log``: ``(run_id, api_name, model, operation,
    error_type, status_code, retry_count, wait_seconds, success)``."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_RETRY, rows)


def log_retry(conn: psycopg.Connection, row: tuple) -> int:
    """Insert one retry into ``api_retry_log`` (the row as :func:`log_retries` takes it);
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


# ------------------------------------------------------------------------------ dual-judge runs

def ground_truth_queries(conn: psycopg.Connection, dataset: str,
                         limit: int | None) -> list[tuple]:
    """``(id, external_id, query, query_embedding, expected_docs)`` of the ground-truth
    queries of ``dataset``, by id, at most ``limit`` (None: all)."""
    return conn.execute("SELECT id, external_id, query, query_embedding, expected_docs "
                        "FROM ground_truth WHERE dataset = %s ORDER BY id LIMIT %s",
                        (dataset, limit)).fetchall()


def ground_truth_embedding(conn: psycopg.Connection, query_id: int) -> tuple | None:
    """``(query_embedding, dataset)`` of ground-truth query ``query_id``; None when there is
    none."""
    return conn.execute("SELECT query_embedding, dataset FROM ground_truth WHERE id = %s",
                        (query_id,)).fetchone()


# `old` is the row as it was before this UPDATE (a self-join reads the statement's snapshot);
# RETURNING compares it with the new row. Works on every Postgres version.
_WRITE_JUDGEMENTS = """
        UPDATE ground_truth AS g SET judged_docs = %s::int[], judge1_score = %s::float8[],
               judge2_score = %s::float8[], judge1_model = %s, judge2_model = %s, kappa = %s,
               judge1_status = %s::text[], judge2_status = %s::text[],
               judge_prompt_versions = %s::text[], judge_run_id = %s, judged_at = now()
        FROM ground_truth AS old
        WHERE old.id = g.id AND g.id = %s"""
# the embedding as text: after a re-ingest its width may differ
_STILL_AS_PLANNED = (" AND g.query = %s AND g.expected_docs = %s::int[] "
                     "AND g.query_embedding::text IS NOT DISTINCT FROM %s::vector::text")
_JUDGEMENT_CHANGED = """
        RETURNING (old.judged_docs, old.judge1_score, old.judge2_score, old.judge1_model,
                   old.judge2_model, old.judge1_status, old.judge2_status,
                   old.judge_prompt_versions)
                  IS DISTINCT FROM
                  (g.judged_docs, g.judge1_score, g.judge2_score, g.judge1_model,
                   g.judge2_model, g.judge1_status, g.judge2_status, g.judge_prompt_versions)"""


PlannedAs = tuple[str, Sequence[int], np.ndarray | None]  # query, expected_docs, embedding


def write_query_judgements(conn: psycopg.Connection, query_id: int, *,
                           doc_ids: Sequence[int],
                           scores: tuple[Sequence[float | None], Sequence[float | None]],
                           statuses: tuple[Sequence[str], Sequence[str]],
                           judges: tuple[str, str], prompt_versions: Sequence[str | None],
                           kappa: float | None, run_id: str,
                           planned_as: PlannedAs | None = None) -> bool | None:
    """Write one query's judgements into its ``ground_truth`` row (judge 1 first in each
    pair); whether the stored judgement changed (documents, scores, outcomes, judges or prompt
    versions; not the run id or time). With ``planned_as = (query, expected_docs,
    query_embedding)`` the row is written only while it still holds those; None when no row
    was written."""
    guard = "" if planned_as is None else _STILL_AS_PLANNED
    row = conn.execute(
        _WRITE_JUDGEMENTS + guard + _JUDGEMENT_CHANGED,
        (list(doc_ids), list(scores[0]), list(scores[1]), judges[0], judges[1], kappa,
         list(statuses[0]), list(statuses[1]), list(prompt_versions), run_id, query_id,
         *(() if planned_as is None
           else (planned_as[0], list(planned_as[1]), planned_as[2])))).fetchone()
    return None if row is None else bool(row[0])


def judge2_skipped_rows(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """``(id, external_id, query, judge2_model, doc ids judge 2 was not asked)`` of each query
    of ``dataset`` with such pairs (``judge2_status`` ``skipped``: staged dual judging)."""
    return conn.execute("""
        SELECT g.id, g.external_id, g.query, g.judge2_model,
               array(SELECT d FROM unnest(g.judged_docs, g.judge2_status) AS p(d, s)
                     WHERE p.s = 'skipped')
        FROM ground_truth g
        WHERE g.dataset = %s AND 'skipped' = ANY(g.judge2_status)
        ORDER BY g.id""", (dataset,)).fetchall()
