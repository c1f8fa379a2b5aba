"""Weight sweep: bit-equal to fusion.py's ranking, equal to ranking.py's metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_harness.metrics import ranking
from eval_harness.metrics.calibration import weight_grid
from eval_harness.retrieval.fusion import fuse_scores, rank_candidates
from eval_harness.retrieval.sweep import (
    CandidateSet,
    rank_top_k,
    reciprocal_rank_fusion,
    sweep_weights,
)
from sweep_candidates import random_queries


def reference_sweep(ids, semantic, keyword, relevance, weights):
    """fusion.py's rank_candidates plus ranking.py's metrics, one query at a time."""
    rows = {"p5": [], "r5": [], "ndcg10": [], "rr10": [], "top10": []}
    for w in weights:
        ranked = [rank_candidates(i, fuse_scores(s, k, w))
                  for i, s, k in zip(ids, semantic, keyword)]
        rows["top10"].append([r[:10] for r in ranked])
        rows["p5"].append([ranking.precision_at_k(r, rel, k=5)
                           for r, rel in zip(ranked, relevance)])
        rows["r5"].append([ranking.recall_at_k(r, rel, k=5) for r, rel in zip(ranked, relevance)])
        rows["ndcg10"].append([ranking.ndcg_at_k(r, rel, k=10)
                               for r, rel in zip(ranked, relevance)])
        rows["rr10"].append([ranking.reciprocal_rank_at_k(r, rel, k=10)
                             for r, rel in zip(ranked, relevance)])
    return rows


def test_sweep_equals_rank_candidates_and_ranking_metrics():
    rng = np.random.default_rng(2025)
    ids, semantic, keyword, relevance = random_queries(rng, 250)
    weights = np.concatenate([weight_grid(start=0.0, stop=1.0, step=0.05), [0.33, 0.71]])
    candidates = CandidateSet.from_queries(ids, semantic, keyword, relevance)
    result = sweep_weights(candidates, weights)
    reference = reference_sweep(ids, semantic, keyword, relevance, weights)
    for i, w in enumerate(weights):
        ours = rank_top_k(candidates, w)
        for q in range(len(ids)):
            np.testing.assert_array_equal(ours[q], reference["top10"][i][q], err_msg=f"w={w} q={q}")
    np.testing.assert_array_equal(result.per_query_p_at_5, np.array(reference["p5"]))
    np.testing.assert_allclose(result.p_at_5, np.mean(reference["p5"], axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.recall_at_5, np.mean(reference["r5"], axis=1), atol=1e-12)
    np.testing.assert_allclose(result.ndcg_at_10, np.mean(reference["ndcg10"], axis=1), atol=1e-12)
    np.testing.assert_allclose(result.mrr_at_10, np.mean(reference["rr10"], axis=1), atol=1e-12)


@pytest.mark.unit
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), levels=st.integers(1, 6),
       weight=st.sampled_from(list(weight_grid(start=0.0, stop=1.0, step=0.01))))
def test_top10_is_bit_equal_to_rank_candidates(seed, levels, weight):
    ids, semantic, keyword, relevance = random_queries(np.random.default_rng(seed), 20,
                                                       levels=levels, max_candidates=40)
    candidates = CandidateSet.from_queries(ids, semantic, keyword, relevance)
    ours = rank_top_k(candidates, weight, k=12)
    for q in range(len(ids)):
        expected = rank_candidates(ids[q], fuse_scores(semantic[q], keyword[q], weight))[:12]
        np.testing.assert_array_equal(ours[q], expected)


@pytest.mark.unit
def test_last_bit_of_the_keyword_weight_decides_the_order():
    # ns = (0, 0.25, 1), nk = (1, 0, 0). At w = 0.8 fusion.py computes
    # doc 1: 0.8 * 0 + (1.0 - 0.8) * 1 = 0.19999999999999996 and doc 2: 0.8 * 0.25 = 0.2,
    # so doc 2 ranks above doc 1; with a keyword weight of exactly 0.2 they would tie and
    # doc 1 would go first. The sweep must follow fusion.py's float arithmetic.
    ids, semantic, keyword = np.array([1, 2, 3]), np.array([0.0, 1.0, 4.0]), np.array([4.0, 0, 0])
    candidates = CandidateSet.from_queries([ids], [semantic], [keyword], [{2: 1}])
    expected = rank_candidates(ids, fuse_scores(semantic, keyword, 0.8))
    assert expected.tolist() == [3, 2, 1]
    assert rank_top_k(candidates, 0.8)[0].tolist() == [3, 2, 1]
    assert sweep_weights(candidates, [0.8]).mrr_at_10[0] == 0.5
    assert rank_top_k(candidates, 0.8, keyword_weight=0.2)[0].tolist() == [3, 1, 2]


@pytest.mark.unit
def test_weight_one_is_the_pure_semantic_ranking():
    ids, semantic, keyword, relevance = random_queries(np.random.default_rng(3), 100)
    candidates = CandidateSet.from_queries(ids, semantic, keyword, relevance)
    ours = rank_top_k(candidates, 1.0)
    for q in range(len(ids)):
        by_semantic = ids[q][np.lexsort((ids[q], -semantic[q]))]  # raw scores, no fusion
        np.testing.assert_array_equal(ours[q], by_semantic[:10])


@pytest.mark.unit
def test_candidate_set_rejects_bad_input():
    with pytest.raises(ValueError, match="twice"):
        CandidateSet.from_queries([np.array([3, 3])], [np.zeros(2)], [np.zeros(2)], [{}])
    with pytest.raises(ValueError, match="differ in length"):
        CandidateSet.from_queries([np.array([1, 2])], [np.zeros(1)], [np.zeros(2)], [{}])
    with pytest.raises(ValueError, match="no query"):
        CandidateSet.from_queries([], [], [], [])
    missing = CandidateSet.from_queries([np.array([1, 2])], [np.array([0.5, np.nan])],
                                        [np.array([1.0, 2.0])], [{}])
    with pytest.raises(ValueError, match="per_retriever"):
        sweep_weights(missing)


@pytest.mark.unit
def test_per_retriever_mode_follows_ranx_min_max():
    # semantic run returned docs 1, 2, 3; keyword run returned docs 2, 4
    candidates = CandidateSet.from_runs({"q": {1: 0.9, 2: 0.5, 3: 0.1}}, {"q": {2: 7.0, 4: 3.0}},
                                        {"q": {4: 1, 3: 2}})
    assert candidates.doc_ids[0, :4].tolist() == [1, 2, 3, 4]
    # normalised: sem 1 -> 1.0, 2 -> 0.5, 3 -> 0.0, 4 missing -> 0; kw 2 -> 1.0, 4 -> 0.0
    # w = 0.5: fused 1 -> 0.5, 2 -> 0.75, 3 -> 0.0, 4 -> 0.0 (tie 3 vs 4: id ascending)
    ranked = rank_top_k(candidates, 0.5, normalisation="per_retriever")
    assert ranked[0].tolist() == [2, 1, 3, 4]
    result = sweep_weights(candidates, [0.5], normalisation="per_retriever")
    assert result.p_at_5[0] == pytest.approx(0.4) and result.recall_at_5[0] == 1.0
    assert result.p_at_5_ceiling == pytest.approx(0.4)


@pytest.mark.unit
def test_per_retriever_mode_equals_a_direct_ranx_rule_on_random_runs():
    rng = np.random.default_rng(99)
    semantic_run, keyword_run, qrels = {}, {}, {}
    for q in range(150):
        docs = rng.choice(80, 30, replace=False)
        semantic_docs, keyword_docs = docs[:rng.integers(1, 20)], docs[rng.integers(5, 25):]
        semantic_run[q] = {int(d): float(rng.integers(0, 5)) for d in semantic_docs}
        keyword_run[q] = {int(d): float(rng.integers(0, 3)) for d in keyword_docs}
        qrels[q] = {int(d): int(rng.integers(0, 3)) for d in rng.choice(80, 6)}
    candidates = CandidateSet.from_runs(semantic_run, keyword_run, qrels)

    def ranx_normalise(run: dict) -> dict:  # ranx min_max_norm: divide by max(span, 1e-9)
        low, high = min(run.values()), max(run.values())
        return {d: (v - low) / max(high - low, 1e-9) for d, v in run.items()}

    for w_sem, w_kw in ((0.0, 1.0), (0.3, 0.7), (0.7, 0.3), (1.0, 0.0)):
        ours = rank_top_k(candidates, w_sem, keyword_weight=w_kw, normalisation="per_retriever")
        for q in qrels:
            sem, kw = ranx_normalise(semantic_run[q]), ranx_normalise(keyword_run[q])
            docs = np.array(sorted(set(sem) | set(kw)))
            fused = np.array([w_sem * sem.get(d, 0.0) + w_kw * kw.get(d, 0.0) for d in docs])
            np.testing.assert_array_equal(ours[q], rank_candidates(docs, fused)[:10])


@pytest.mark.unit
def test_reciprocal_rank_fusion_hand_worked():
    # semantic ranks: 10 -> 1, 20 -> 2, 30 -> 3; keyword ranks: 30 -> 1, 10 -> 2, 20 -> 3
    # RRF (k=60): 10: 1/61 + 1/62, 20: 1/62 + 1/63, 30: 1/63 + 1/61 -> order 10, 30, 20
    candidates = CandidateSet.from_queries(
        [np.array([20, 10, 30])], [np.array([0.8, 0.9, 0.1])], [np.array([1.0, 2.0, 5.0])],
        [{20: 1}])
    result = reciprocal_rank_fusion(candidates, k=60)
    assert result.mrr_at_10 == pytest.approx(1 / 3)
    assert result.p_at_5 == pytest.approx(0.2)
    # a doc only one retriever returned gets one term; k=1: doc 1 (sem rank 1) and doc 3 (kw
    # rank 1) tie at 1/2 and the smaller id, 1, goes first
    partial = CandidateSet.from_runs({"q": {1: 0.9}}, {"q": {3: 5.0, 2: 1.0}}, {"q": {1: 1}})
    assert reciprocal_rank_fusion(partial, k=1).mrr_at_10 == 1.0
