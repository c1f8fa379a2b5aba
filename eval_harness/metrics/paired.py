"""Paired comparison of two runs over the same units: is the candidate worse than the base?

Each unit (a query; an answer, by its query) has a value under the base and under the
candidate; the comparison is of the per-unit differences ``d = candidate - base``:

* the **difference** is their mean;
* its **interval** is the paired bootstrap percentile interval: resample the units with
  replacement, keep each unit's pair together, take the mean of ``d`` each time, and read the
  ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles (B. Efron and R. J.
  Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13);
* its **p-value** is the two-sided paired randomisation (sign-flip) test of a mean difference
  of 0: under the null hypothesis that base and candidate are exchangeable within each unit,
  every ``d_i`` is as likely to have the other sign, so the p-value is the share of the ``2**n``
  sign assignments whose ``|mean|`` reaches the observed one (M. D. Smucker, J. Allan and B.
  Carterette, "A comparison of statistical significance tests for information retrieval
  evaluation", CIKM 2007). Exact for ``n <= EXACT_UNITS``; beyond, ``resamples`` random sign
  assignments and ``(count + 1) / (resamples + 1)``, which keeps the test valid (B. Phipson
  and G. K. Smyth, "Permutation p-values should never be zero", 2010);
* :func:`holm_adjusted` corrects many rows' p-values together (S. Holm, "A simple
  sequentially rejective multiple test procedure", Scandinavian Journal of Statistics 6,
  1979): the chance of any false rejection over all of them stays at alpha;
* :func:`paired_verdict` calls a row worse or better only when its adjusted p-value is below
  alpha *and* the difference is beyond a margin, so a tiny difference that many units make
  significant is never "worse".

Metric values are often ties (P@5 moves in steps of 0.2): sums are compared with a small
tolerance, so a sign assignment that reaches the observed mean exactly counts as reaching it.
tests/metrics/test_paired.py checks the figures against scipy.stats.permutation_test,
scipy.stats.bootstrap and statsmodels' Holm.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

EXACT_UNITS = 16       # up to this many units the sign-flip test enumerates every assignment
_CHUNK_CELLS = 2_000_000  # resamples x units per block of work: bounded memory for any n
_TIES = 1e-9           # relative tolerance when a resampled sum equals the observed one


@dataclasses.dataclass(frozen=True)
class PairedComparison:
    """The mean paired difference (candidate - base), its interval, the test's p-value."""

    difference: float
    interval: tuple[float, float]
    p_value: float
    n: int


def _differences(base: Sequence[float], candidate: Sequence[float]) -> np.ndarray:
    before = np.asarray(base, dtype=float)
    after = np.asarray(candidate, dtype=float)
    if before.ndim != 1 or before.shape != after.shape:
        raise ValueError(f"base and candidate must be two sequences of one value per unit, of "
                         f"the same length (got {before.shape} and {after.shape}).")
    if before.size == 0:
        raise ValueError("no unit to compare: base and candidate are empty.")
    if not (np.isfinite(before).all() and np.isfinite(after).all()):
        raise ValueError("base and candidate must be finite numbers (a NaN or an infinity "
                         "is no metric value).")
    return after - before


def _blocks(resamples: int, n: int) -> list[int]:
    """Sizes of the blocks ``resamples`` is cut into so a block holds at most _CHUNK_CELLS."""
    size = max(1, _CHUNK_CELLS // n)
    return [min(size, resamples - start) for start in range(0, resamples, size)]


def _sign_flip_p(d: np.ndarray, resamples: int, rng: np.random.Generator) -> float:
    observed = abs(float(d.sum()))
    tolerance = _TIES * max(1.0, float(np.abs(d).sum()))
    n = d.size
    if n <= EXACT_UNITS:
        # every assignment: row k's signs are the bits of k
        bits = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1
        sums = np.abs((1 - 2 * bits) @ d)
        return float(np.mean(sums >= observed - tolerance))
    count = 0
    for size in _blocks(resamples, n):
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        count += int(np.sum(np.abs(signs @ d) >= observed - tolerance))
    return (count + 1) / (resamples + 1)


def _bootstrap_interval(d: np.ndarray, confidence: float, resamples: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    n = d.size
    means = np.empty(resamples)
    done = 0
    for size in _blocks(resamples, n):
        means[done:done + size] = d[rng.integers(0, n, size=(size, n))].mean(axis=1)
        done += size
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def paired_comparison(base: Sequence[float], candidate: Sequence[float], *,
                      confidence: float = 0.95, resamples: int = 10_000,
                      seed: int = 0) -> PairedComparison:
    """The mean of ``candidate - base`` over the units, its paired bootstrap interval at
    ``confidence`` and the two-sided sign-flip test's p-value (``resamples`` each, seeded: the
    same inputs always give the same figures).

    All differences 0: difference 0, interval (0, 0), p 1. Raises ``ValueError`` for no units,
    sequences of unequal length, a value that is not finite, ``confidence`` outside (0, 1) or
    ``resamples`` < 1.

    Examples
    --------
    Three queries whose P@5 drops by 0.2, 0.2 and 0.4: the mean difference is -0.8 / 3. Of the
    2**3 = 8 sign assignments, only the two that keep all signs equal (all minus, all plus)
    reach |sum| = 0.8, so p = 2 / 8 = 0.25.

    >>> result = paired_comparison([0.4, 0.6, 0.4], [0.2, 0.4, 0.0])
    >>> round(result.difference, 4), result.p_value, result.n
    (-0.2667, 0.25, 3)

    A resample of the three differences (-0.2, -0.2, -0.4) has mean -0.4 with chance
    (1/3)**3 = 3.7% (above 2.5%) and -0.2 with chance (2/3)**3 = 30%, so the 95% interval is
    their extremes:

    >>> [round(end, 4) for end in result.interval]
    [-0.4, -0.2]
    >>> paired_comparison([0.2, 0.4], [0.2, 0.4])
    PairedComparison(difference=0.0, interval=(0.0, 0.0), p_value=1.0, n=2)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}.")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}.")
    d = _differences(base, candidate)
    if not d.any():
        return PairedComparison(0.0, (0.0, 0.0), 1.0, int(d.size))
    rng = np.random.default_rng(seed)
    interval = _bootstrap_interval(d, confidence, resamples, rng)
    return PairedComparison(float(d.mean()), interval, _sign_flip_p(d, resamples, rng),
                            int(d.size))


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: with the m p-values sorted
    ascending, the k-th (from 0) becomes ``max over j <= k of min(1, (m - j) * p_(j))``.
    Rejecting every row whose adjusted p-value is below alpha keeps the chance of any false
    rejection at alpha, whatever the rows' dependence.

    Examples
    --------
    m = 3: sorted 0.01, 0.03, 0.04 -> 3 * 0.01 = 0.03, 2 * 0.03 = 0.06, max(0.06, 1 * 0.04)
    = 0.06, returned in the input order.

    >>> [round(p, 4) for p in holm_adjusted([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    >>> holm_adjusted([0.5, 0.9])       # capped at 1
    [1.0, 1.0]
    >>> holm_adjusted([])
    []
    """
    values = [float(p) for p in p_values]
    if any(not (0 <= p <= 1) or math.isnan(p) for p in values):
        raise ValueError(f"p-values must lie in [0, 1], got {values}.")
    m = len(values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=values.__getitem__)):
        running = max(running, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running
    return adjusted


def paired_verdict(difference: float, p_adjusted: float, *, margin: float,
                   alpha: float) -> str:
    """``"worse"`` when ``p_adjusted < alpha`` and ``difference < -margin``; ``"better"`` when
    ``p_adjusted < alpha`` and ``difference > margin``; else ``"no evidence"`` (higher is
    better for every metric and gate score).

    Examples
    --------
    >>> paired_verdict(-0.022, 0.0004, margin=0.01, alpha=0.05)
    'worse'
    >>> paired_verdict(-0.005, 0.0004, margin=0.01, alpha=0.05)  # significant, within margin
    'no evidence'
    >>> paired_verdict(-0.05, 0.2, margin=0.01, alpha=0.05)      # beyond margin, not significant
    'no evidence'
    >>> paired_verdict(0.03, 0.01, margin=0.01, alpha=0.05)
    'better'
    """
    if p_adjusted < alpha and difference < -margin:
        return "worse"
    if p_adjusted < alpha and difference > margin:
        return "better"
    return "no evidence"
