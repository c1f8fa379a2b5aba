"""The owner of the ``judge_review`` table, the review queue of judge disagreements
(migration 0003): every statement that reads or writes it.

A row is one (ground-truth query, document) pair the two judges disagree on, with the scores
and models the reviewer sees and the reviewer's verdict. The agreement domain fills and reads
the queue (:mod:`eval_harness.agreement.review`: refresh, export, import, adjudicated
labels); an ingest removes the rows of documents it removed
(:mod:`eval_harness.datasets.ingest`: the queue keeps document ids without a foreign key since
migration 0008). They all call the functions here; no other module holds SQL that names the
table (tests/test_layers.py checks it). The queue sits in datasets/, below the agreement domain,
so that an ingest can reach it. A statement here that joins a query row takes the table from
:func:`eval_harness.datasets.ground_truth.table`, and one over documents its relation from
:class:`~eval_harness.datasets.corpus.Corpus`.

Transactions and locks stay with the callers: every function runs in the caller's
transaction.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import Corpus


def lock_review_queue(conn: psycopg.Connection, dataset: str) -> None:
    """Wait for the review queue's advisory lock of ``dataset`` (until the transaction ends)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('eval_harness.agreement.review:' || %s))",
                 (dataset,))


def stage_scored_pairs(conn: psycopg.Connection, corpus: Corpus, threshold: float) -> int:
    """The scored pairs of the corpus's dataset into the temporary table ``_review_pairs`` (dropped at
    commit), each marked disagreeing or not at ``threshold``; how many disagree."""
    conn.execute("DROP TABLE IF EXISTS _review_pairs")
    conn.execute("""
        CREATE TEMP TABLE _review_pairs (
            ground_truth_id integer, doc_id integer, s1 float8, s2 float8, m1 text,
            m2 text, disagrees boolean, PRIMARY KEY (ground_truth_id, doc_id))
        ON COMMIT DROP""")
    conn.execute(sql.SQL("""
        INSERT INTO _review_pairs
        SELECT s.*, round(abs(s.s1 - s.s2)::numeric, 12) > %(threshold)s::numeric
        FROM ({}) s""").format(ground_truth.scored_pairs(corpus)),
                 {"dataset": corpus.dataset, "threshold": threshold})
    return conn.execute("SELECT count(*) FROM _review_pairs WHERE disagrees").fetchone()[0]


def upsert_disagreeing_pairs(conn: psycopg.Connection) -> list[bool]:
    """Queue the staged disagreeing pairs: a new pair is inserted, a queued one whose scores
    or models changed is re-queued (pending, next revision, verdict cleared). One flag per
    pair written: True inserted, False re-queued."""
    rows = conn.execute("""
        INSERT INTO judge_review AS r (ground_truth_id, doc_id, judge1_score, judge2_score,
                                       score_diff, judge1_model, judge2_model)
        SELECT ground_truth_id, doc_id, s1, s2, round(abs(s1 - s2)::numeric, 12), m1, m2
        FROM _review_pairs WHERE disagrees
        ON CONFLICT (ground_truth_id, doc_id) DO UPDATE SET
            judge1_score = EXCLUDED.judge1_score, judge2_score = EXCLUDED.judge2_score,
            score_diff = EXCLUDED.score_diff, judge1_model = EXCLUDED.judge1_model,
            judge2_model = EXCLUDED.judge2_model, score_revision = r.score_revision + 1,
            status = 'pending', verdict = NULL, reviewer = NULL, note = NULL,
            adjudicated_at = NULL, queued_at = now(), updated_at = now()
        WHERE (r.judge1_score, r.judge2_score, r.judge1_model, r.judge2_model)
              IS DISTINCT FROM (EXCLUDED.judge1_score, EXCLUDED.judge2_score,
                                EXCLUDED.judge1_model, EXCLUDED.judge2_model)
        RETURNING (xmax = 0)""").fetchall()
    return [is_new for (is_new,) in rows]


def delete_settled_pairs(conn: psycopg.Connection, dataset: str) -> int:
    """Remove queued pairs of ``dataset`` that no longer disagree (staged), except adjudicated
    ones whose scores and models are unchanged; how many were removed."""
    return conn.execute(sql.SQL("""
        DELETE FROM judge_review r USING {gt}
        WHERE g.id = r.ground_truth_id AND g.dataset = %(dataset)s
          AND NOT EXISTS (SELECT 1 FROM _review_pairs c WHERE c.disagrees
                          AND (c.ground_truth_id, c.doc_id) = (r.ground_truth_id, r.doc_id))
          AND NOT (r.status = 'adjudicated' AND EXISTS (
              SELECT 1 FROM _review_pairs c
              WHERE (c.ground_truth_id, c.doc_id) = (r.ground_truth_id, r.doc_id)
                AND (c.s1, c.s2, c.m1, c.m2) IS NOT DISTINCT FROM
                    (r.judge1_score, r.judge2_score, r.judge1_model, r.judge2_model)))""").format(
        gt=ground_truth.table("g")), {"dataset": dataset}).rowcount


def review_status_counts(conn: psycopg.Connection, dataset: str) -> tuple[int, int]:
    """(pending, adjudicated) rows of the review queue of ``dataset``."""
    pending, adjudicated = conn.execute(sql.SQL("""
        SELECT count(*) FILTER (WHERE r.status = 'pending'),
               count(*) FILTER (WHERE r.status = 'adjudicated')
        FROM judge_review r JOIN {gt} ON g.id = r.ground_truth_id
        WHERE g.dataset = %s""").format(gt=ground_truth.table("g")), (dataset,)).fetchone()
    return int(pending), int(adjudicated)


def current_verdicts(conn: psycopg.Connection, corpus: Corpus) -> list[tuple[int, int, str]]:
    """``(ground_truth id, doc id, verdict)`` of the adjudicated pairs of the corpus's
    dataset whose scores and models are still those the reviewer saw."""
    return conn.execute(sql.SQL("""
        SELECT r.ground_truth_id, r.doc_id, r.verdict
        FROM judge_review r
        JOIN ({}) c USING (ground_truth_id, doc_id)
        WHERE r.status = 'adjudicated'
          AND (c.s1, c.s2, c.m1, c.m2) IS NOT DISTINCT FROM
              (r.judge1_score, r.judge2_score, r.judge1_model, r.judge2_model)""").format(
        ground_truth.scored_pairs(corpus)), {"dataset": corpus.dataset}).fetchall()


def review_export_rows(conn: psycopg.Connection, corpus: Corpus) -> list[tuple]:
    """The queue of the corpus's dataset by query then document external id: ``(dataset,
    query id, query external id, query, doc id, doc external id, doc content, judge1 model,
    judge1 score, judge2 model, judge2 score, score diff, score revision, status, verdict,
    reviewer, note)``."""
    return conn.execute(sql.SQL("""
        SELECT g.dataset, g.id, g.external_id, g.query, {did}, {dext}, {dcontent},
               r.judge1_model, r.judge1_score, r.judge2_model, r.judge2_score,
               r.score_diff, r.score_revision, r.status, r.verdict, r.reviewer, r.note
        FROM judge_review r
        JOIN {gt} ON g.id = r.ground_truth_id
        JOIN {d} ON {rows} AND {did} = r.doc_id
        WHERE g.dataset = %s
        ORDER BY g.external_id, 6""").format(
        gt=ground_truth.table("g"), did=corpus.id_of("d"), dext=corpus.external_id_of("d"),
        dcontent=corpus.content_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d")), (corpus.dataset,)).fetchall()


def queued_pairs_for_update(conn: psycopg.Connection, corpus: Corpus) -> list[tuple]:
    """``(ground_truth id, doc id, score revision, judge1 score, judge2 score, rescored)`` of
    the queue of the corpus's dataset, rows locked; ``rescored``: the pair's current scores
    or models differ from the queued ones (or it is no longer scored)."""
    return conn.execute(sql.SQL("""
        SELECT r.ground_truth_id, r.doc_id, r.score_revision, r.judge1_score, r.judge2_score,
               (c.doc_id IS NULL OR (c.s1, c.s2, c.m1, c.m2) IS DISTINCT FROM
                   (r.judge1_score, r.judge2_score, r.judge1_model, r.judge2_model))
        FROM judge_review r
        JOIN {gt} ON g.id = r.ground_truth_id
        LEFT JOIN ({}) c USING (ground_truth_id, doc_id)
        WHERE g.dataset = %(dataset)s
        FOR UPDATE OF r""").format(ground_truth.scored_pairs(corpus), gt=ground_truth.table("g")),
        {"dataset": corpus.dataset}).fetchall()


def store_verdict(conn: psycopg.Connection, query_id: int, doc_id: int, *, verdict: str,
                  reviewer: str | None, note: str | None) -> int:
    """Adjudicate the pair (``adjudicated_at`` moves only when the verdict changes); 1 when
    the row changed, 0 when it already held this verdict, reviewer and note."""
    return conn.execute("""
        UPDATE judge_review SET status = 'adjudicated', verdict = %(verdict)s,
            reviewer = %(reviewer)s, note = %(note)s, updated_at = now(),
            adjudicated_at = CASE WHEN verdict IS DISTINCT FROM %(verdict)s
                                  THEN now() ELSE adjudicated_at END
        WHERE (ground_truth_id, doc_id) = (%(qid)s, %(doc)s)
          AND (status, verdict, reviewer, note) IS DISTINCT FROM
              ('adjudicated', %(verdict)s, %(reviewer)s, %(note)s)""",
                        {"verdict": verdict, "reviewer": reviewer, "note": note,
                         "qid": query_id, "doc": doc_id}).rowcount


def delete_pairs_of_removed_documents(conn: psycopg.Connection, corpus: Corpus) -> int:
    """Remove the queued pairs of the corpus's dataset whose document is no longer in the
    corpus (an ingest removed it); how many were removed."""
    return conn.execute(sql.SQL("""
        DELETE FROM judge_review r USING {gt}
        WHERE g.id = r.ground_truth_id AND g.dataset = %s
          AND NOT EXISTS (SELECT 1 FROM {d} WHERE {did} = r.doc_id)""").format(
        gt=ground_truth.table("g"), d=corpus.table("d"), did=corpus.id_of("d")),
        (corpus.dataset,)).rowcount


def adjudicated_labels(conn: psycopg.Connection, dataset: str) -> dict[tuple[int, int], bool]:
    """``(ground_truth id, doc id) -> relevant?`` of every adjudicated pair of ``dataset``
    (whatever the judges' scores now: the verdict is about the pair)."""
    rows = conn.execute(sql.SQL("""
        SELECT r.ground_truth_id, r.doc_id, r.verdict
        FROM judge_review r JOIN {gt} ON g.id = r.ground_truth_id
        WHERE g.dataset = %s AND r.status = 'adjudicated' AND r.verdict IS NOT NULL""").format(
        gt=ground_truth.table("g")), (dataset,)).fetchall()
    return {(qid, doc): verdict == "relevant" for qid, doc, verdict in rows}
