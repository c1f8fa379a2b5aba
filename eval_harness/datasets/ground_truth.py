"""The owner of the ``ground_truth`` table: every statement that reads or writes it.

``ground_truth`` holds one row per (dataset, query, document) pair: the human relevance label
(qrels), each judge's score and label, and how the pair was settled. Judging writes the judge
columns, ingest and attach write the human labels, agreement and calibration read the labels,
the gates and reports read counts. They all call the functions here; no other module holds SQL
that names the table (tests/test_layers.py checks it). A statement of another table's owner
that joins a query row (the review queue, the human sample, the search's bulk candidates, the
live write-back) takes the table from :func:`table`, as a statement over documents takes its
relation from :class:`~eval_harness.datasets.corpus.Corpus`.

Each function runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import psycopg
from psycopg import sql

from eval_harness.datasets.corpus import Corpus

# The judge status of a pair judge 2 was not asked (staged dual judging): neither scored nor
# failed, so the pair is settled by judge 1 alone.
SKIPPED = "skipped"


# ------------------------------------------------------------------------------ fragments

def table(alias: str) -> sql.Composed:
    """``ground_truth AS <alias>``, for a statement of another table's owner that joins it."""
    return sql.SQL("ground_truth AS {}").format(sql.Identifier(alias))


def scored_pairs(corpus: Corpus) -> sql.Composed:
    """The current scored pairs of the corpus's dataset, one row per (query, document),
    documents that exist only: ``(ground_truth_id, doc_id, s1, s2, m1, m2)``. Scores that
    are NULL, NaN or outside [0, 1] are not "scored". Takes the parameter ``%(dataset)s``."""
    return sql.SQL("""
    SELECT g.id AS ground_truth_id, p.doc_id, p.s1, p.s2,
           g.judge1_model AS m1, g.judge2_model AS m2
    FROM ground_truth g
    CROSS JOIN LATERAL unnest(g.judged_docs, g.judge1_score, g.judge2_score)
         AS p(doc_id, s1, s2)
    WHERE g.dataset = %(dataset)s AND p.s1 BETWEEN 0 AND 1 AND p.s2 BETWEEN 0 AND 1
      AND EXISTS (SELECT 1 FROM {d} WHERE {rows} AND {did} = p.doc_id)""").format(
        d=corpus.table("d"), rows=corpus.rows_of_dataset("d"), did=corpus.id_of("d"))


def embedding_of_query_text() -> sql.SQL:
    """A scalar subquery: the embedding of the first ground-truth query (by id, any dataset)
    whose text is the parameter ``%(query)s`` and that has one; NULL when none has."""
    return sql.SQL("(SELECT g.query_embedding FROM ground_truth g "
                   "WHERE g.query = %(query)s AND g.query_embedding IS NOT NULL "
                   "ORDER BY g.id LIMIT 1)")


# ------------------------------------------------------------------------------ queries

def query_keys(conn: psycopg.Connection, dataset: str) -> dict[int, str]:
    """{id: key} of every ground-truth query of ``dataset``: the key is md5 of the query's
    text and of its embedding as text (NULL: none), so it changes when either does (the
    candidate cache, :mod:`eval_harness.retrieval.candidate_cache`, is keyed by it)."""
    return dict(conn.execute(
        "SELECT id, md5(query) || md5(coalesce(query_embedding::text, 'none')) "
        "FROM ground_truth WHERE dataset = %s", (dataset,)).fetchall())


def count_queries(conn: psycopg.Connection, dataset: str) -> int:
    """Ground-truth queries of ``dataset``, judged or not."""
    return conn.execute("SELECT count(*) FROM ground_truth WHERE dataset = %s",
                        (dataset,)).fetchone()[0]


def query_external_ids(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, str]:
    """The dataset's own ids of the ground-truth queries ``ids``: {id: external id}."""
    return dict(conn.execute("SELECT id, external_id FROM ground_truth WHERE id = ANY(%s)",
                             ([int(i) for i in ids],)).fetchall())


def first_queries(conn: psycopg.Connection, dataset: str, limit: int) -> list[str]:
    """The texts of the first ``limit`` ground-truth queries of ``dataset``, by id."""
    return [t for (t,) in conn.execute(
        "SELECT query FROM ground_truth WHERE dataset = %s ORDER BY id LIMIT %s",
        (dataset, limit))]


def first_query_with_embedding(conn: psycopg.Connection, dataset: str) -> tuple | None:
    """``(query, query_embedding)`` of the first ground-truth query of ``dataset`` (by id);
    None when it has none."""
    return conn.execute("SELECT query, query_embedding FROM ground_truth WHERE dataset = %s "
                        "ORDER BY id LIMIT 1", (dataset,)).fetchone()


def stored_query_embedding(conn: psycopg.Connection, dataset: str,
                           text: str) -> tuple | None:
    """``(query_embedding,)`` of a ground-truth query of ``dataset`` whose text is ``text``
    (the embedding may be None); None when ``dataset`` has no such query."""
    return conn.execute("SELECT query_embedding FROM ground_truth WHERE dataset = %s "
                        "AND query = %s LIMIT 1", (dataset, text)).fetchone()


def queries_without_embedding(conn: psycopg.Connection, dataset: str) -> list[str]:
    """The distinct query texts of ``dataset`` that have no embedding yet."""
    return [t for (t,) in conn.execute("SELECT DISTINCT query FROM ground_truth "
                                       "WHERE dataset = %s AND query_embedding IS NULL",
                                       (dataset,)).fetchall()]


def set_query_embeddings(conn: psycopg.Connection, dataset: str,
                         vectors: Sequence[tuple[object, str]]) -> None:
    """Give each query of ``dataset`` whose text is ``text`` and that has no embedding yet
    the embedding ``vector``, for every ``(vector, text)`` of ``vectors``."""
    with conn.cursor() as cur:
        cur.executemany("UPDATE ground_truth SET query_embedding = %s WHERE dataset = %s "
                        "AND query = %s AND query_embedding IS NULL",
                        [(vector, dataset, text) for vector, text in vectors])


# ------------------------------------------------------------------------------ human labels

def dataset_has_labels(conn: psycopg.Connection, dataset: str) -> bool:
    """Whether some ground-truth query of ``dataset`` has expected_docs (human labels)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM ground_truth WHERE dataset = %s "
                        "AND cardinality(expected_docs) > 0)", (dataset,)).fetchone()[0]


def graded_expected_docs(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """``(query id, expected_docs, relevance_grades)`` of each of the dataset's own
    ground-truth queries (not generated or users' ones: they have no human labels), by id."""
    return conn.execute("SELECT id, expected_docs, relevance_grades FROM ground_truth "
                        "WHERE dataset = %s AND origin = 'dataset' ORDER BY id",
                        (dataset,)).fetchall()


def external_qrels(conn: psycopg.Connection, corpus: Corpus) -> list[tuple[str, str, int]]:
    """``(query external id, document external id, grade)`` of every expected document of
    the corpus's dataset's ground truth, by query id, then document id."""
    return conn.execute(sql.SQL("""
        SELECT g.external_id, {dext}, r.grade
        FROM ground_truth g
        CROSS JOIN LATERAL unnest(g.expected_docs, g.relevance_grades) AS r(doc_id, grade)
        JOIN {d} ON {rows} AND {did} = r.doc_id
        WHERE g.dataset = %s ORDER BY g.id, r.doc_id""").format(
        dext=corpus.external_id_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d"), did=corpus.id_of("d")),
        (corpus.dataset,)).fetchall()


def labels_of_dataset() -> sql.SQL:
    """A subquery: ``(external_id, query, expected_docs)`` of every own ground-truth query
    (not generated or users' ones) of the dataset given as the parameter ``%s``."""
    return sql.SQL("SELECT external_id, query, expected_docs FROM ground_truth "
                   "WHERE dataset = %s AND origin = 'dataset'")


# ------------------------------------------------------------------------------ judge scores

def judged_query_rows(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """``(id, external_id, query, judged_docs, judge1_score, judge2_score, judge1_model,
    judge2_model, expected_docs, judge2_status)`` of each judged query of ``dataset``, in id
    order."""
    return conn.execute("""
        SELECT id, external_id, query, judged_docs, judge1_score, judge2_score,
               judge1_model, judge2_model, expected_docs, judge2_status
        FROM ground_truth WHERE dataset = %s AND judged_docs IS NOT NULL
        ORDER BY id""", (dataset,)).fetchall()


def first_query_repeating_a_document(conn: psycopg.Connection, dataset: str) -> str | None:
    """The external id of the first query of ``dataset`` whose ``judged_docs`` lists a
    document twice, or None."""
    row = conn.execute("""
        SELECT external_id FROM ground_truth g
        WHERE dataset = %s AND cardinality(judged_docs) <>
              (SELECT count(DISTINCT doc) FROM unnest(g.judged_docs) AS doc)
        ORDER BY id LIMIT 1""", (dataset,)).fetchone()
    return None if row is None else row[0]


def scored_query_external_ids(conn: psycopg.Connection, corpus: Corpus) -> list[tuple[int, str]]:
    """``(id, external id)`` of the corpus's dataset's queries with at least one pair both
    judges scored: the queries a human sample is drawn from."""
    return conn.execute(sql.SQL("""
        SELECT g.id, g.external_id FROM ground_truth g
        WHERE g.id IN (SELECT ground_truth_id FROM ({}) s) ORDER BY g.id""").format(
        scored_pairs(corpus)), {"dataset": corpus.dataset}).fetchall()


def last_judged_at(conn: psycopg.Connection, dataset: str) -> datetime | None:
    """When the newest judge label of ``dataset`` was written (None: no label yet)."""
    return conn.execute("SELECT max(judged_at) FROM ground_truth WHERE dataset = %s",
                        (dataset,)).fetchone()[0]


# ------------------------------------------------------------------------------ ingest, attach

def stored_query_hashes(conn: psycopg.Connection, dataset: str) -> dict[str, str]:
    """{external id: md5 of the query text} of the queries of ``dataset`` that have an
    embedding (what an ingest need not embed again)."""
    return dict(conn.execute(
        "SELECT external_id, md5(query) FROM ground_truth WHERE dataset = %s "
        "AND query_embedding IS NOT NULL", (dataset,)).fetchall())


def upsert_ingested_queries(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """Upsert the queries staged in ``_ingest_queries`` (an ingest) into ``dataset``; a
    changed query or changed labels drop the query's judge scores. One ``(inserted,)`` per
    row written."""
    return conn.execute("""
        INSERT INTO ground_truth AS g (dataset, external_id, query, query_embedding,
                                       expected_docs, relevance_grades)
        SELECT %(name)s, s.external_id, s.query, coalesce(s.query_embedding, e.query_embedding),
               s.expected_docs, s.relevance_grades
        FROM _ingest_queries s
        LEFT JOIN ground_truth e ON e.dataset = %(name)s AND e.external_id = s.external_id
        ON CONFLICT (dataset, external_id) DO UPDATE SET
            query = EXCLUDED.query, query_embedding = EXCLUDED.query_embedding,
            expected_docs = EXCLUDED.expected_docs, relevance_grades = EXCLUDED.relevance_grades,
            judged_docs = NULL, judge1_score = NULL, judge2_score = NULL,
            judge1_model = NULL, judge2_model = NULL, kappa = NULL
        WHERE g.origin = 'dataset'
          AND (g.query, g.query_embedding, g.expected_docs, g.relevance_grades)
              IS DISTINCT FROM (EXCLUDED.query, EXCLUDED.query_embedding,
                                EXCLUDED.expected_docs, EXCLUDED.relevance_grades)
        RETURNING (xmax = 0)""", {"name": dataset}).fetchall()


def upsert_attached_queries(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """Upsert the queries staged in ``_live_gt`` (an attach) into ``dataset``; a changed
    query or changed expected ids drop the query's embedding (if the text changed) and its
    judge scores. One ``(inserted,)`` per row written."""
    return conn.execute("""
        INSERT INTO ground_truth AS g (dataset, external_id, query, expected_docs,
                                       relevance_grades)
        SELECT %(name)s, s.external_id, s.query, s.expected_docs,
               array_fill(1, ARRAY[cardinality(s.expected_docs)])
        FROM _live_gt s
        ON CONFLICT (dataset, external_id) DO UPDATE SET
            query = EXCLUDED.query, expected_docs = EXCLUDED.expected_docs,
            relevance_grades = EXCLUDED.relevance_grades,
            query_embedding = CASE WHEN g.query = EXCLUDED.query THEN g.query_embedding END,
            judged_docs = NULL, judge1_score = NULL, judge2_score = NULL,
            judge1_model = NULL, judge2_model = NULL, kappa = NULL
        WHERE g.origin = 'dataset'
          AND (g.query, g.expected_docs) IS DISTINCT FROM (EXCLUDED.query, EXCLUDED.expected_docs)
        RETURNING (xmax = 0)""", {"name": dataset}).fetchall()


def delete_queries_not_staged(conn: psycopg.Connection, dataset: str, staged: str) -> int:
    """Delete the dataset's own queries of ``dataset`` whose external id is not in the
    temporary table ``staged`` (``_ingest_queries`` or ``_live_gt``); how many were deleted.
    Generated and users' queries stay: no dataset file or relation holds them."""
    return conn.execute(sql.SQL("""
        DELETE FROM ground_truth g WHERE g.dataset = %s AND g.origin = 'dataset'
          AND NOT EXISTS (SELECT 1 FROM {staged} s WHERE s.external_id = g.external_id)""").format(
        staged=sql.Identifier(staged)), (dataset,)).rowcount


# ------------------------------------------------------------------------------ query origins
# Generated and users' queries (eval_harness.query_sources): stored beside the dataset's own,
# never replaced by an ingest or attach, with no expected_docs (the judges label their pools).

ORIGINS = ("dataset", "generated", "users")
ORIGIN_NAMES = {"dataset": "the dataset's own", "generated": "generated", "users": "users'"}


def described_origins(counts: dict[str, int]) -> str:
    """``10 generated, 20 users'``: query counts by origin, in words, origins in order.

    >>> described_origins({"users": 20, "generated": 10})
    "10 generated, 20 users'"
    """
    return ", ".join(f"{counts[o]} {ORIGIN_NAMES[o]}" for o in ORIGINS if counts.get(o))


def query_origins(conn: psycopg.Connection, dataset: str) -> dict[str, int]:
    """{origin: queries} of ``dataset``'s ground truth (origins without queries left out)."""
    return dict(conn.execute("SELECT origin, count(*) FROM ground_truth WHERE dataset = %s "
                             "GROUP BY origin ORDER BY origin", (dataset,)).fetchall())


def origins_of(conn: psycopg.Connection, ids: Sequence[int]) -> dict[str, int]:
    """{origin: queries} among the ground-truth queries ``ids``."""
    return dict(conn.execute("SELECT origin, count(*) FROM ground_truth WHERE id = ANY(%s) "
                             "GROUP BY origin ORDER BY origin",
                             ([int(i) for i in ids],)).fetchall())


def query_texts(conn: psycopg.Connection, dataset: str) -> dict[str, str]:
    """{external id: query text} of every ground-truth query of ``dataset``."""
    return dict(conn.execute("SELECT external_id, query FROM ground_truth WHERE dataset = %s",
                             (dataset,)).fetchall())


def insert_generated_queries(conn: psycopg.Connection, dataset: str,
                             rows: Sequence[tuple[str, str, int, str, str]]) -> int:
    """Insert ``(external id, text, source document id, kind, generator)`` rows as generated
    queries of ``dataset``; an external id already stored is left as it is. How many were
    inserted."""
    if not rows:
        return 0
    return len(conn.execute("""
        INSERT INTO ground_truth (dataset, external_id, query, expected_docs, relevance_grades,
                                  origin, source_document, query_kind, generator)
        SELECT %s, r.external_id, r.query, '{}', '{}', 'generated', r.doc, r.kind, r.generator
        FROM unnest(%s::text[], %s::text[], %s::int[], %s::text[], %s::text[])
             AS r(external_id, query, doc, kind, generator)
        ON CONFLICT (dataset, external_id) DO NOTHING
        RETURNING id""", (dataset, *map(list, zip(*rows, strict=True)))).fetchall())


def insert_users_queries(conn: psycopg.Connection, dataset: str,
                         rows: Sequence[tuple[str, str, Sequence[str]]]) -> int:
    """Insert ``(external id, text, answer ids)`` rows as users' queries of ``dataset``; an
    external id already stored is left as it is. How many were inserted."""
    inserted = 0
    with conn.cursor() as cur:
        for external_id, text, answer_ids in rows:
            cur.execute("""
                INSERT INTO ground_truth (dataset, external_id, query, expected_docs,
                                          relevance_grades, origin, answer_ids)
                VALUES (%s, %s, %s, '{}', '{}', 'users', %s)
                ON CONFLICT (dataset, external_id) DO NOTHING""",
                        (dataset, external_id, text, list(answer_ids)))
            inserted += cur.rowcount
    return inserted


def generated_queries(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """``(id, external_id, query, source_document, query_kind, generator)`` of each generated
    query of ``dataset``, by id."""
    return conn.execute("""
        SELECT id, external_id, query, source_document, query_kind, generator
        FROM ground_truth WHERE dataset = %s AND origin = 'generated' ORDER BY id""",
                        (dataset,)).fetchall()


def query_embeddings_of(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, object]:
    """{id: query embedding} of the ground-truth queries ``ids`` that have one."""
    return dict(conn.execute("SELECT id, query_embedding FROM ground_truth WHERE id = ANY(%s) "
                             "AND query_embedding IS NOT NULL",
                             ([int(i) for i in ids],)).fetchall())


def users_queries(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """``(id, external_id, query, answer_ids)`` of each users' query of ``dataset``, by id."""
    return conn.execute("""
        SELECT id, external_id, query, answer_ids
        FROM ground_truth WHERE dataset = %s AND origin = 'users' ORDER BY id""",
                        (dataset,)).fetchall()


# ------------------------------------------------------------------------ judging (dual-judge runs)
# The judge columns: the queries a dual-judge run plans, its writes, staged judging's reads.

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


# A judgement of a pair is stored when its query's row holds a result of that judge (the
# spec in force) for the document that a rerun keeps: scored, or unscored (its reply is
# cached; a failed one is asked again, a skipped one was not asked).
_STORED_JUDGEMENTS = """
    WITH stored AS (
        SELECT g.id AS query_id, j.doc_id, j.judge
        FROM ground_truth AS g
        CROSS JOIN LATERAL (
            SELECT d.doc_id, 1 AS judge
            FROM unnest(g.judged_docs, g.judge1_status) AS d (doc_id, status)
            WHERE (g.judge1_model = %(judge1)s::text OR %(judge1)s::text IS NULL)
              AND d.status IN ('scored', 'unscored')
            UNION ALL
            SELECT d.doc_id, 2
            FROM unnest(g.judged_docs, g.judge2_status) AS d (doc_id, status)
            WHERE (g.judge2_model = %(judge2)s::text OR %(judge2)s::text IS NULL)
              AND d.status IN ('scored', 'unscored')) AS j
        WHERE g.dataset = %(dataset)s AND g.judged_docs IS NOT NULL
        UNION
        SELECT * FROM unnest(%(reply_queries)s::int[], %(reply_docs)s::int[],
                             %(reply_judges)s::int[]))
    SELECT count(*) FROM stored"""
_OF_PLANNED = """
    WHERE %(planned_queries)s::int[] IS NULL
       OR (query_id, doc_id) IN (SELECT * FROM unnest(%(planned_queries)s::int[],
                                                      %(planned_docs)s::int[]))"""


def stored_judgements(conn: psycopg.Connection, dataset: str, *,
                      judges: tuple[str, str] | None = None,
                      planned: Sequence[tuple[int, Sequence[int]]] | None = None,
                      replies: Sequence[tuple[int, int, int]] = ()) -> int:
    """How many judgements of ``dataset`` are stored, counting each (query, document, judge)
    once: the scored or unscored results in the query rows (by the judges ``judges`` when
    given, else by any), and ``replies`` ``(query id, document id, judge 1 or 2)``, whose
    replies are stored while their query is not written yet. With ``planned`` ``(query id,
    document ids)``, only those pairs count (what a run planned to judge)."""
    pairs = None if planned is None else [(q, d) for q, docs in planned for d in docs]
    return conn.execute(_STORED_JUDGEMENTS + _OF_PLANNED, {
        "dataset": dataset,
        "judge1": None if judges is None else judges[0],
        "judge2": None if judges is None else judges[1],
        "reply_queries": [r[0] for r in replies], "reply_docs": [r[1] for r in replies],
        "reply_judges": [r[2] for r in replies],
        "planned_queries": None if pairs is None else [q for q, _ in pairs],
        "planned_docs": None if pairs is None else [d for _, d in pairs]}).fetchone()[0]


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
