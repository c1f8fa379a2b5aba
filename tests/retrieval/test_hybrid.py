"""Hybrid search against a brute-force numpy computation, bulk candidates, and metrics vs ranx."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from ranx import Qrels, Run, evaluate

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.retrieval.fusion import fuse_scores, rank_candidates
from eval_harness.retrieval.hybrid import (
    UnknownDataset,
    candidate_scores,
    dataset_info,
    hybrid_search,
)
from eval_harness.retrieval.report import fused_runs, load_qrels, retrieval_report

VOCAB = ("protein cell gene cancer therapy risk heart brain blood study trial dose "
         "mouse human virus vaccine immune response tumor growth signal pathway drug "
         "effect patient model receptor insulin glucose liver").split()


@pytest.fixture(scope="module")
def corpus(store, tmp_path_factory):
    """80 random documents over a small vocabulary, 12 queries, random 16-d embeddings."""
    rng = np.random.default_rng(7)
    docs = {f"doc{i}": " ".join(rng.choice(VOCAB, size=rng.integers(4, 15)))
            for i in range(80)}
    queries = {f"q{i}": " ".join(rng.choice(VOCAB, size=3, replace=False)) for i in range(12)}
    qrels = [(q, f"doc{j}", int(rng.integers(1, 3)))
             for q in queries for j in rng.choice(80, size=rng.integers(1, 6), replace=False)]
    doc_vectors = rng.normal(size=(80, 16)).astype(np.float32)
    query_vectors = rng.normal(size=(12, 16)).astype(np.float32)
    name = f"r{uuid.uuid4().hex[:8]}"
    folder = write_beir(tmp_path_factory.mktemp("retrieval") / "ds", docs, queries, qrels,
                        doc_vectors=doc_vectors, query_vectors=query_vectors)
    with store.connection() as conn:
        ingest_beir(conn, folder, name=name)
        ids = dict(conn.execute("SELECT external_id, id FROM l2_insights WHERE dataset = %s",
                                (name,)).fetchall())
        qids = dict(conn.execute("SELECT external_id, id FROM ground_truth WHERE dataset = %s",
                                 (name,)).fetchall())
    return {"name": name, "docs": docs, "queries": queries, "ids": ids, "qids": qids,
            "doc_vectors": dict(zip(docs, doc_vectors)),
            "query_vectors": dict(zip(queries, query_vectors))}


def brute_force(conn, corpus, query_key: str, weight: float, depth: int, k: int):
    """Independent computation: cosine in numpy, ts_rank per document, fusion by hand."""
    name, text = corpus["name"], corpus["queries"][query_key]
    ext = list(corpus["docs"])
    ids = np.array([corpus["ids"][e] for e in ext])
    vectors = np.array([corpus["doc_vectors"][e] for e in ext], dtype=np.float64)
    q = corpus["query_vectors"][query_key].astype(np.float64)
    cosine = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    rank = dict(conn.execute("SELECT id, ts_rank(tsv, eh_or_tsquery('english', %s), 1) FROM "
                             "l2_insights WHERE dataset = %s "
                             "AND tsv @@ eh_or_tsquery('english', %s)",
                             (text, name, text)).fetchall())
    keyword = np.array([rank.get(i, 0.0) for i in ids], dtype=np.float64)
    by_cosine = ids[np.argsort(-cosine, kind="stable")][:depth]
    matching = [i for i in ids if i in rank]
    by_keyword = sorted(matching, key=lambda i: (-rank[i], i))[:depth]
    union = sorted(set(by_cosine) | set(by_keyword))
    pos = {i: n for n, i in enumerate(ids)}
    sem = np.array([cosine[pos[i]] for i in union])
    kw = np.array([keyword[pos[i]] for i in union])

    def norm(x):
        span = x.max() - x.min()
        return np.zeros_like(x) if span == 0 else (x - x.min()) / span

    fused = weight * norm(sem) + (1 - weight) * norm(kw)
    order = sorted(range(len(union)), key=lambda n: (-fused[n], union[n]))[:k]
    return [int(union[n]) for n in order], [float(fused[n]) for n in order]


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("depth", [10, 200])
def test_hybrid_search_equals_brute_force(conn, corpus, weight, depth):
    for key in corpus["queries"]:
        hits = hybrid_search(conn, corpus["name"], query_text=corpus["queries"][key],
                             query_embedding=corpus["query_vectors"][key], k=10,
                             semantic_weight=weight, candidate_depth=depth)
        expected_ids, expected_scores = brute_force(conn, corpus, key, weight, depth, 10)
        assert [h.id for h in hits] == expected_ids, key
        np.testing.assert_allclose([h.score for h in hits], expected_scores, atol=1e-6)


def test_scores_are_sorted_and_ties_broken_by_id(conn, corpus):
    # weight 0 on a 3-word query: many documents share a keyword rank, so ties are common
    for text in corpus["queries"].values():
        hits = hybrid_search(conn, corpus["name"], query_text=text, query_embedding=None,
                             k=30, semantic_weight=0.0, candidate_depth=200)
        pairs = [(-h.score, h.id) for h in hits]
        assert pairs == sorted(pairs)


def test_bulk_candidates_reproduce_sql_search_at_every_weight(conn, corpus):
    candidates = {c.query_id: c for c in candidate_scores(conn, corpus["name"],
                                                          candidate_depth=10)}
    assert set(candidates) == set(corpus["qids"].values())
    for key, qid in corpus["qids"].items():
        c = candidates[qid]
        assert list(c.doc_ids) == sorted(c.doc_ids)
        for weight in np.round(np.arange(0.0, 1.0001, 0.1), 10):
            ranked = rank_candidates(c.doc_ids, fuse_scores(c.semantic, c.keyword, weight))[:10]
            hits = hybrid_search(conn, corpus["name"], query_text=corpus["queries"][key],
                                 query_embedding=corpus["query_vectors"][key], k=10,
                                 semantic_weight=weight, keyword_weight=1.0 - weight,
                                 candidate_depth=10)
            assert ranked.tolist() == [h.id for h in hits], (key, weight)


def test_weight_one_is_the_semantic_ranking(conn, corpus):
    for c in candidate_scores(conn, corpus["name"], candidate_depth=200):
        ranked = rank_candidates(c.doc_ids, fuse_scores(c.semantic, c.keyword, 1.0))
        by_semantic = c.doc_ids[np.lexsort((c.doc_ids, -c.semantic))]
        assert ranked.tolist() == by_semantic.tolist()


@pytest.mark.slow
def test_report_metrics_equal_ranx(conn, corpus):
    report = retrieval_report(conn, corpus["name"], semantic_weight=0.7, keyword_weight=0.3,
                              candidate_depth=10)
    qrels = load_qrels(conn, corpus["name"])
    runs = fused_runs(candidate_scores(conn, corpus["name"], candidate_depth=10), 0.7, 0.3)
    ranx_qrels = Qrels({str(q): {str(d): g for d, g in docs.items()} for q, docs in qrels.items()})
    # strictly decreasing scores in our order, so ranx cannot re-break ties differently
    ranx_run = Run({str(q): {str(d): float(len(ids) - i) for i, d in enumerate(ids)}
                    for q, ids in runs.items()})
    reference = evaluate(ranx_qrels, ranx_run, ["precision@5", "recall@5", "ndcg@10", "mrr@10"])
    assert report.queries == 12
    assert report.metrics["p_at_5"] == pytest.approx(reference["precision@5"], abs=1e-9)
    assert report.metrics["recall_at_5"] == pytest.approx(reference["recall@5"], abs=1e-9)
    assert report.metrics["ndcg_at_10"] == pytest.approx(reference["ndcg@10"], abs=1e-9)
    assert report.metrics["mrr_at_10"] == pytest.approx(reference["mrr@10"], abs=1e-9)


def test_unknown_dataset_says_how_to_ingest(conn):
    with pytest.raises(UnknownDataset, match=r"run `eval-harness ingest PATH --name nope`"):
        dataset_info(conn, "nope")


def test_query_embedding_of_wrong_width_is_refused(conn, corpus):
    with pytest.raises(ValueError, match="has 3 dimensions"):
        hybrid_search(conn, corpus["name"], query_text="x", query_embedding=np.ones(3))


def test_an_unknown_dataset_names_at_most_eight_known_ones(fresh, tmp_path):
    # A store of twelve datasets: the sentence names eight and says how many more, so a
    # store of hundreds (a shared test server, a team's history) never turns it into a page.
    folder = write_beir(tmp_path / "ds", {"d1": "heart attack", "d2": "brain"},
                        {"q1": "heart"}, [("q1", "d1", 1)])
    names = [f"known{i:02d}" for i in range(12)]
    with fresh.connection() as conn:
        for name in names:
            ingest_beir(conn, folder, name=name)
        with pytest.raises(UnknownDataset) as caught:
            dataset_info(conn, "nope")
    message = str(caught.value)
    assert "known: " + ", ".join(f"'{n}'" for n in names[:8]) + " and 4 more);" in message
    assert "known08" not in message and message.count("\n") == 0
