"""Ranking metrics: hand-worked values, degenerate cases, and ranx / trec_eval on random runs."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_harness.metrics.ranking import (
    mean_metrics,
    ndcg_at_k,
    p_at_k_ceiling,
    precision_at_k,
    recall_at_k,
    reciprocal_rank_at_k,
)

QRELS = {"a": 2, "b": 0, "c": 1, "d": 1}  # relevant: a (grade 2), c, d; b judged not relevant


@pytest.mark.unit
def test_hand_worked_values():
    ranking = ["b", "a", "x", "c"]
    # top 5 holds a and c: 2 hits / 5 (denominator is k although only 4 were retrieved)
    assert precision_at_k(ranking, QRELS, k=5) == pytest.approx(0.4)
    assert recall_at_k(ranking, QRELS, k=5) == pytest.approx(2 / 3)
    # first relevant document (a) sits at rank 2
    assert reciprocal_rank_at_k(ranking, QRELS, k=10) == 0.5
    assert reciprocal_rank_at_k(ranking, QRELS, k=1) == 0.0
    # DCG  = 2/log2(3) + 1/log2(5) = 1.261860 + 0.430677 = 1.692537; nDCG = 0.540586
    # IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5 = 3.130930
    expected = (2 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3) + 0.5)
    assert ndcg_at_k(ranking, QRELS, k=10) == pytest.approx(expected, abs=1e-15)
    assert ndcg_at_k(ranking, QRELS, k=10) == pytest.approx(0.540586, abs=1e-6)


@pytest.mark.unit
def test_perfect_ranking_scores_one():
    ranking = ["a", "c", "d"]
    assert ndcg_at_k(ranking, QRELS, k=10) == pytest.approx(1.0)
    assert recall_at_k(ranking, QRELS, k=5) == 1.0
    assert precision_at_k(ranking, QRELS, k=3) == 1.0
    assert precision_at_k(ranking, QRELS, k=5) == pytest.approx(0.6) == p_at_k_ceiling(QRELS, k=5)


@pytest.mark.unit
def test_degenerate_inputs():
    no_relevant = {"a": 0, "b": 0}
    for metric in (precision_at_k, recall_at_k, ndcg_at_k, reciprocal_rank_at_k):
        assert metric([], QRELS, k=5) == 0.0  # nothing retrieved
        assert metric(["a", "b"], no_relevant, k=5) == 0.0  # nothing to find: 0, not NaN
        assert metric(["a"], {}, k=5) == 0.0
        with pytest.raises(ValueError, match="k must be >= 1"):
            metric(["a"], QRELS, k=0)
        with pytest.raises(ValueError, match="twice|repeat"):
            metric(["a", "a"], QRELS, k=5)
    assert p_at_k_ceiling(no_relevant, k=5) == 0.0
    assert p_at_k_ceiling({str(i): 1 for i in range(9)}, k=5) == 1.0
    assert p_at_k_ceiling({"a": 1, "b": 3}, k=5) == pytest.approx(0.4)
    # a duplicate below the cut-off does not matter
    assert precision_at_k(["a", "c", "a"], QRELS, k=2) == 1.0


@pytest.mark.unit
def test_mean_metrics_averages_over_qrels_queries():
    qrels = {"q1": QRELS, "q2": {"z": 1}}
    means = mean_metrics({"q1": ["a", "c", "d"]}, qrels)  # q2 retrieved nothing: scores 0
    assert means == pytest.approx({"p_at_5": 0.3, "recall_at_5": 0.5, "ndcg_at_10": 0.5,
                                   "mrr_at_10": 0.5})
    with pytest.raises(ValueError, match="missing from the qrels"):
        mean_metrics({"q9": ["a"]}, qrels)
    with pytest.raises(ValueError, match="empty"):
        mean_metrics({}, {})


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(ranking=st.lists(st.integers(0, 30), unique=True, max_size=15),
       qrels=st.dictionaries(st.integers(0, 30), st.integers(0, 3), max_size=12),
       k=st.integers(1, 12))
def test_metrics_are_bounded_and_below_the_ceiling(ranking, qrels, k):
    p = precision_at_k(ranking, qrels, k=k)
    assert 0.0 <= p <= p_at_k_ceiling(qrels, k=k) + 1e-15
    for metric in (recall_at_k, ndcg_at_k, reciprocal_rank_at_k):
        assert 0.0 <= metric(ranking, qrels, k=k) <= 1.0 + 1e-12


# ------------------------------------------------------------ independent implementations
def _random_queries(n_queries: int, seed: int) -> tuple[dict, dict, dict]:
    """Rankings (our tie-broken order), qrels, and reference runs with strictly decreasing
    scores in that order, so ranx and trec_eval cannot break ties differently from us."""
    rng = np.random.default_rng(seed)
    rankings, qrels, reference_runs = {}, {}, {}
    for q in range(n_queries):
        n_retrieved = int(rng.choice([1, 2, 3, 4, 5, 7, 10, 15, 30]))  # many shorter than 5
        docs = rng.choice(60, n_retrieved, replace=False)
        scores = rng.integers(0, 4, n_retrieved)  # quantised: plenty of ties
        order = np.lexsort((docs, -scores))  # score descending, id ascending
        ranking = [f"d{docs[i]}" for i in order]
        judged = rng.choice(60, int(rng.integers(1, 15)), replace=False)
        grades = rng.integers(0, 4, judged.size)  # includes queries with only grade-0 docs
        qid = f"q{q}"
        rankings[qid] = ranking
        qrels[qid] = {f"d{d}": int(g) for d, g in zip(judged, grades)}
        reference_runs[qid] = {doc: float(len(ranking) - i) for i, doc in enumerate(ranking[:10])}
    return rankings, qrels, reference_runs


def _ours(rankings: dict, qrels: dict) -> dict[str, np.ndarray]:
    qids = list(rankings)
    return {
        "p5": np.array([precision_at_k(rankings[q], qrels[q], k=5) for q in qids]),
        "r5": np.array([recall_at_k(rankings[q], qrels[q], k=5) for q in qids]),
        "ndcg10": np.array([ndcg_at_k(rankings[q], qrels[q], k=10) for q in qids]),
        "rr10": np.array([reciprocal_rank_at_k(rankings[q], qrels[q], k=10) for q in qids]),
    }


def test_equal_to_ranx_on_random_runs():
    ranx = pytest.importorskip("ranx")
    rankings, qrels, runs = _random_queries(3000, seed=7)
    ours = _ours(rankings, qrels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba cast warnings inside ranx
        theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(runs),
                               ["precision@5", "recall@5", "ndcg@10", "mrr@10"],
                               return_mean=False)
    # ranx sorts query ids; ours are in insertion order
    position = {q: i for i, q in enumerate(sorted(rankings))}
    index = [position[q] for q in rankings]
    for ours_name, ranx_name in (("p5", "precision@5"), ("r5", "recall@5"),
                                 ("ndcg10", "ndcg@10"), ("rr10", "mrr@10")):
        np.testing.assert_allclose(ours[ours_name], theirs[ranx_name][index], rtol=0, atol=1e-9)
    ranx_means = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(runs),
                               ["precision@5", "recall@5", "ndcg@10", "mrr@10"])
    means = mean_metrics(rankings, qrels)
    assert means["p_at_5"] == pytest.approx(ranx_means["precision@5"], abs=1e-9)
    assert means["ndcg_at_10"] == pytest.approx(ranx_means["ndcg@10"], abs=1e-9)


@pytest.mark.unit
def test_equal_to_trec_eval_on_random_runs():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rankings, qrels, runs = _random_queries(3000, seed=11)
    ours = _ours(rankings, qrels)
    # runs hold the top 10 only, so trec_eval's uncut recip_rank is RR@10
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"P_5", "recall_5", "ndcg_cut_10",
                                                       "recip_rank"})
    theirs = evaluator.evaluate(runs)
    qids = list(rankings)
    for ours_name, trec_name in (("p5", "P_5"), ("r5", "recall_5"), ("ndcg10", "ndcg_cut_10"),
                                 ("rr10", "recip_rank")):
        reference = np.array([theirs[q][trec_name] for q in qids])
        np.testing.assert_allclose(ours[ours_name], reference, rtol=0, atol=1e-9)
