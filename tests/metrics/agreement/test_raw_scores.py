"""Statistics on the raw scores: Krippendorff's interval alpha against the krippendorff package
and a hand-worked value, and the paired offset test."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from eval_harness.metrics.agreement import krippendorff_alpha_interval, score_offset_test

pytestmark = pytest.mark.unit


def test_krippendorff_alpha_interval_hand_worked():
    # Units (judge1, judge2): (1.0, 0.7), (0.3, 0.3), (0.0, 0.5), (0.7, 1.0); n = 8 values.
    # D_o = 1/n * sum_u 1/(m_u - 1) * sum_{i != j in u} (v_i - v_j)^2
    #     = 1/8 * (2*0.09 + 0 + 2*0.25 + 2*0.09) = 0.86/8 = 0.1075
    # All values: 1.0 0.7 0.3 0.3 0.0 0.5 0.7 1.0; sum 4.5, mean 0.5625, sum of squares 3.41,
    #   sum (v - mean)^2 = 3.41 - 8 * 0.5625^2 = 0.87875.
    # sum_{i != j} (v_i - v_j)^2 = 2 * n * 0.87875 = 14.06; D_e = 14.06 / (8 * 7) = 0.2510714
    # alpha = 1 - 0.1075/0.2510714 = 1 - 301/703 = 402/703 = 0.571835
    result = krippendorff_alpha_interval([1.0, 0.3, 0.0, 0.7], [0.7, 0.3, 0.5, 1.0])
    assert result.value == pytest.approx(402 / 703, abs=1e-12)
    assert result.observed_disagreement == pytest.approx(0.1075, abs=1e-12)
    assert result.expected_disagreement == pytest.approx(14.06 / 56, abs=1e-12)


def test_krippendorff_alpha_matches_the_krippendorff_package_with_missing_scores():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(3, 60))
        truth = rng.random(n)
        first = np.clip(truth + rng.normal(0, rng.random() * 0.5, n), 0, 1).round(1)
        second = np.clip(truth + rng.normal(0, rng.random() * 0.5, n), 0, 1).round(1)
        first[rng.random(n) < 0.1] = np.nan
        second[rng.random(n) < 0.1] = np.nan
        both = ~(np.isnan(first) | np.isnan(second))
        if both.sum() < 1 or np.unique(np.concatenate([first[both], second[both]])).size < 2:
            continue
        expected = krippendorff.alpha(reliability_data=np.vstack([first, second]),
                                      level_of_measurement="interval")
        assert krippendorff_alpha_interval(first, second).value == pytest.approx(expected,
                                                                                 abs=1e-9)


def test_krippendorff_alpha_without_variation_is_flagged():
    result = krippendorff_alpha_interval([0.7, 0.7, None], [0.7, 0.7, 0.2])
    assert (result.value, result.degenerate, result.n_units) == (1.0, True, 2)


def test_offset_test_detects_a_judge_that_scores_higher():
    rng = np.random.default_rng(17)
    second = rng.random(60) * 0.6
    first = second + 0.2 + rng.normal(0, 0.05, 60).clip(-0.15, 0.15)
    result = score_offset_test(first, second)
    assert result.mean_difference == pytest.approx(float(np.mean(first - second)))
    assert result.mean_difference > 0.1 and result.p_value < 1e-6
    assert result.n_nonzero == 60
    same = score_offset_test([0.3, 0.7, 1.0], [0.3, 0.7, 1.0])
    assert (same.statistic, same.p_value, same.mean_difference) == (None, None, 0.0)
