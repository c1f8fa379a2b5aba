"""The calibration statistics: the weight grid, the best weight, leave-one-out
cross-validation, the uplift over the default weight and its paired tests. (The verdict
bands: tests/calibration/test_verdict.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from eval_harness.metrics.calibration import (
    best_weight,
    cross_validated_p_at_5,
    paired_bootstrap_interval,
    paired_randomization_test,
    uplift_over_default,
    weight_grid,
)
from eval_harness.retrieval.sweep import CandidateSet, SweepResult, sweep_weights
from eval_harness.retrieval.weights import DEFAULT_WEIGHTS
from sweep_candidates import random_queries

pytestmark = pytest.mark.unit


def test_weight_grid_holds_exact_decimals():
    assert DEFAULT_WEIGHTS.tolist() == [0.5, 0.6, 0.7, 0.8, 0.9]
    fine = weight_grid(start=0.0, stop=1.0, step=0.01)
    assert fine.size == 101 and fine[70] == 0.7 and fine[29] == 0.29 and fine[-1] == 1.0
    with pytest.raises(ValueError, match="multiple of step"):
        weight_grid(start=0.0, stop=1.0, step=0.3)
    with pytest.raises(ValueError, match="0 <= start"):
        weight_grid(start=0.5, stop=1.2, step=0.1)


def test_best_weight_tie_rules():
    weights = np.array([0.5, 0.6, 0.7, 0.8, 0.9])
    assert best_weight(weights, np.array([0.1, 0.4, 0.3, 0.4, 0.2])) == 0.6  # equidistant: smaller
    assert best_weight(weights, np.array([0.1, 0.4, 0.3, 0.4, 0.2]), current_weight=0.8) == 0.8
    assert best_weight(weights, np.array([0.4, 0.4, 0.4, 0.4, 0.4])) == 0.7  # no gain: stay
    assert best_weight(weights, np.array([0.1, 0.2, 0.3, 0.4, 0.5])) == 0.9


def sweep_from_matrix(weights: list[float], per_query: list[list[float]]) -> SweepResult:
    per_query_array = np.array(per_query, dtype=np.float64).T  # (weights, queries)
    means = per_query_array.mean(axis=1)
    return SweepResult(np.array(weights), 1.0 - np.array(weights), means, means, means, means,
                       per_query_array, 1.0, 1.0, "candidates")


def test_leave_one_out_cross_validation_hand_worked():
    # P@5 per query at weights (0.5, 0.7, 0.9). In-sample 0.5 wins with 0.5.
    # Leave q0 (or q1) out: train means 0.6 / 0.4 / 0.2 -> 0.5, held-out score 0.2.
    # Leave q2 (or q3) out: train means 0.4 / 0.4 / 0.4 -> tie, closest to 0.7 -> held-out 0.4.
    # Cross-validated P@5 = (0.2 + 0.2 + 0.4 + 0.4) / 4 = 0.3 (fold order is irrelevant here).
    sweep = sweep_from_matrix([0.5, 0.7, 0.9], [[0.2, 0.4, 0.6], [0.2, 0.4, 0.6],
                                                [0.8, 0.4, 0.0], [0.8, 0.4, 0.0]])
    result = cross_validated_p_at_5(sweep, n_folds=4, seed=123)
    assert result.p_at_5 == pytest.approx(0.3)
    assert sorted(result.fold_weights) == [0.5, 0.5, 0.7, 0.7]
    assert result.fold_sizes == (1, 1, 1, 1)
    assert cross_validated_p_at_5(sweep, n_folds=2, seed=5) == \
        cross_validated_p_at_5(sweep, n_folds=2, seed=5)  # seeded: reproducible
    with pytest.raises(ValueError, match="n_folds"):
        cross_validated_p_at_5(sweep, n_folds=5)


def test_uplift_interval_contains_the_point_estimate():
    ids, semantic, keyword, relevance = random_queries(np.random.default_rng(8), 300)
    result = sweep_weights(CandidateSet.from_queries(ids, semantic, keyword, relevance),
                           weight_grid(start=0.5, stop=0.9, step=0.1))
    uplift = uplift_over_default(result, n_resamples=2000, seed=1)
    assert uplift.ci_low <= uplift.absolute <= uplift.ci_high
    assert uplift.absolute == pytest.approx(uplift.best_p_at_5 - uplift.default_p_at_5)
    assert uplift.best_weight == best_weight(result.semantic_weights, result.p_at_5)
    assert uplift.default_p_at_5 == result.p_at_5[2]
    if uplift.default_p_at_5 > 0:
        assert uplift.relative == pytest.approx(uplift.absolute / uplift.default_p_at_5)
    assert 0.0 < uplift.p_value <= 1.0
    assert uplift_over_default(result, n_resamples=2000, seed=1) == uplift  # seeded
    assert uplift_over_default(result, n_resamples=2000, seed=1,
                               best=uplift.best_weight) == uplift  # the best chosen already
    with pytest.raises(ValueError, match="not on the swept grid"):
        uplift_over_default(sweep_weights(CandidateSet.from_queries(
            ids, semantic, keyword, relevance), [0.5, 0.8]))


def test_paired_statistics_on_clear_cases():
    same = np.array([0.2, 0.4, 0.6, 0.0])
    assert paired_bootstrap_interval(same, same) == (0.0, 0.0)
    assert paired_randomization_test(same, same) == 1.0
    rng = np.random.default_rng(0)
    baseline = rng.integers(0, 3, 200) / 5
    better = baseline + 0.2
    low, high = paired_bootstrap_interval(better, baseline, n_resamples=1000)
    assert low == pytest.approx(0.2) and high == pytest.approx(0.2)
    assert paired_randomization_test(better, baseline, n_resamples=999) == pytest.approx(1 / 1000)
    noisy = baseline + rng.choice([-0.2, 0.2], 200)
    assert paired_randomization_test(noisy, baseline, n_resamples=2000) > 0.001


def test_relative_uplift_is_none_when_default_scores_zero():
    sweep = sweep_from_matrix([0.7, 0.8], [[0.0, 0.2], [0.0, 0.0]])
    uplift = uplift_over_default(sweep, n_resamples=200)
    assert uplift.best_weight == 0.8 and uplift.relative is None
    assert dataclasses.asdict(uplift)["absolute"] == pytest.approx(0.1)
