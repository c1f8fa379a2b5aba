"""A judge measured against itself (test-retest): its label flip rate, Krippendorff's alpha
over its repeated scores and labels, and the share of pairs whose label is not stable, each
with an interval from a bootstrap over queries.

Input is one row per (query, document) pair and one column per scoring of it: column 0 is
the scoring the run's labels came from, columns 1.. are the retests (NaN: unscored). A pair
is *relevant* when its score is strictly above the threshold, as everywhere in
:mod:`eval_harness.metrics.agreement`.

Every statistic is a ratio of sums over pairs, and the pairs of one query are summed
together first, so a resample of queries costs one matrix product
(:func:`retest_agreement`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from eval_harness.metrics.agreement.inputs import AgreementInputError, index_queries
from eval_harness.metrics.agreement.results import BootstrapInterval, JsonResult

_METRICS = ("interval", "nominal")


@dataclass(frozen=True)
class RetestAgreement(JsonResult):
    """One judge's test-retest figures (see :func:`retest_agreement`). A value is None when
    it is undefined (no pair scored twice); intervals say why when they have no bounds."""

    n_pairs: int              # pairs scored at least twice
    n_queries: int
    repeats: int              # retest columns (the first scoring not counted)
    flip_rate: float | None   # share of retest labels differing from the first label
    flip_interval: BootstrapInterval
    unstable_share: float | None  # share of pairs whose labels are not all the same
    unstable_interval: BootstrapInterval
    alpha_scores: float | None    # Krippendorff's alpha, interval metric, on the scores
    alpha_scores_interval: BootstrapInterval
    alpha_labels: float | None    # Krippendorff's alpha, nominal metric, on the labels
    alpha_labels_interval: BootstrapInterval
    threshold: float


def krippendorff_alpha(values: Sequence[Sequence[float]] | np.ndarray, *,
                       metric: str = "interval") -> float | None:
    """Krippendorff's alpha of a units x coders matrix (NaN: no value), any number of coders.

    With ``m_u`` values in unit ``u`` (units with fewer than 2 drop out), ``n`` the pairable
    values and ``d`` the metric's distance (interval: ``(a - b)**2``; nominal:
    ``1 if a != b else 0``)::

        D_o   = 1/n * sum_u 1/(m_u - 1) * sum_{i != j in u} d(v_i, v_j)
        D_e   = 1/(n (n - 1)) * sum_{i != j, all pairable values} d(v_i, v_j)
        alpha = 1 - D_o / D_e

    Reference: K. Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011.

    Degenerate input: no unit with two values gives None; every pairable value the same
    (D_e = 0) gives 1.0, the convention of :func:`krippendorff_alpha_interval`. An unknown
    ``metric`` raises :class:`AgreementInputError`.

    Examples
    --------
    Two units scored three times: (0, 0, 1) and (1, 1, 1). Interval metric: unit 1 has
    sum_{i != j} d = 2 * (0 + 1 + 1) = 4, unit 2 has 0, so D_o = (4 / 2) / 6 = 1/3. The six
    values hold four 1s and two 0s: sum_{i != j} d = 2 * 4 * 2 = 16, D_e = 16 / 30, and
    alpha = 1 - (1/3) / (16/30) = 1 - 10/16 = 0.375. On 0/1 values the nominal distance is
    the same number, so the nominal alpha is too.

    >>> krippendorff_alpha([[0, 0, 1], [1, 1, 1]])
    0.375
    >>> krippendorff_alpha([[0, 0, 1], [1, 1, 1]], metric="nominal")
    0.375
    >>> krippendorff_alpha([[0.2, 0.2], [0.9, 0.9]]), krippendorff_alpha([[1, float("nan")]])
    (1.0, None)
    """
    matrix = _matrix(values)
    stats = _unit_stats(matrix, metric=metric)
    return _alpha_from_sums(stats.sum(axis=0), metric=metric)


def retest_agreement(scores: Sequence[Sequence[float]] | np.ndarray, *,
                     query_ids: Sequence[Hashable], threshold: float = 0.5,
                     n_resamples: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> RetestAgreement:
    """Test-retest figures of one judge over ``scores`` (pairs x scorings, column 0 the
    first scoring; NaN: unscored), ``query_ids`` naming each row's query.

    * flip rate: over every (pair, retest) where both the first and the retest scoring have
      a label, the share whose label differs from the first;
    * unstable share: over pairs with at least two labels, the share whose labels are not
      all the same;
    * alpha on the scores (interval metric) and on the labels (nominal), each pair a unit,
      each scoring a coder (:func:`krippendorff_alpha`).

    Intervals: percentile, ``n_resamples`` resamples of the queries with replacement (the
    pairs of one query share its text), seeded. A resample whose D_e is 0 has alpha 1.0.

    Degenerate input: an empty matrix or ``query_ids`` of another length raise
    :class:`AgreementInputError`; with no pair scored twice the figures are None; with fewer
    than two queries the intervals have no bounds and say why.

    Examples
    --------
    Three queries of one pair, each scored three times; query c's pair goes 0.9, 0.9, 0.1,
    so one of the six retest labels flips (1/6) and one of three pairs is unstable (1/3).

    >>> result = retest_agreement([[0.1, 0.1, 0.1], [0.8, 0.8, 0.8], [0.9, 0.9, 0.1]],
    ...                           query_ids=["a", "b", "c"], n_resamples=200)
    >>> round(result.flip_rate, 4), round(result.unstable_share, 4), result.n_pairs
    (0.1667, 0.3333, 3)

    Labels 0, 0, 0 | 1, 1, 1 | 1, 1, 0 hold five 1s and four 0s: D_o = (2*1*2 / 2) / 9,
    D_e = 2*5*4 / 72, alpha = 1 - (2/9) / (40/72) = 0.6.

    >>> round(result.alpha_labels, 4)
    0.6
    """
    matrix = _matrix(scores)
    labels = np.where(np.isnan(matrix), np.nan, (matrix > threshold).astype(float))
    codes, queries = index_queries(query_ids, matrix.shape[0])
    n_queries = len(queries)
    per_query = np.zeros((n_queries, 12))
    np.add.at(per_query, codes, np.column_stack([
        _flip_stats(labels), _unit_stats(matrix, metric="interval"),
        _unit_stats(labels, metric="nominal")]))
    point = per_query.sum(axis=0)
    resampled = _resampled_sums(per_query, n_resamples=n_resamples, seed=seed)

    def figures(sums: np.ndarray) -> tuple:
        return (_ratio(sums[..., 0], sums[..., 1]), _ratio(sums[..., 2], sums[..., 3]),
                _alpha_from_sums(sums[..., 4:8], metric="interval"),
                _alpha_from_sums(sums[..., 8:12], metric="nominal"))

    values = figures(point)
    intervals = [_interval(None if resampled is None else draws, confidence=confidence,
                           n_resamples=n_resamples, n_queries=n_queries, seed=seed,
                           defined=value is not None)
                 for value, draws in zip(values, figures(resampled) if resampled is not None
                                         else (None,) * 4)]
    return RetestAgreement(int(point[3]), n_queries, matrix.shape[1] - 1, values[0],
                           intervals[0], values[1], intervals[1], values[2], intervals[2],
                           values[3], intervals[3], float(threshold))


# -- sums per pair ---------------------------------------------------------------------


def _matrix(values) -> np.ndarray:
    matrix = np.asarray(values, dtype=float)
    if matrix.ndim != 2 or matrix.size == 0:
        raise AgreementInputError("test-retest needs a non-empty matrix of pairs x scorings.")
    return matrix


def _flip_stats(labels: np.ndarray) -> np.ndarray:
    """Per pair: flips against the first label, comparisons, unstable (0/1), labelled
    at least twice (0/1)."""
    first, rest = labels[:, :1], labels[:, 1:]
    compared = ~np.isnan(first) & ~np.isnan(rest)
    flips = (compared & (rest != first)).sum(axis=1)
    labelled = ~np.isnan(labels)
    twice = labelled.sum(axis=1) >= 2
    ones = np.nansum(labels, axis=1)
    unstable = twice & (ones > 0) & (ones < labelled.sum(axis=1))
    return np.column_stack([flips, compared.sum(axis=1), unstable, twice]).astype(float)


def _unit_stats(matrix: np.ndarray, *, metric: str) -> np.ndarray:
    """Per unit with at least two values: [D_o term, m, sum v, sum v^2] (interval) or
    [D_o term, m, ones, zeros] (nominal on 0/1 codes, any categories folded by rank)."""
    if metric not in _METRICS:
        raise AgreementInputError(f"metric must be one of {', '.join(_METRICS)}, got "
                                  f"{metric!r}.")
    present = ~np.isnan(matrix)
    m = present.sum(axis=1).astype(float)
    pairable = m >= 2
    if metric == "interval":
        v = np.where(present, matrix, 0.0)
        s1, s2 = v.sum(axis=1), (v ** 2).sum(axis=1)
        within = 2 * (m * s2 - s1 ** 2)
        cols = [s1, s2]
    else:
        values = np.unique(matrix[present])
        if values.size > 2:
            raise AgreementInputError("the nominal metric here takes two categories (labels "
                                      f"0/1); got {values.size}.")
        high = values.max() if values.size else 1.0
        ones = (present & (matrix == high)).sum(axis=1).astype(float)
        zeros = m - ones
        within = 2 * ones * zeros
        cols = [ones, zeros]
    d_o = np.divide(within, m - 1, out=np.zeros_like(m), where=pairable)
    out = np.column_stack([d_o, m, *cols])
    out[~pairable] = 0.0
    return out


def _alpha_from_sums(sums: np.ndarray, *, metric: str):
    """Alpha from summed unit stats (last axis: 4 columns); a float for one row of sums, an
    array (NaN where undefined) for many."""
    d_o_sum, n, a, b = (sums[..., i] for i in range(4))
    if metric == "interval":
        between = 2 * (n * b - a ** 2)
    else:
        between = 2 * a * b
    with np.errstate(invalid="ignore", divide="ignore"):
        d_o = d_o_sum / n
        d_e = between / (n * (n - 1))
        alpha = np.where(np.isclose(d_e, 0.0, atol=1e-15), 1.0, 1.0 - d_o / d_e)
    alpha = np.where(n >= 2, alpha, np.nan)
    if np.ndim(alpha) == 0:
        return None if np.isnan(alpha) else float(alpha)
    return alpha


def _ratio(num, den):
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    if np.ndim(value) == 0:
        return None if np.isnan(value) else float(value)
    return value


# -- the query bootstrap ---------------------------------------------------------------


def _resampled_sums(per_query: np.ndarray, *, n_resamples: int, seed: int) -> np.ndarray | None:
    """Sums of per-query stats over ``n_resamples`` resamples of the queries; None when
    there are fewer than two queries."""
    n_queries = per_query.shape[0]
    if n_queries < 2:
        return None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_queries, size=(n_resamples, n_queries))
    counts = np.zeros((n_resamples, n_queries))
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    return counts @ per_query


def _interval(draws, *, confidence: float, n_resamples: int, n_queries: int, seed: int,
              defined: bool) -> BootstrapInterval:
    if draws is None or not defined:
        reason = ("fewer than two queries: nothing to resample" if draws is None
                  else "no pair was scored twice")
        return BootstrapInterval(None, None, confidence, n_resamples, n_queries, seed, reason)
    finite = np.asarray(draws)[~np.isnan(draws)]
    if finite.size == 0:
        return BootstrapInterval(None, None, confidence, n_resamples, n_queries, seed,
                                 "no resample was defined")
    low, high = np.quantile(finite, [(1 - confidence) / 2, (1 + confidence) / 2])
    return BootstrapInterval(float(low), float(high), confidence, n_resamples, n_queries, seed)
