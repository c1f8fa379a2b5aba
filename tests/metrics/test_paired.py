"""The paired comparison (eval_harness.metrics.paired) against independent references: the
sign-flip p-value against scipy.stats.permutation_test (exact: equal; Monte Carlo: within its
error), the bootstrap interval against scipy.stats.bootstrap(paired=True, percentile), Holm
against statsmodels' multipletests; the verdict's margin, ties and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from eval_harness.metrics.paired import (
    EXACT_UNITS,
    holm_adjusted,
    paired_comparison,
    paired_verdict,
)

pytestmark = pytest.mark.unit


def p5_pairs(n: int, seed: int, drop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-query P@5 (steps of 0.2, many ties) of a base and a candidate run."""
    rng = np.random.default_rng(seed)
    rate = rng.beta(1.2, 4.0, n)
    return (rng.binomial(5, rate) / 5,
            rng.binomial(5, np.clip(rate - drop, 0, 1)) / 5)


def scipy_p(base, candidate, **options) -> float:
    return stats.permutation_test(
        (np.asarray(candidate) - np.asarray(base),), np.mean, permutation_type="samples",
        alternative="two-sided", **options).pvalue


@pytest.mark.parametrize("n", [5, 9, EXACT_UNITS])
def test_the_exact_test_is_scipys(n):
    base, candidate = p5_pairs(n, seed=n, drop=0.1)
    ours = paired_comparison(base, candidate).p_value
    assert ours == pytest.approx(scipy_p(base, candidate, n_resamples=np.inf), abs=1e-12)


@pytest.mark.parametrize(("n", "drop"), [(60, 0.0), (300, 0.05), (300, 0.0)])
def test_the_monte_carlo_test_agrees_with_scipys_within_its_error(n, drop):
    base, candidate = p5_pairs(n, seed=7, drop=drop)
    ours = paired_comparison(base, candidate, resamples=20_000).p_value
    theirs = scipy_p(base, candidate, n_resamples=20_000, random_state=1)
    # two Monte-Carlo estimates of one p: each within ~3 standard errors of it
    error = 3 * np.sqrt(max(theirs * (1 - theirs), 1e-4) / 20_000)
    assert abs(ours - theirs) <= 2 * error + 1e-4


def test_the_interval_is_scipys_paired_percentile_bootstrap():
    base, candidate = p5_pairs(300, seed=3, drop=0.05)
    ours = paired_comparison(base, candidate, resamples=20_000).interval
    theirs = stats.bootstrap((base, candidate), lambda b, c: np.mean(c - b), paired=True,
                             vectorized=False, method="percentile", n_resamples=20_000,
                             random_state=2).confidence_interval
    width = theirs.high - theirs.low
    assert ours[0] == pytest.approx(theirs.low, abs=0.05 * width)
    assert ours[1] == pytest.approx(theirs.high, abs=0.05 * width)
    assert ours[0] < np.mean(candidate - base) < ours[1]


def test_holm_is_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest",
                                    reason="statsmodels is not installed")
    p_values = [0.001, 0.04, 0.03, 0.2, 0.012, 0.5, 0.0001]
    expected = multitest.multipletests(p_values, method="holm")[1]
    assert holm_adjusted(p_values) == pytest.approx(list(expected), abs=1e-12)


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.02, 0.3 -> 4 * 0.005, 3 * 0.01, max(0.03, 2 * 0.02), max(0.04, 0.3)
    assert holm_adjusted([0.02, 0.3, 0.005, 0.01]) == pytest.approx([0.04, 0.3, 0.02, 0.03])
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        holm_adjusted([0.2, 1.5])


def test_no_difference_and_a_difference_within_the_margin():
    base, _ = p5_pairs(200, seed=4)
    same = paired_comparison(base, base)
    assert (same.difference, same.interval, same.p_value) == (0.0, (0.0, 0.0), 1.0)
    # 5,000 queries each 0.004 lower: overwhelming evidence, and still no "worse"
    tiny = paired_comparison(np.full(5_000, 0.5), np.full(5_000, 0.496))
    assert tiny.p_value < 1e-3 and tiny.interval[1] < 0
    assert paired_verdict(tiny.difference, tiny.p_value, margin=0.01, alpha=0.05) == \
        "no evidence"
    assert paired_verdict(tiny.difference, tiny.p_value, margin=0.001, alpha=0.05) == "worse"


def test_it_is_seeded_and_ties_reach_the_observed_mean():
    base, candidate = p5_pairs(120, seed=5, drop=0.05)
    assert paired_comparison(base, candidate, seed=3) == paired_comparison(base, candidate,
                                                                           seed=3)
    # one difference of -0.2, the rest 0: the sign-flip distribution is +-0.2 / n, each
    # as extreme as the observation: p = 1 (every assignment reaches it), not 0.5
    one = paired_comparison([0.4] + [0.2] * 40, [0.2] + [0.2] * 40)
    assert one.p_value == 1.0


@pytest.mark.parametrize(("base", "candidate", "message"), [
    ([], [], "no unit to compare"),
    ([0.2, 0.4], [0.2], "the same length"),
    ([0.2, float("nan")], [0.2, 0.4], "finite"),
])
def test_bad_input_is_one_clear_error(base, candidate, message):
    with pytest.raises(ValueError, match=message):
        paired_comparison(base, candidate)
