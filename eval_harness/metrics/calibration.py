"""Hybrid weight calibration statistics: the weight grid, the best weight and its uplift.

The sweep itself (every query ranked at every weight, bit-identical to the fusion rule) is
:func:`eval_harness.retrieval.sweep.sweep_weights`; this module reads any object with the
arrays of :class:`WeightSweep` (its ``SweepResult`` has them), so it imports nothing of the
harness.

Statistics: the best weight, its uplift over the MEDRAG default 0.7 with a paired bootstrap
interval and a paired sign-flip randomization test, k-fold cross-validated P@5 (the honest
estimate, since the best weight is chosen on the same queries it is scored on), and each grid
point's P@5 interval. They describe the grid; whether the weights change is decided by one
test only, the max-statistic permutation test over the grid against the weights in force
(:mod:`eval_harness.calibration.decision`), which the uplift's p-value does not replace. Numpy
only (settings/calibration.py and retrieval/weights.py import :func:`weight_grid`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

DEFAULT_SEMANTIC_WEIGHT = 0.7  # MEDRAG default (0.7 semantic / 0.3 keyword)
TIE_TOLERANCE = 1e-12  # mean P@5 values closer than this are treated as a tie


class WeightSweep(Protocol):
    """What the statistics read of a weight sweep (``retrieval.sweep.SweepResult`` has it)."""

    semantic_weights: np.ndarray  # the grid, (n_weights,)
    p_at_5: np.ndarray  # mean P@5 per weight, (n_weights,)
    per_query_p_at_5: np.ndarray  # (n_weights, n_queries)


# --------------------------------------------------------------------------- weight grid
def weight_grid(*, start: float = 0.5, stop: float = 0.9, step: float = 0.1) -> np.ndarray:
    """Semantic weights ``start, start + step, ..., stop`` (inclusive), each rounded to 10
    decimals so that the grid holds the exact doubles ``0.7`` and ``0.8``, not
    ``0.7000000000000001``. ``stop - start`` must be a whole number of steps, else
    ``ValueError``.

    Examples
    --------
    >>> weight_grid().tolist()
    [0.5, 0.6, 0.7, 0.8, 0.9]
    >>> weight_grid(start=0.0, stop=1.0, step=0.25).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> 0.1 * 7 == 0.7, 0.7 in weight_grid(start=0.0, stop=1.0, step=0.1)
    (False, True)
    """
    if not (0.0 <= start <= stop <= 1.0) or not step > 0.0:
        raise ValueError(f"weight grid needs 0 <= start <= stop <= 1 and step > 0, "
                         f"got start={start}, stop={stop}, step={step}.")
    n_steps = round((stop - start) / step)
    if abs(start + n_steps * step - stop) > 1e-9:
        raise ValueError(f"stop - start = {stop - start} is not a multiple of step {step}; "
                         f"choose a step that divides the range.")
    return np.round(start + step * np.arange(n_steps + 1), 10)


def grid_index(semantic_weights: np.ndarray, semantic_weight: float) -> int:
    """Position of a weight on the grid (within 1e-9); ``ValueError`` when it is not on it.

    Examples
    --------
    >>> grid_index(weight_grid(), 0.8)
    3
    >>> grid_index(weight_grid(), 0.75)
    Traceback (most recent call last):
    ...
    ValueError: weight 0.75 is not on the swept grid [0.5, 0.6, 0.7, 0.8, 0.9]; add it to the grid.
    """
    semantic_weights = np.asarray(semantic_weights, dtype=np.float64)
    hits = np.flatnonzero(np.isclose(semantic_weights, semantic_weight, rtol=0.0, atol=1e-9))
    if hits.size == 0:
        raise ValueError(f"weight {semantic_weight} is not on the swept grid "
                         f"{semantic_weights.tolist()}; add it to the grid.")
    return int(hits[0])


# --------------------------------------------------------------------------- statistics
def best_weight(semantic_weights: np.ndarray, p_at_5: np.ndarray, *,
                current_weight: float = DEFAULT_SEMANTIC_WEIGHT) -> float:
    """The weight with the highest mean P@5.

    Ties (within 1e-12) go to the weight closest to ``current_weight`` (the configured one,
    so a calibration does not move the config without a gain), then to the smaller weight.
    No weight, or not one P@5 per weight, raises ``ValueError``.

    Examples
    --------
    0.6 and 0.8 tie at 0.44, both 0.1 away from 0.7: the smaller wins, unless the
    configured weight is one of them.

    >>> best_weight([0.5, 0.6, 0.7, 0.8], [0.40, 0.44, 0.42, 0.44])
    0.6
    >>> best_weight([0.5, 0.6, 0.7, 0.8], [0.40, 0.44, 0.42, 0.44], current_weight=0.8)
    0.8
    """
    semantic_weights = np.asarray(semantic_weights, dtype=np.float64)
    p_at_5 = np.asarray(p_at_5, dtype=np.float64)
    if semantic_weights.size == 0 or semantic_weights.shape != p_at_5.shape:
        raise ValueError("best_weight needs one P@5 per weight and at least one weight.")
    tied = np.flatnonzero(p_at_5 >= p_at_5.max() - TIE_TOLERANCE)
    distance = np.round(np.abs(semantic_weights[tied] - current_weight), 10)
    winner = tied[np.lexsort((semantic_weights[tied], distance))[0]]
    return float(semantic_weights[winner])


def paired_bootstrap_interval(treatment: np.ndarray, baseline: np.ndarray, *,
                              confidence: float = 0.95, n_resamples: int = 10_000,
                              seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(treatment - baseline), resampling queries.

    Queries are drawn with replacement and both systems keep the same draw (paired), as
    in Sakai (2006) / Efron & Tibshirani (1993) ch. 13. Seeded, hence reproducible.
    Arrays of different length, empty arrays, ``confidence`` outside (0, 1) or
    ``n_resamples < 1`` raise ``ValueError``.

    Examples
    --------
    Every query gains exactly 0.25, so every resample's mean gain is 0.25:

    >>> paired_bootstrap_interval([0.75, 0.5, 1.0], [0.5, 0.25, 0.75])
    (0.25, 0.25)

    Gains 0, 0.25 and 0.5 (mean 0.25): a resample's mean lies between the smallest
    and the largest gain, and the same seed gives the same interval.

    >>> low, high = paired_bootstrap_interval([0.5, 0.5, 1.0], [0.5, 0.25, 0.5], seed=1)
    >>> 0.0 <= low < 0.25 < high <= 0.5
    True
    >>> (low, high) == paired_bootstrap_interval([0.5, 0.5, 1.0], [0.5, 0.25, 0.5], seed=1)
    True
    """
    differences = _paired_differences(treatment, baseline)
    if not 0.0 < confidence < 1.0 or n_resamples < 1:
        raise ValueError("confidence must lie in (0, 1) and n_resamples be >= 1.")
    rng = np.random.default_rng(seed)
    means = np.concatenate([
        differences[rng.integers(0, differences.size, (size, differences.size))].mean(axis=1)
        for size in _chunks(n_resamples, differences.size)])
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1.0 - alpha / 2])
    return float(low), float(high)


def grid_p_at_5_intervals(per_query_p_at_5, *, confidence: float = 0.95,
                          n_resamples: int = 10_000,
                          seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of each grid point's mean P@5 over queries.

    ``per_query_p_at_5`` is (n_weights, n_queries). One seeded matrix of resampled query
    indices (R x n_queries, drawn with replacement) serves every grid point, so all the
    intervals rest on the same resamples and a row is bootstrapped as
    :func:`paired_bootstrap_interval` would (Efron & Tibshirani 1993, ch. 13: the
    percentiles ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` of the R resample
    means). Each interval describes one weight's P@5; it is not adjusted for comparing the
    grid's points (the decision's permutation test is). Returns ``(low, high)``, each
    (n_weights,). A matrix that is not 2-D or has no query, ``confidence`` outside (0, 1)
    or ``n_resamples < 1`` raise ``ValueError``; one query gives a zero-width interval.

    Examples
    --------
    Two queries. At the first weight both score 0.5, so every resample mean is 0.5. At the
    second they score 0 and 1: a resample of two queries has mean 0 (both draws the first
    query, probability 1/4), 0.5 (1/2) or 1 (1/4); with 1/4 of the resamples at each end,
    the 2.5th and 97.5th percentiles are 0 and 1.

    >>> low, high = grid_p_at_5_intervals([[0.5, 0.5], [0.0, 1.0]])
    >>> low.tolist(), high.tolist()
    ([0.5, 0.0], [0.5, 1.0])
    """
    values = np.asarray(per_query_p_at_5, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] == 0:
        raise ValueError("grid intervals need a (weights, queries) matrix with a query.")
    if not 0.0 < confidence < 1.0 or n_resamples < 1:
        raise ValueError("confidence must lie in (0, 1) and n_resamples be >= 1.")
    n_queries = values.shape[1]
    rng = np.random.default_rng(seed)
    means = []
    for size in _chunks(n_resamples, n_queries):
        drawn = rng.integers(0, n_queries, (size, n_queries))
        # how often each resample drew each query: the resample means as one matrix product
        offsets = (drawn + n_queries * np.arange(size)[:, None]).ravel()
        counts = np.bincount(offsets, minlength=size * n_queries).reshape(size, n_queries)
        means.append(counts @ values.T / n_queries)  # (size, n_weights)
    alpha = 1.0 - confidence
    low, high = np.quantile(np.concatenate(means), [alpha / 2, 1.0 - alpha / 2], axis=0)
    return low, high


def paired_randomization_test(treatment: np.ndarray, baseline: np.ndarray, *,
                              n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of a paired randomization (sign-flip) test on the mean difference.

    Under H0 each query's difference is equally likely to have either sign (Smucker, Allan
    & Carterette, CIKM 2007). p = (1 + #{|permuted mean| >= |observed mean|}) / (1 + R),
    so p is never 0; identical systems give p = 1. Input errors as
    :func:`paired_bootstrap_interval`.

    Examples
    --------
    >>> paired_randomization_test([0.4, 0.6], [0.4, 0.6])
    1.0

    Two queries that both gain 0.5: of the four sign patterns (+ +, + -, - +, - -) two
    reach |mean| = 0.5, so p is close to 2/4.

    >>> round(paired_randomization_test([1.0, 0.5], [0.5, 0.0]), 1)
    0.5
    """
    differences = _paired_differences(treatment, baseline)
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1.")
    observed = abs(differences.mean())
    rng = np.random.default_rng(seed)
    extreme = 0
    for size in _chunks(n_resamples, differences.size):
        signs = rng.integers(0, 2, (size, differences.size)) * 2 - 1
        permuted = np.abs(signs @ differences) / differences.size
        extreme += int(np.count_nonzero(permuted >= observed - TIE_TOLERANCE))
    return (1 + extreme) / (1 + n_resamples)


def _paired_differences(treatment: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    treatment = np.asarray(treatment, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    if treatment.shape != baseline.shape or treatment.ndim != 1 or treatment.size == 0:
        raise ValueError("paired statistics need two equally long, non-empty per-query arrays.")
    return treatment - baseline


def _chunks(n_resamples: int, n_queries: int, budget: int = 2_000_000) -> list[int]:
    size = max(1, budget // max(n_queries, 1))  # bounds memory to ~budget draws at a time
    return [min(size, n_resamples - start) for start in range(0, n_resamples, size)]


@dataclass(frozen=True)
class Uplift:
    """The best weight against the default weight, on the same queries."""

    best_weight: float
    default_weight: float
    best_p_at_5: float
    default_p_at_5: float
    absolute: float  # best - default
    relative: float | None  # absolute / default; None when the default scores 0
    ci_low: float  # paired bootstrap interval of ``absolute``
    ci_high: float
    confidence: float
    p_value: float  # paired sign-flip randomization test: descriptive, it decides nothing
    n_queries: int


def uplift_over_default(sweep: WeightSweep, *, default_weight: float = DEFAULT_SEMANTIC_WEIGHT,
                        current_weight: float | None = None, confidence: float = 0.95,
                        n_resamples: int = 10_000, seed: int = 0,
                        best: float | None = None) -> Uplift:
    """Uplift in P@5 of the best weight (see :func:`best_weight`) over ``default_weight``.

    The best weight is chosen on the same queries it is scored on, so the uplift is
    optimistic; :func:`cross_validated_p_at_5` gives the out-of-sample figure.
    ``current_weight`` (tie-break target) defaults to ``default_weight``, which must be on
    the grid (else ``ValueError``). ``best``: the best weight when it was already chosen
    (by :func:`best_weight`, with the same ``current_weight``).

    Examples
    --------
    Four queries; at 0.8 queries 1 and 3 gain 0.2 each: P@5 0.4 -> 0.5, +0.1 absolute,
    0.1 / 0.4 = +25% relative.

    >>> from types import SimpleNamespace
    >>> per_query = np.array([[0.4, 0.6, 0.2, 0.4],    # weight 0.7
    ...                       [0.6, 0.6, 0.4, 0.4]])   # weight 0.8
    >>> sweep = SimpleNamespace(semantic_weights=np.array([0.7, 0.8]),
    ...                         p_at_5=per_query.mean(axis=1), per_query_p_at_5=per_query)
    >>> uplift = uplift_over_default(sweep)
    >>> uplift.best_weight, round(uplift.absolute, 10), round(uplift.relative, 10)
    (0.8, 0.1, 0.25)
    >>> round(uplift.p_value, 1)      # 2 of the 4 sign patterns of (0.2, 0.2) reach 0.1
    0.5

    A resample draws only unchanged queries (mean gain 0) with probability
    (2/4)^4 = 1/16 > 2.5%, only improved ones (mean 0.2) likewise, so the 95% interval is:

    >>> round(uplift.ci_low, 10), round(uplift.ci_high, 10)
    (0.0, 0.2)
    """
    current_weight = default_weight if current_weight is None else current_weight
    chosen = best if best is not None else best_weight(sweep.semantic_weights, sweep.p_at_5,
                                                       current_weight=current_weight)
    best_index = grid_index(sweep.semantic_weights, chosen)
    default_index = grid_index(sweep.semantic_weights, default_weight)
    best_row = sweep.per_query_p_at_5[best_index]
    default_row = sweep.per_query_p_at_5[default_index]
    best_p5 = float(sweep.p_at_5[best_index])
    default_p5 = float(sweep.p_at_5[default_index])
    absolute = best_p5 - default_p5
    low, high = paired_bootstrap_interval(best_row, default_row, confidence=confidence,
                                          n_resamples=n_resamples, seed=seed)
    p_value = paired_randomization_test(best_row, default_row, n_resamples=n_resamples,
                                        seed=seed)
    return Uplift(best_weight=chosen, default_weight=float(sweep.semantic_weights[default_index]),
                  best_p_at_5=best_p5, default_p_at_5=default_p5, absolute=absolute,
                  relative=absolute / default_p5 if default_p5 > 0 else None,
                  ci_low=low, ci_high=high, confidence=confidence, p_value=p_value,
                  n_queries=best_row.size)


@dataclass(frozen=True)
class CrossValidation:
    """k-fold cross-validated P@5: weights chosen on k-1 folds, scored on the held-out one."""

    p_at_5: float  # mean held-out P@5 over all queries
    fold_weights: tuple[float, ...]
    fold_p_at_5: tuple[float, ...]
    fold_sizes: tuple[int, ...]


def cross_validated_p_at_5(sweep: WeightSweep, *, n_folds: int = 5, seed: int = 0,
                           current_weight: float = DEFAULT_SEMANTIC_WEIGHT) -> CrossValidation:
    """Choose the best weight on k-1 folds (same tie rule), score P@5 on the held-out fold.

    Queries are shuffled with ``seed`` and dealt round-robin into ``n_folds`` folds whose
    sizes differ by at most one; the pooled held-out mean weighs every query once.
    ``n_folds`` outside 2 .. n_queries raises ``ValueError``.

    Examples
    --------
    Weight 0.8 beats 0.7 on every query, so every fold chooses it and the held-out P@5
    is its mean, (0.6 + 0.6 + 0.4 + 0.4) / 4 = 0.5:

    >>> from types import SimpleNamespace
    >>> per_query = np.array([[0.2, 0.4, 0.2, 0.2],    # weight 0.7
    ...                       [0.6, 0.6, 0.4, 0.4]])   # weight 0.8
    >>> sweep = SimpleNamespace(semantic_weights=np.array([0.7, 0.8]),
    ...                         p_at_5=per_query.mean(axis=1), per_query_p_at_5=per_query)
    >>> cv = cross_validated_p_at_5(sweep, n_folds=2)
    >>> round(cv.p_at_5, 10), cv.fold_weights, cv.fold_sizes
    (0.5, (0.8, 0.8), (2, 2))
    """
    per_query = sweep.per_query_p_at_5
    n_queries = per_query.shape[1]
    if not 2 <= n_folds <= n_queries:
        raise ValueError(f"n_folds must lie between 2 and the number of queries "
                         f"({n_queries}), got {n_folds}.")
    fold_of = np.empty(n_queries, dtype=np.int64)
    fold_of[np.random.default_rng(seed).permutation(n_queries)] = np.arange(n_queries) % n_folds
    weights, scores, sizes, held_out_total = [], [], [], 0.0
    for fold in range(n_folds):
        held_out = fold_of == fold
        train_p5 = per_query[:, ~held_out].mean(axis=1)
        chosen = best_weight(sweep.semantic_weights, train_p5, current_weight=current_weight)
        held_out_p5 = per_query[grid_index(sweep.semantic_weights, chosen), held_out]
        weights.append(chosen)
        scores.append(float(held_out_p5.mean()))
        sizes.append(int(held_out.sum()))
        held_out_total += float(held_out_p5.sum())
    return CrossValidation(held_out_total / n_queries, tuple(weights), tuple(scores), tuple(sizes))
