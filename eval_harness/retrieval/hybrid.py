"""Hybrid search over ``l2_insights``: pgvector cosine similarity + Postgres full-text rank.

Candidates for a query are the union of
  * the ``candidate_depth`` nearest documents by cosine distance (the dataset's partial HNSW
    index on ``embedding::vector(dim)``; ``hnsw.ef_search`` is raised to at least the depth),
  * the ``candidate_depth`` best documents by ``ts_rank(tsv, q, 1)`` (rank divided by
    1 + log(document length)) where ``q`` is the OR of the query's lexemes
    (:sql:`eh_or_tsquery`) under the dataset's text-search language.
Every candidate gets both raw scores: semantic = 1 - cosine distance, keyword = ts_rank (0 when
no term matches). Fusion and tie-breaking are defined in :mod:`eval_harness.retrieval.fusion`;
:func:`hybrid_search` evaluates that rule in SQL, :func:`candidate_scores` returns the raw
candidate scores of many ground-truth queries at once so calibration can sweep weights in numpy.
An empty document (no text: NULL embedding, empty tsvector) is on neither list, so it is never
a candidate; a document with a title and no text is an ordinary one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql

MAX_CANDIDATE_DEPTH = 1000  # pgvector caps hnsw.ef_search at 1000


class UnknownDataset(LookupError):
    pass


def as_vector(value) -> np.ndarray:
    """A pgvector value (``Vector``, list or array) as a float32 numpy array."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    language: str
    embedding_model: str
    embedding_dim: int
    documents: int
    queries: int


@dataclass(frozen=True)
class SearchHit:
    id: int
    external_id: str
    score: float
    semantic: float
    keyword: float
    content: str


@dataclass(frozen=True)
class QueryCandidates:
    """Raw scores of one ground-truth query's candidate union, ordered by document id."""
    query_id: int
    doc_ids: np.ndarray   # int64
    semantic: np.ndarray  # float64, cosine similarity
    keyword: np.ndarray   # float64, ts_rank (0 = no term matched)


def dataset_info(conn: psycopg.Connection, name: str, *, with_counts: bool = True) -> DatasetInfo:
    """The dataset's language and embedding model; document/query counts unless told not to."""
    counts = ("""(SELECT count(*) FROM l2_insights i WHERE i.dataset = d.name),
                 (SELECT count(*) FROM ground_truth g WHERE g.dataset = d.name)"""
              if with_counts else "-1, -1")
    row = conn.execute(f"""
        SELECT d.name, d.language::text, d.embedding_model, d.embedding_dim, {counts}
        FROM datasets d WHERE d.name = %s""", (name,)).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute("SELECT name FROM datasets ORDER BY name")]
        raise UnknownDataset(
            f"Dataset '{name}' is not in the store (ingested: {', '.join(known) or 'none'}); "
            f"run `eval-harness ingest PATH --name {name}` first.")
    return DatasetInfo(*row)


def _check_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_CANDIDATE_DEPTH:
        raise ValueError(f"candidate_depth must be between 1 and {MAX_CANDIDATE_DEPTH}, got {depth}")


def _set_ef_search(conn: psycopg.Connection, depth: int) -> None:
    # ef_search bounds how many neighbours an HNSW scan can return; twice the depth keeps
    # the approximate top-`depth` close to exact at little cost.
    ef = min(MAX_CANDIDATE_DEPTH, max(100, 2 * depth))
    conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))


def _candidates_fragment(info: DatasetInfo, depth: int, *, semantic: bool) -> sql.Composed:
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
    values = {"name": sql.Literal(info.name), "dim": sql.Literal(info.embedding_dim),
              "depth": sql.Literal(depth)}
    return sql.SQL(" UNION ").join(part.format(**values) for part in parts)


def _semantic_expr(info: DatasetInfo, semantic: bool) -> sql.Composable:
    if not semantic:
        return sql.SQL("0::float8")
    return sql.SQL("1 - (d.embedding::vector({dim}) <=> q.emb)").format(
        dim=sql.Literal(info.embedding_dim))


def hybrid_search(conn: psycopg.Connection, dataset: str, *, query_text: str,
                  query_embedding: np.ndarray | None, k: int = 5,
                  semantic_weight: float = 0.7, keyword_weight: float | None = None,
                  candidate_depth: int = 50) -> list[SearchHit]:
    """Top ``k`` documents by fused score (see module docstring), ties by id ascending.

    ``query_embedding`` may be None only with ``semantic_weight == 0``: keyword-only search.
    """
    _check_depth(candidate_depth)
    if keyword_weight is None:
        keyword_weight = 1.0 - semantic_weight
    info = dataset_info(conn, dataset, with_counts=False)
    semantic = query_embedding is not None
    if semantic:
        query_embedding = as_vector(query_embedding)
    if not semantic and semantic_weight != 0:
        raise ValueError("A query embedding is needed unless semantic_weight is 0.")
    if semantic and len(query_embedding) != info.embedding_dim:
        raise ValueError(f"The query embedding has {len(query_embedding)} dimensions; dataset "
                         f"'{dataset}' uses {info.embedding_dim} ({info.embedding_model}).")
    _set_ef_search(conn, candidate_depth)
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
        emb=(sql.SQL("%(emb)s::vector({dim})").format(dim=sql.Literal(info.embedding_dim))
             if semantic else sql.SQL("NULL::vector")),
        lang=sql.Literal(info.language),
        sem=_semantic_expr(info, semantic),
        candidates=_candidates_fragment(info, candidate_depth, semantic=semantic))
    params = {"text": query_text, "ws": float(semantic_weight), "wk": float(keyword_weight),
              "k": int(k), "emb": query_embedding}
    rows = conn.execute(query, params, prepare=True).fetchall()
    return [SearchHit(int(r[0]), r[1], float(r[2]), float(r[3]), float(r[4]), r[5]) for r in rows]


def candidate_scores(conn: psycopg.Connection, dataset: str, *,
                     query_ids: list[int] | None = None,
                     candidate_depth: int = 50) -> list[QueryCandidates]:
    """Candidate unions with both raw scores for many ground-truth queries in one statement."""
    _check_depth(candidate_depth)
    info = dataset_info(conn, dataset, with_counts=False)
    _set_ef_search(conn, candidate_depth)
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
        dim=sql.Literal(info.embedding_dim), lang=sql.Literal(info.language),
        name=sql.Literal(info.name), sem=_semantic_expr(info, True),
        candidates=_candidates_fragment(info, candidate_depth, semantic=True))
    result = []
    for query_id, doc_ids, sem, kw in conn.execute(query, {"ids": query_ids}):
        result.append(QueryCandidates(
            int(query_id), np.asarray(doc_ids or [], dtype=np.int64),
            np.asarray(sem or [], dtype=np.float64), np.asarray(kw or [], dtype=np.float64)))
    return result
