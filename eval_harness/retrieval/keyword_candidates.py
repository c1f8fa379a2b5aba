"""The candidate fetch of a live dataset mapped with ``tsvector: null``, its keyword side
answered from the keyword index (issue #25).

The bulk candidate statement (:func:`eval_harness.retrieval.sql.candidate_statement`) ranks
``ts_rank(to_tsvector(language, content), q, 1)`` over every document the query's OR
matches, parsing each again: at 500,000 documents most of a query's time. Here the keyword
side is computed from what attach derived (:mod:`eval_harness.datasets.keyword_index`) by
:mod:`eval_harness.retrieval.keyword_rank`, exactly the server's values, and the server
does the rest as before: the semantic top ``depth`` through the vector index and the
semantic score of every candidate (:func:`eval_harness.retrieval.sql.union_statement`).
The result is the bulk statement's, row for row. :func:`indexed_search_candidates` does the
same for one query's text (``search``), so every command that ranks takes its keyword side
from the index.
"""

from __future__ import annotations

import numpy as np
import psycopg

from eval_harness.retrieval import sql
from eval_harness.retrieval.keyword_rank import query_items, rank_query
from eval_harness.datasets import keyword_index
from eval_harness.datasets.corpus import Corpus

QUERIES_PER_ROUND = 64  # queries whose postings are held at once (bounds memory)


def indexed_candidate_rows(conn: psycopg.Connection, corpus: Corpus, depth: int, *,
                           query_ids: list[int] | None) -> list[tuple] | None:
    """``(query id, doc_ids, semantic, keyword)`` per ground-truth query, as
    :func:`eval_harness.retrieval.sql.candidate_rows` returns them; None when ``corpus``
    has no current keyword index (then the caller runs the bulk statement)."""
    if not keyword_index.serves(corpus):
        return None
    source = keyword_index.current_source(conn, corpus)
    if source is None:
        return None
    documents = keyword_index.indexed_documents(conn, source)
    queries = sql.query_lexemes(conn, corpus, query_ids)
    rows: list[tuple] = []
    for start in range(0, len(queries), QUERIES_PER_ROUND):
        part = queries[start:start + QUERIES_PER_ROUND]
        items = {qid: query_items(lexemes) for qid, lexemes in part}
        wanted = sorted(set().union(*items.values()))
        found = keyword_index.postings(conn, source, wanted)
        scores = {qid: rank_query(documents, items[qid], found) for qid, _ in part}
        qids = [qid for qid, _ in part]
        for qid, doc_ids, sem in sql.union_rows(conn, corpus, depth, qids,
                                                [scores[q].top(depth) for q in qids]):
            ids = np.asarray(doc_ids or [], dtype=np.int64)
            rows.append((qid, ids.tolist(), list(sem or []), scores[qid].score_of(ids).tolist()))
    return rows


def indexed_search_candidates(conn: psycopg.Connection, corpus: Corpus, depth: int, *,
                              text: str, embedding: np.ndarray | None
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(doc_ids, semantic, keyword)`` of one query's candidate union (ids ascending, the
    semantic score 0 without ``embedding``: a keyword-only search), as the search statement
    (:func:`eval_harness.retrieval.sql.search_statement`) ranks them; None when ``corpus`` has
    no current keyword index."""
    if not keyword_index.serves(corpus):
        return None
    source = keyword_index.current_source(conn, corpus)
    if source is None:
        return None
    items = query_items(sql.text_lexemes(conn, corpus, text))
    scores = rank_query(keyword_index.indexed_documents(conn, source), items,
                        keyword_index.postings(conn, source, items))
    found, semantic = sql.search_union_rows(conn, corpus, depth, embedding,
                                            scores.top(depth).tolist())
    ids = np.asarray(found, dtype=np.int64)
    return ids, np.asarray(semantic, dtype=np.float64), scores.score_of(ids)
