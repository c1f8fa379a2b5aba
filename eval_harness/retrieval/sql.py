"""Every SQL statement of retrieval: the hybrid search itself (one query, and the candidate
scores of many ground-truth queries at once; the query rows from
:func:`eval_harness.datasets.ground_truth.table`). The dataset rows are read through
:mod:`eval_harness.datasets.register`.

Documents are read through a :class:`~eval_harness.datasets.corpus.Corpus` (an ingested copy
or the RAG system's own relation: the same statements). The search statements are the
product's search: the numpy sweep reproduces them exactly and tests compare the two, so a
change here is a change of the ranking (see
:mod:`eval_harness.retrieval.hybrid` for what they compute). Values are composed as literals
or passed as parameters; every statement runs in the caller's transaction.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
from psycopg import sql

from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import Corpus, candidate_ids

# ------------------------------------------------------------------------------ hybrid search

def set_hnsw_ef_search(conn: psycopg.Connection, ef: int) -> None:
    """Set ``hnsw.ef_search`` for the rest of the session."""
    conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))


def _semantic_expr(corpus: Corpus, semantic: bool) -> sql.Composable:
    if not semantic:
        return sql.SQL("0::float8")
    return sql.SQL("1 - ({} <=> q.emb)").format(corpus.embedding_of("d"))


def search_statement(corpus: Corpus, depth: int, *, semantic: bool) -> sql.Composed:
    """The hybrid search statement of one query over ``corpus`` (see :func:`search_rows`),
    composed but not run: its parameters are ``text``, ``ws``, ``wk``, ``k`` and, when
    ``semantic``, ``emb``. tests/retrieval/test_sql_plans.py EXPLAINs it."""
    return sql.SQL("""
        WITH q AS MATERIALIZED (
            SELECT {emb} AS emb, eh_or_tsquery({lang}::regconfig, %(text)s) AS tsq),
        cand AS (
            SELECT {did} AS id, {sem}::float8 AS sem,
                   coalesce(ts_rank({dtsv}, q.tsq, 1), 0)::float8 AS kw
            FROM q CROSS JOIN LATERAL ({candidates}) c
            JOIN {d} ON {did} = c.id),
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
        SELECT t.id, {dext}, t.score, t.sem, t.kw, {dcontent}
        FROM top t JOIN {d} ON {did} = t.id
        ORDER BY t.score DESC, t.id ASC""").format(
        emb=(sql.SQL("%(emb)s::vector({dim})").format(dim=sql.Literal(corpus.dim))
             if semantic else sql.SQL("NULL::vector")),
        lang=sql.Literal(corpus.language),
        sem=_semantic_expr(corpus, semantic),
        did=corpus.id_of("d"), dtsv=corpus.tsvector_of("d"), d=corpus.table("d"),
        dext=corpus.external_id_of("d"), dcontent=corpus.content_of("d"),
        candidates=candidate_ids(corpus, depth, semantic=semantic))


def search_params(*, query_text: str, query_embedding: np.ndarray | None,
                  semantic_weight: float, keyword_weight: float, k: int) -> dict:
    """The parameters of :func:`search_statement` for one query."""
    return {"text": query_text, "ws": float(semantic_weight), "wk": float(keyword_weight),
            "k": int(k), "emb": query_embedding}


def search_rows(conn: psycopg.Connection, corpus: Corpus, depth: int, *,
                query_text: str, query_embedding: np.ndarray | None, semantic_weight: float,
                keyword_weight: float, k: int) -> list[tuple]:
    """The hybrid search of one query over ``corpus`` (semantic when ``query_embedding`` is
    given; a prepared statement): its top ``k`` ``(id, external_id, score, semantic,
    keyword, content)`` by fused score, ties by id."""
    query = search_statement(corpus, depth, semantic=query_embedding is not None)
    params = search_params(query_text=query_text, query_embedding=query_embedding,
                           semantic_weight=semantic_weight, keyword_weight=keyword_weight, k=k)
    return conn.execute(query, params, prepare=True).fetchall()


def candidate_statement(corpus: Corpus, depth: int) -> sql.Composed:
    """The bulk candidate statement of :func:`candidate_rows`, composed but not run; its one
    parameter is ``ids`` (an int list, or None for every query)."""
    return sql.SQL("""
        SELECT g.id, c.doc_ids, c.sem, c.kw
        FROM {gt}
        CROSS JOIN LATERAL (SELECT g.query_embedding::vector({dim}) AS emb,
                                   eh_or_tsquery({lang}::regconfig, g.query) AS tsq
                            OFFSET 0) q
        CROSS JOIN LATERAL (
            SELECT array_agg({did} ORDER BY {did}) AS doc_ids,
                   array_agg(({sem})::float8 ORDER BY {did}) AS sem,
                   array_agg(coalesce(ts_rank({dtsv}, q.tsq, 1), 0)::float8
                             ORDER BY {did}) AS kw
            FROM ({candidates}) cand
            JOIN {d} ON {did} = cand.id) c
        WHERE g.dataset = {name} AND (%(ids)s::int[] IS NULL OR g.id = ANY(%(ids)s::int[]))
        ORDER BY g.id""").format(
        gt=ground_truth.table("g"), dim=sql.Literal(corpus.dim), lang=sql.Literal(corpus.language),
        name=sql.Literal(corpus.dataset), sem=_semantic_expr(corpus, True),
        did=corpus.id_of("d"), dtsv=corpus.tsvector_of("d"), d=corpus.table("d"),
        candidates=candidate_ids(corpus, depth, semantic=True))


def candidate_rows(conn: psycopg.Connection, corpus: Corpus, depth: int,
                   *, query_ids: list[int] | None) -> list[tuple]:
    """The candidate union of each ground-truth query of the corpus's dataset (of
    ``query_ids``; None: all) with both raw scores: ``(query id, doc_ids, semantic,
    keyword)``, arrays ordered by document id, rows by query id."""
    return conn.execute(candidate_statement(corpus, depth), {"ids": query_ids}).fetchall()


# ------------------------------------------------------------------------------ keyword index

def query_lexemes(conn: psycopg.Connection, corpus: Corpus,
                  query_ids: list[int] | None) -> list[tuple[int, list[str]]]:
    """Each ground-truth query's lexemes under the dataset's language (those
    ``eh_or_tsquery`` ORs), by query id."""
    return [(qid, list(lexemes or [])) for qid, lexemes in conn.execute(sql.SQL("""
        SELECT g.id, tsvector_to_array(to_tsvector({lang}::regconfig, g.query))
        FROM {gt} WHERE g.dataset = {name}
          AND (%(ids)s::int[] IS NULL OR g.id = ANY(%(ids)s::int[]))
        ORDER BY g.id""").format(gt=ground_truth.table("g"), lang=sql.Literal(corpus.language),
                                  name=sql.Literal(corpus.dataset)), {"ids": query_ids})]


def text_lexemes(conn: psycopg.Connection, corpus: Corpus, text: str) -> list[str]:
    """The lexemes of one query ``text`` under the dataset's language (those
    ``eh_or_tsquery`` ORs), as :func:`query_lexemes` gives a ground-truth query's."""
    row = conn.execute(sql.SQL("SELECT tsvector_to_array(to_tsvector({}::regconfig, %s))"
                               ).format(sql.Literal(corpus.language)), (text,)).fetchone()
    return list(row[0] or [])


def search_union_statement(corpus: Corpus, depth: int, *, semantic: bool) -> sql.Composed:
    """One query's candidate union with the keyword side given, as :func:`union_statement`
    makes it for ground-truth queries: the keyword ids ``kw`` (a bigint array) and, when
    ``semantic``, the semantic top ``depth`` of ``emb``, each with its semantic score (0
    without ``semantic``), ids ascending."""
    semantic_top = (sql.SQL("{} UNION ").format(
        candidate_ids(corpus, depth, semantic=True, keyword=False))
        if semantic else sql.SQL(""))
    return sql.SQL("""
        SELECT array_agg({did} ORDER BY {did}), array_agg(({sem})::float8 ORDER BY {did})
        FROM (SELECT {emb} AS emb) q
        CROSS JOIN LATERAL ({semantic_top}SELECT unnest(%(kw)s::bigint[]) AS id) cand
        JOIN {d} ON {did} = cand.id""").format(
        emb=(sql.SQL("%(emb)s::vector({})").format(sql.Literal(corpus.dim)) if semantic
             else sql.SQL("NULL::vector")),
        sem=_semantic_expr(corpus, semantic), did=corpus.id_of("d"), d=corpus.table("d"),
        semantic_top=semantic_top)


def search_union_rows(conn: psycopg.Connection, corpus: Corpus, depth: int,
                      embedding: np.ndarray | None, keyword_ids: list[int]
                      ) -> tuple[list, list]:
    """``(doc_ids, semantic)`` of :func:`search_union_statement` (semantic when
    ``embedding`` is given; empty lists: no candidate)."""
    params = {"kw": [int(i) for i in keyword_ids]}
    if embedding is not None:
        params["emb"] = embedding
    statement = search_union_statement(corpus, depth, semantic=embedding is not None)
    doc_ids, semantic = conn.execute(statement, params).fetchone()
    return list(doc_ids or []), list(semantic or [])


def union_statement(corpus: Corpus, depth: int, *, vectors_once: str | None = None
                    ) -> sql.Composed:
    """The candidate union of :func:`candidate_statement` with the keyword side given: per
    query (``qids``), the semantic top ``depth`` and the keyword ids in ``kw`` (int array
    literals), each with its semantic score; by query id.

    ``vectors_once`` (``"subvector"`` or ``"array"``: how a vector is copied out of TOAST):
    the semantic top read from a materialized copy of the corpus's ids and vectors, made
    once per statement by one sequential scan, instead of from the relation once per query.
    The same exact scan with the same sort (distance, then id), so the same rows, ties
    included; only for when the planner sorts the whole relation anyway (see
    :func:`union_rows`)."""
    if vectors_once is None:
        candidates = candidate_ids(corpus, depth, semantic=True, keyword=False)
        vectors = sql.SQL("")
    else:
        candidates = sql.SQL("(SELECT v.id FROM eh_vectors AS v ORDER BY v.emb <=> q.emb{} "
                             "LIMIT {})").format(
            sql.SQL(", v.tie") if corpus.semantic_ties_by_id else sql.SQL(""),
            sql.Literal(depth))
        emb = corpus.embedding_of("s")
        copy = (sql.SQL("subvector({}, 1, {})") if vectors_once == "subvector"
                else sql.SQL("({})::real[]::vector({})")).format(emb, sql.Literal(corpus.dim))
        vectors = sql.SQL("WITH eh_vectors AS MATERIALIZED (SELECT {sid} AS id, {tie} AS tie, "
                          "{copy} AS emb FROM {s} WHERE {rows} AND {col} IS NOT NULL)").format(
            sid=corpus.id_of("s"), tie=corpus.joined_order_id_of("s"), copy=copy,
            s=corpus.table("s"),
            rows=corpus.rows_of_dataset("s"), col=corpus.embedding_column("s"))
    return sql.SQL("""{vectors}
        SELECT g.id, c.doc_ids, c.sem
        FROM unnest(%(qids)s::int[], %(kw)s::text[]) AS p(qid, kw)
        JOIN {gt} ON g.id = p.qid
        CROSS JOIN LATERAL (SELECT g.query_embedding::vector({dim}) AS emb OFFSET 0) q
        CROSS JOIN LATERAL (
            SELECT array_agg({did} ORDER BY {did}) AS doc_ids,
                   array_agg(({sem})::float8 ORDER BY {did}) AS sem
            FROM ({candidates} UNION SELECT unnest(p.kw::bigint[]) AS id) cand
            JOIN {d} ON {did} = cand.id) c
        ORDER BY g.id""").format(
        vectors=vectors, gt=ground_truth.table("g"), dim=sql.Literal(corpus.dim),
        sem=_semantic_expr(corpus, True), did=corpus.id_of("d"), d=corpus.table("d"),
        candidates=candidates)


def union_rows(conn: psycopg.Connection, corpus: Corpus, depth: int, query_ids: list[int],
               keyword_ids: list[list[int]]) -> list[tuple]:
    """``(query id, doc_ids, semantic)`` of each query's candidate union (ids ascending).

    When the planner would find each query's semantic top by a sequential scan and a sort
    (a small relation, or no vector index: an exact search), every query would read every
    vector again from TOAST (issue #25: about 4.5 of 5.4 ms per query on NFCorpus's 3,633
    rows, benchmarks/RESULTS.md); the statement then reads them once (``vectors_once``),
    with enough ``work_mem`` to hold them and the scan kept sequential from the first
    block, for this statement only. When the planner uses the vector index, the statement
    is run as it is."""
    literals = ["{" + ",".join(str(int(i)) for i in ids) + "}" for ids in keyword_ids]
    params = {"qids": list(query_ids), "kw": literals}
    rows_sorted = semantic_scan_rows(conn, corpus, depth, params)
    if rows_sorted is None:
        return conn.execute(union_statement(corpus, depth), params).fetchall()
    has_subvector, work_mem_kb = conn.execute(
        "SELECT to_regprocedure('subvector(vector, integer, integer)') IS NOT NULL, "
        "setting::bigint FROM pg_settings WHERE name = 'work_mem'").fetchone()
    held_kb = int(rows_sorted * (4 * corpus.dim + 64) * 1.25) // 1024 + 1
    local = {"work_mem": f"{max(work_mem_kb, min(held_kb, _VECTORS_WORK_MEM_CAP_KB))}kB",
             "max_parallel_workers_per_gather": "0", "synchronize_seqscans": "off"}
    statement = union_statement(corpus, depth,
                                vectors_once="subvector" if has_subvector else "array")
    with conn.transaction():
        before = _set_local(conn, local)
        rows = conn.execute(statement, params).fetchall()
        _set_local(conn, before)  # a caller's own transaction goes on as it was
    return rows


# work_mem granted to hold the corpus's vectors once (a bigger corpus spills to a temporary
# file: still one read of each vector per statement)
_VECTORS_WORK_MEM_CAP_KB = 128 * 1024


def _set_local(conn: psycopg.Connection, values: dict[str, str]) -> dict[str, str]:
    """Set ``values`` for the rest of the transaction; returns the settings they replaced."""
    before = {name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
              for name in values}
    for name, value in values.items():
        conn.execute("SELECT set_config(%s, %s, true)", (name, value))
    return before


def semantic_scan_rows(conn: psycopg.Connection, corpus: Corpus, depth: int,
                        params: dict) -> float | None:
    """The rows the planner expects a query's semantic top to sort when it would run
    :func:`union_statement` as a sequential scan of the corpus and a sort; None when a vector
    index orders it (an approximate search: read as it is) or the plan is something else."""
    plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + union_statement(corpus, depth),
                        params).fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    scans, stack = [], [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", ()))
        alias = node.get("Alias", "")
        if node.get("Relation Name") == corpus.relation[-1] and (
                alias == "s" or alias.startswith("s_")):
            scans.append(node)
    if len(scans) != 1 or scans[0]["Node Type"] != "Seq Scan":
        return None
    return float(scans[0].get("Plan Rows", 0))
