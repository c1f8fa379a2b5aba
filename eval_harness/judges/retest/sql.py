"""Every SQL statement on ``judge_retests`` (migration 0013): each scoring of a judge's
test-retest (:mod:`.self_agreement`), repeat 0 being the score the run's labels came from.

Each function runs in the caller's transaction; the caller commits."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from eval_harness.datasets.ground_truth import EXISTING_QUERY_ID

_INSERT = (
    "INSERT INTO judge_retests (run_id, dataset, judge, judge_spec, model, prompt_version, "
    "query_key, doc_id, repeat, score, label, query_id) "
    "SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, " + EXISTING_QUERY_ID
    + " ON CONFLICT (run_id, judge, query_key, doc_id, repeat) DO UPDATE SET "
    "score = EXCLUDED.score, label = EXCLUDED.label")


def store_retests(conn: psycopg.Connection, *, run_id: str, dataset: str, judge: int,
                  judge_spec: str, prompt_version: str | None,
                  rows: Sequence[tuple]) -> None:
    """Insert one judge's scorings: ``rows`` of ``(query_id, query_key, doc_id, repeat,
    score, label)`` (score and label None where unscored or failed)."""
    model = judge_spec.split(":", 1)[-1]
    with conn.cursor() as cur:
        cur.executemany(_INSERT, [
            (run_id, dataset, judge, judge_spec, model, prompt_version, query_key, doc_id,
             repeat, score, label, query_id)
            for query_id, query_key, doc_id, repeat, score, label in rows])


def retest_rows(conn: psycopg.Connection, dataset: str, *,
                run_id: str | None = None) -> list[tuple]:
    """The scorings of ``run_id``'s test-retest of ``dataset`` (None: the newest run that
    has one): ``(judge, judge_spec, query_key, doc_id, repeat, score)``."""
    if run_id is None:
        row = conn.execute(
            "SELECT run_id FROM judge_retests WHERE dataset = %s "
            "ORDER BY created_at DESC, id DESC LIMIT 1", (dataset,)).fetchone()
        if row is None:
            return []
        run_id = row[0]
    return conn.execute(
        "SELECT judge, judge_spec, query_key, doc_id, repeat, score FROM judge_retests "
        "WHERE dataset = %s AND run_id = %s ORDER BY judge, query_key, doc_id, repeat",
        (dataset, run_id)).fetchall()
