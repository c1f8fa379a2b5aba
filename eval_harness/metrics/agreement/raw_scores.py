"""Agreement on the judges' raw scores: Krippendorff's alpha, Spearman's rho and the
Wilcoxon test of a systematic offset between the two judges."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from eval_harness.metrics.agreement.inputs import (AgreementInputError, check_pairs,
                                                   score_array)
from eval_harness.metrics.agreement.results import (AlphaResult, OffsetTest, RankCorrelation,
                                                    finite_or_none)


def krippendorff_alpha_interval(scores1: Sequence[float | None] | np.ndarray,
                                scores2: Sequence[float | None] | np.ndarray) -> AlphaResult:
    """Krippendorff's alpha, interval metric, of two judges' raw scores.

    With two coders per unit and d(a, b) = (a - b)^2, over the N units scored by both
    (n = 2N pairable values; units with a missing score are not pairable and drop out)::

        D_o   = 1/n * sum_u 2 (a_u - b_u)^2                  = mean((a - b)^2)
        D_e   = 1/(n (n-1)) * sum_{i != j} (v_i - v_j)^2     = 2 * var(all values, ddof=1)
        alpha = 1 - D_o / D_e

    Reference: K. Krippendorff, "Computing Krippendorff's Alpha-Reliability", Annenberg
    School for Communication departmental paper 43, 2011.

    Degenerate input: no unit scored by both judges raises :class:`AgreementInputError`;
    every value identical (D_e = 0, hence D_o = 0) gives 1.0 flagged ``degenerate``, the
    same convention as :func:`cohen_kappa`.

    Examples
    --------
    The fourth unit has one score only and drops out. D_o = (0 + 0 + 0.5**2) / 3 = 1/12;
    the six values 0, 1, 1, 0, 1, 0.5 have mean 7/12 and variance (ddof=1) 29/120, so
    D_e = 29/60 and alpha = 1 - (1/12) / (29/60) = 1 - 5/29 = 24/29.

    >>> alpha = krippendorff_alpha_interval([0.0, 1.0, 1.0, None], [0.0, 1.0, 0.5, 0.3])
    >>> round(alpha.value, 4), alpha.n_units, round(24 / 29, 4)
    (0.8276, 3, 0.8276)
    """
    first = score_array(scores1, "scores1")
    second = score_array(scores2, "scores2")
    check_pairs(first, second, "scores1", "scores2")
    both_scored = ~(np.isnan(first) | np.isnan(second))
    if not both_scored.any():
        raise AgreementInputError(
            "Krippendorff's alpha needs at least one pair scored by both judges; none was.")
    return alpha_interval(first[both_scored], second[both_scored])


def score_offset_test(scores1: Sequence[float] | np.ndarray,
                      scores2: Sequence[float] | np.ndarray) -> OffsetTest:
    """Wilcoxon signed-rank test that judge 1 and judge 2 score alike (no systematic offset).

    ``d = scores1 - scores2`` per pair; ``mean_difference > 0`` means judge 1 scores higher.
    Zero differences are dropped (Wilcoxon's original ``zero_method="wilcox"``, scipy's
    default) and ``n_nonzero`` says how many remain; the test is two-sided. Differences are
    rounded to 12 decimals first so that 0.7 - 0.6 and 0.3 - 0.2 tie as intended.
    The p-value treats pairs as independent, which pairs of one query are not: read it as
    descriptive.

    Reference: F. Wilcoxon, "Individual comparisons by ranking methods", Biometrics
    Bulletin 1(6), 80-83, 1945.

    Degenerate input: empty input or unscored values raise :class:`AgreementInputError`;
    all differences zero gives ``statistic=None, p_value=None`` with a reason (the judges
    agree exactly; there is no offset to test).

    Examples
    --------
    Judge 1 scores all four pairs higher (differences 0.4, 0.3, 0.2, 0.1), so the sum of
    negative ranks is 0; of the 2**4 equally likely sign patterns only all-plus and
    all-minus are as extreme, p = 2/16.

    >>> test = score_offset_test([0.9, 0.8, 0.7, 0.6], [0.5, 0.5, 0.5, 0.5])
    >>> test.mean_difference, test.statistic, test.p_value
    (0.25, 0.0, 0.125)
    >>> score_offset_test([0.3, 0.6], [0.3, 0.6]).p_value is None
    True
    """
    first = score_array(scores1, "scores1")
    second = score_array(scores2, "scores2")
    check_pairs(first, second, "scores1", "scores2")
    if np.isnan(first).any() or np.isnan(second).any():
        raise AgreementInputError(
            "The offset test needs scored pairs only; drop unscored pairs first.")
    differences = np.round(first - second, 12)
    n_nonzero = int(np.count_nonzero(differences))
    mean_difference = float(np.mean(first - second))
    if n_nonzero == 0:
        return OffsetTest(mean_difference, None, None, int(first.size), 0,
                          "every paired difference is zero: the judges score identically")
    result = stats.wilcoxon(differences, zero_method="wilcox", alternative="two-sided")
    return OffsetTest(mean_difference, finite_or_none(result.statistic),
                      finite_or_none(result.pvalue), int(first.size), n_nonzero)


def alpha_interval(first: np.ndarray, second: np.ndarray) -> AlphaResult:
    n_units = int(first.size)
    d_o = float(np.mean((first - second) ** 2))
    pooled = np.concatenate([first, second])
    d_e = float(2 * np.var(pooled, ddof=1))
    if d_e == 0.0:
        return AlphaResult(1.0, True, "every score is the same value, so D_e = 0 and alpha is "
                           "0/0; reported as perfect agreement", d_o, d_e, n_units)
    return AlphaResult(1.0 - d_o / d_e, False, None, d_o, d_e, n_units)


def spearman_correlation(first: np.ndarray, second: np.ndarray) -> RankCorrelation:
    n = int(first.size)
    if n < 3:
        return RankCorrelation(None, None, n, "rank correlation needs at least 3 scored pairs")
    for name, values in (("judge 1", first), ("judge 2", second)):
        if np.all(values == values[0]):
            return RankCorrelation(None, None, n, f"{name} gave every pair the same score, "
                                   "so rank correlation is undefined")
    result = stats.spearmanr(first, second)
    return RankCorrelation(finite_or_none(result.statistic), finite_or_none(result.pvalue), n)
