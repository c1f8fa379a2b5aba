"""The keyword index serves ``search`` as it serves the bulk fetch: on a live
store mapped with ``tsvector: null``, :func:`hybrid_search` ranks one query's text from the
index and fuses in numpy, and returns the search statement's rows (which parse every matching
document again) exactly: ids, order, scores to the last bit, contents."""

from __future__ import annotations

import numpy as np

from eval_harness.retrieval import hybrid, sql
from eval_harness.retrieval.hybrid import dataset_info, hybrid_search
from live_store import WORDS


def statement_rows(conn, text, embedding, ws, k, depth):
    """What the search statement itself returns (the keyword side parsed by the server)."""
    sql.set_hnsw_ef_search(conn, hybrid.ef_search_for(depth))
    return [tuple(row) for row in sql.search_rows(
        conn, dataset_info(conn, "live").corpus, depth, query_text=text,
        query_embedding=embedding, semantic_weight=ws, keyword_weight=1 - ws, k=k)]


def test_search_from_the_keyword_index_is_the_search_statement(live, monkeypatch):
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=n)) for n in (1, 2, 3, 4, 6)] + ["zzz qqq"]
    # semantic and keyword-only searches (weight 0: no embedding), shallow and deep
    cases = [(text, ws, depth, None if ws == 0 else rng.normal(size=8))
             for text in texts for ws, depth in ((0.7, 5), (0.3, 12), (0.0, 8))]
    expected = [statement_rows(live, text, vector, ws, 10, depth)
                for text, ws, depth, vector in cases]
    assert sum(any(row[4] > 0 for row in rows) for rows in expected) >= 10  # keyword matches
    assert expected[-1] == []  # a keyword-only search for words no document has

    def parsed(*args, **kwargs):
        raise AssertionError("search parsed the documents: the keyword index did not serve it")

    monkeypatch.setattr(sql, "search_rows", parsed)
    for (text, ws, depth, vector), rows in zip(cases, expected):
        hits = hybrid_search(live, "live", query_text=text, query_embedding=vector, k=10,
                             semantic_weight=ws, keyword_weight=1 - ws, candidate_depth=depth)
        assert [(h.id, h.external_id, h.score, h.semantic, h.keyword, h.content)
                for h in hits] == rows, (text, ws, depth)
