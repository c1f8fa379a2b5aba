"""Every SQL statement of retrieval: the dataset's settings, the hybrid search itself (one
query, and the candidate scores of many ground-truth queries at once) and the graded qrels.

The search statements are the product's search: the numpy sweep reproduces them exactly and
tests compare the two, so a change here is a change of the ranking (see
:mod:`eval_harness.retrieval.hybrid` for what they compute). Values are composed as literals
or passed as parameters; every statement runs in the caller's transaction.
"""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg import sql

# ------------------------------------------------------------------------------ datasets

def dataset_row(conn: psycopg.Connection, name: str, *, with_counts: bool) -> tuple | None:
    """``(name, language, embedding_model, embedding_dim, documents, queries)`` of dataset
    ``name`` (the counts are -1 unless ``with_counts``); None when it is not in the store."""
    counts = ("""(SELECT count(*) FROM l2_insights i WHERE i.dataset = d.name),
                 (SELECT count(*) FROM ground_truth g WHERE g.dataset = d.name)"""
              if with_counts else "-1, -1")
    return conn.execute(f"""
        SELECT d.name, d.language::text, d.embedding_model, d.embedding_dim, {counts}
        FROM datasets d WHERE d.name = %s""", (name,)).fetchone()


def dataset_names(conn: psycopg.Connection) -> list[str]:
    """The names of the datasets in the store, sorted."""
    return [r[0] for r in conn.execute("SELECT name FROM datasets ORDER BY name")]


def graded_expected_docs(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """``(query id, expected_docs, relevance_grades)`` of each ground-truth query of
    ``dataset``, by id."""
    return conn.execute("SELECT id, expected_docs, relevance_grades FROM ground_truth "
                        "WHERE dataset = %s ORDER BY id", (dataset,)).fetchall()


# ------------------------------------------------------------------------------ hybrid search

def set_hnsw_ef_search(conn: psycopg.Connection, ef: int) -> None:
    """Set ``hnsw.ef_search`` for the rest of the session."""
    conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))


def _candidates_fragment(name: str, dim: int, depth: int, *, semantic: bool) -> sql.Composed:
    """``WHERE d.id IN (...)`` body: the candidate union for the lateral query row ``q``."""
    parts = []
    if semantic:
        # An empty document has no embedding: the index leaves it out, but a plan that sorts
        # would put its NULL distance last and make it a candidate with no semantic score.
        parts.append(sql.SQL(
            "(SELECT s.id FROM l2_insights s WHERE s.dataset = {name} "
            "AND s.embedding IS NOT NULL "
            "ORDER BY s.embedding::vector({dim}) <=> q.emb LIMIT {depth})"))
    # q is computed once per query (OFFSET 0 / MATERIALIZED): if the planner inlined it,
    # eh_or_tsquery would run for every document row, several times slower.
    parts.append(sql.SQL(
        "(SELECT k.id FROM l2_insights k WHERE k.dataset = {name} AND k.tsv @@ q.tsq "
        "ORDER BY ts_rank(k.tsv, q.tsq, 1) DESC, k.id LIMIT {depth})"))
    values = {"name": sql.Literal(name), "dim": sql.Literal(dim),
              "depth": sql.Literal(depth)}
    return sql.SQL(" UNION ").join(part.format(**values) for part in parts)


def _semantic_expr(dim: int, semantic: bool) -> sql.Composable:
    if not semantic:
        return sql.SQL("0::float8")
    return sql.SQL("1 - (d.embedding::vector({dim}) <=> q.emb)").format(
        dim=sql.Literal(dim))


def search_rows(conn: psycopg.Connection, dataset: str, language: str, dim: int, depth: int, *,
                query_text: str, query_embedding: np.ndarray | None, semantic_weight: float,
                keyword_weight: float, k: int) -> list[tuple]:
    """The hybrid search of one query over ``dataset`` (semantic when ``query_embedding`` is
    given; a prepared statement): its top ``k`` ``(id, external_id, score, semantic,
    keyword, content)`` by fused score, ties by id."""
    semantic = query_embedding is not None
    query = sql.SQL("""
        WITH q AS MATERIALIZED (
            SELECT {emb} AS emb, eh_or_tsquery({lang}::regconfig, %(text)s) AS tsq),
        cand AS (
            SELECT d.id, {sem}::float8 AS sem,
                   coalesce(ts_rank(d.tsv, q.tsq, 1), 0)::float8 AS kw
            FROM l2_insights d, q
            WHERE d.id IN ({candidates})),
        stats AS (SELECT min(sem) AS smin, max(sem) AS smax, min(kw) AS kmin, max(kw) AS kmax
                  FROM cand),
        top AS (
            SELECT c.*,
                   %(ws)s::float8 * (CASE WHEN smax = smin THEN 0::float8
                                          ELSE (sem - smin) / (smax - smin) END)
                 + %(wk)s::float8 * (CASE WHEN kmax = kmin THEN 0::float8
                                          ELSE (kw - kmin) / (kmax - kmin) END) AS score
            FROM cand c, stats
            ORDER BY score DESC, id ASC LIMIT %(k)s)
        -- content is fetched for the k results only (it is stored out of line)
        SELECT t.id, d.external_id, t.score, t.sem, t.kw, d.content
        FROM top t JOIN l2_insights d USING (id)
        ORDER BY t.score DESC, t.id ASC""").format(
        emb=(sql.SQL("%(emb)s::vector({dim})").format(dim=sql.Literal(dim))
             if semantic else sql.SQL("NULL::vector")),
        lang=sql.Literal(language),
        sem=_semantic_expr(dim, semantic),
        candidates=_candidates_fragment(dataset, dim, depth, semantic=semantic))
    params = {"text": query_text, "ws": float(semantic_weight), "wk": float(keyword_weight),
              "k": int(k), "emb": query_embedding}
    return conn.execute(query, params, prepare=True).fetchall()


def candidate_rows(conn: psycopg.Connection, dataset: str, language: str, dim: int, depth: int,
                   *, query_ids: list[int] | None) -> list[tuple]:
    """The candidate union of each ground-truth query of ``dataset`` (of ``query_ids``; None:
    all) with both raw scores: ``(query id, doc_ids, semantic, keyword)``, arrays ordered by
    document id, rows by query id."""
    query = sql.SQL("""
        SELECT g.id, c.doc_ids, c.sem, c.kw
        FROM ground_truth g
        CROSS JOIN LATERAL (SELECT g.query_embedding::vector({dim}) AS emb,
                                   eh_or_tsquery({lang}::regconfig, g.query) AS tsq
                            OFFSET 0) q
        CROSS JOIN LATERAL (
            SELECT array_agg(d.id ORDER BY d.id) AS doc_ids,
                   array_agg(({sem})::float8 ORDER BY d.id) AS sem,
                   array_agg(coalesce(ts_rank(d.tsv, q.tsq, 1), 0)::float8 ORDER BY d.id) AS kw
            FROM l2_insights d
            WHERE d.id IN ({candidates})) c
        WHERE g.dataset = {name} AND (%(ids)s::int[] IS NULL OR g.id = ANY(%(ids)s::int[]))
        ORDER BY g.id""").format(
        dim=sql.Literal(dim), lang=sql.Literal(language),
        name=sql.Literal(dataset), sem=_semantic_expr(dim, True),
        candidates=_candidates_fragment(dataset, dim, depth, semantic=True))
    return conn.execute(query, {"ids": query_ids}).fetchall()
