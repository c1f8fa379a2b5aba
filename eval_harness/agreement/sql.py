"""Every SQL statement of the agreement domain: the owner of the human sample
``human_sample`` (migration 0009). The review queue ``judge_review`` has its owner in datasets/
(:mod:`eval_harness.datasets.judge_review`), where an ingest can reach it; the judge scores
both are built from are read through :mod:`eval_harness.datasets.ground_truth`.

Each function takes a connection and plain values and returns rows or plain values.
Transactions and locks stay with the callers (:mod:`eval_harness.agreement.sample`,
:mod:`eval_harness.calibration.ppi_p_at_5`): every function runs in the caller's transaction.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import Corpus


# ------------------------------------------------------------------------------ human sample


def lock_human_sample(conn: psycopg.Connection, dataset: str) -> None:
    """Wait for the human sample's advisory lock of ``dataset`` (until the transaction ends)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('eval_harness.agreement.sample:' || %s))",
                 (dataset,))


def human_sample_seeds(conn: psycopg.Connection, dataset: str) -> list[int]:
    """The seeds the human sample of ``dataset`` was drawn with (one, or none yet)."""
    return [seed for (seed,) in conn.execute(
        "SELECT DISTINCT seed FROM human_sample WHERE dataset = %s ORDER BY seed",
        (dataset,)).fetchall()]


def add_to_human_sample(conn: psycopg.Connection, corpus: Corpus, query_ids: list[int],
                        seed: int) -> int:
    """Every scored pair of the queries ``query_ids`` into ``human_sample`` (pairs already in it
    keep their row and verdict); how many pairs were added."""
    return conn.execute(sql.SQL("""
        INSERT INTO human_sample (dataset, ground_truth_id, doc_id, seed)
        SELECT %(dataset)s, s.ground_truth_id, s.doc_id, %(seed)s FROM ({}) s
        WHERE s.ground_truth_id = ANY(%(ids)s)
        ON CONFLICT (ground_truth_id, doc_id) DO NOTHING""").format(
        ground_truth.scored_pairs(corpus)),
                        {"dataset": corpus.dataset, "seed": seed, "ids": query_ids}).rowcount


def human_sample_export_rows(conn: psycopg.Connection, corpus: Corpus,
                             query_ids: list[int]) -> list[tuple]:
    """The sampled pairs of the queries ``query_ids`` by query then document external id:
    ``(dataset, query id, query external id, query, doc id, doc external id, doc content,
    verdict, reviewer, note)``; pairs whose document left the corpus are not listed."""
    return conn.execute(sql.SQL("""
        SELECT g.dataset, g.id, g.external_id, g.query, {did}, {dext}, {dcontent},
               h.verdict, h.reviewer, h.note
        FROM human_sample h
        JOIN {gt} ON g.id = h.ground_truth_id
        JOIN {d} ON {rows} AND {did} = h.doc_id
        WHERE h.dataset = %s AND h.ground_truth_id = ANY(%s)
        ORDER BY g.external_id, 6""").format(
        gt=ground_truth.table("g"), did=corpus.id_of("d"), dext=corpus.external_id_of("d"),
        dcontent=corpus.content_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d")), (corpus.dataset, query_ids)).fetchall()


def human_sample_pairs_for_update(conn: psycopg.Connection,
                                  corpus: Corpus) -> list[tuple]:
    """``(query id, doc id, query external id, doc external id or None when the document left
    the corpus)`` of every sampled pair of the corpus's dataset, rows locked."""
    return conn.execute(sql.SQL("""
        SELECT h.ground_truth_id, h.doc_id, g.external_id, {dext}
        FROM human_sample h
        JOIN {gt} ON g.id = h.ground_truth_id
        LEFT JOIN {d} ON {rows} AND {did} = h.doc_id
        WHERE h.dataset = %s
        FOR UPDATE OF h""").format(
        gt=ground_truth.table("g"), dext=corpus.external_id_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d"), did=corpus.id_of("d")), (corpus.dataset,)).fetchall()


def store_sample_verdict(conn: psycopg.Connection, query_id: int, doc_id: int, *, verdict: str,
                         reviewer: str | None, note: str | None) -> int:
    """Label a sampled pair (``labelled_at`` moves only when the verdict changes); 1 when the
    row changed, 0 when it already held this verdict, reviewer and note."""
    return conn.execute("""
        UPDATE human_sample SET verdict = %(verdict)s, reviewer = %(reviewer)s,
            note = %(note)s,
            labelled_at = CASE WHEN verdict IS DISTINCT FROM %(verdict)s
                               THEN now() ELSE labelled_at END
        WHERE (ground_truth_id, doc_id) = (%(qid)s, %(doc)s)
          AND (verdict, reviewer, note) IS DISTINCT FROM
              (%(verdict)s, %(reviewer)s, %(note)s)""",
                        {"verdict": verdict, "reviewer": reviewer, "note": note,
                         "qid": query_id, "doc": doc_id}).rowcount


def human_sample_labels(conn: psycopg.Connection, dataset: str) -> list[tuple[int, int, str | None]]:
    """``(query id, doc id, verdict or None)`` of every sampled pair of ``dataset``."""
    return conn.execute("SELECT ground_truth_id, doc_id, verdict FROM human_sample "
                        "WHERE dataset = %s", (dataset,)).fetchall()
