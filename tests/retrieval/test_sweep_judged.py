"""Judged@5 in the weight sweep (eval_harness.retrieval.sweep): equal, at every weight, to a
plain loop of fusion.py's ranking and ranking.judged_at_k, one query at a time."""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.metrics import ranking
from eval_harness.metrics.calibration import weight_grid
from eval_harness.retrieval.fusion import fuse_scores, rank_candidates
from eval_harness.retrieval.sweep import CandidateSet, sweep_weights
from sweep_candidates import random_queries

pytestmark = pytest.mark.unit


def test_judged_at_5_equals_a_direct_loop_at_every_weight():
    rng = np.random.default_rng(31)
    ids, semantic, keyword, relevance = random_queries(rng, 300)
    # leave some queries without any label, and label others only with grade 0
    relevance = [{} if q % 7 == 0 else ({d: 0 for d in rel} if q % 11 == 0 else rel)
                 for q, rel in enumerate(relevance)]
    weights = weight_grid(start=0.0, stop=1.0, step=0.1)
    result = sweep_weights(CandidateSet.from_queries(ids, semantic, keyword, relevance),
                           weights)
    for i, w in enumerate(weights):
        per_query = [ranking.judged_at_k(rank_candidates(d, fuse_scores(s, k, w)), rel, k=5)
                     for d, s, k, rel in zip(ids, semantic, keyword, relevance)]
        assert result.judged_at_5[i] == pytest.approx(np.mean(per_query), abs=1e-12), w
    assert ((result.judged_at_5 > 0) & (result.judged_at_5 < 1)).all()  # really partial


def test_hand_worked_judged_at_5():
    # one query, 6 candidates; semantic order 1..6, so at weight 1 the top 5 is 1, 2, 3, 4,
    # 5. The qrels label 2 (relevant), 4 (grade 0, judged not relevant) and 9 (not among
    # the candidates): 2 of the top 5 are judged, Judged@5 = 0.4, and P@5 = 1 / 5.
    candidates = CandidateSet.from_queries(
        [np.arange(1, 7)], [np.linspace(1.0, 0.5, 6)], [np.zeros(6)], [{2: 1, 4: 0, 9: 1}])
    result = sweep_weights(candidates, [1.0])
    assert result.judged_at_5[0] == pytest.approx(0.4)
    assert result.p_at_5[0] == pytest.approx(0.2)
    # two candidates only, one labelled: 1 / 2 (the empty places are not "unjudged")
    short = CandidateSet.from_queries([np.array([1, 2])], [np.array([1.0, 0.5])],
                                      [np.zeros(2)], [{1: 0}])
    assert sweep_weights(short, [1.0]).judged_at_5[0] == pytest.approx(0.5)
