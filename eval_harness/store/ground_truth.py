"""The owner of the ``ground_truth`` table: every statement that reads or writes it.

``ground_truth`` holds one row per (dataset, query, document) pair: the human relevance label
(qrels), each judge's score and label, and how the pair was settled. Judging writes the judge
columns, ingest and attach write the human labels, agreement and calibration read the labels,
the gates and reports read counts. They all call the functions here; no other module holds SQL
that names the table (tests/test_layers.py checks it).
"""

from __future__ import annotations

# ------------------------------------------------------------------------------ judging (dual-judge runs)
# The judge columns: the queries a dual-judge run plans, its writes, staged judging's reads.
# (This section's imports are here so that sections appended side by side do not conflict.)

from collections.abc import Sequence  # noqa: E402

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

# The id of ground-truth query %s, or NULL once it is deleted: a cost row (api_cost_log, see
# eval_harness.judges.client.sql) keeps the call without the query.
EXISTING_QUERY_ID = "(SELECT id FROM ground_truth WHERE id = %s)"


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


# Each staged pair that judge 2 was not asked to score (judge2_status); agreement reads it too.
SKIPPED = "skipped"
