"""Prediction-powered inference (PPI) for a mean: the judges' P@5 corrected by a human sample.

The judges label every query; people label a small uniform random sample of them. The judge
P@5 alone is biased (a judge that over-rates documents over-rates P@5); the human sample alone
is unbiased but its interval is wide. PPI uses the human sample to measure the judges' error
and subtracts it, which keeps the estimate unbiased and the interval valid while the judges'
labels on all queries shrink it.

The unit is the query: each input holds one P@5 per query (the resampling unit of the interval
is the query, as in the rest of the harness). Pure numpy and scipy, no database: the caller
reads the three arrays and records the figures.

Reference: A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic,
"Prediction-powered inference", Science 382 (2023); A. N. Angelopoulos, J. C. Duchi, T. Zrnic,
"PPI++: Efficient prediction-powered inference", arXiv:2311.01453 (2023). The numbers equal
``ppi_py.ppi_mean_pointestimate`` / ``ppi_py.ppi_mean_ci`` (ppi-python 0.2.3, two-sided, no
weights); tests/metrics/test_ppi.py checks them against that package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm


@dataclass(frozen=True)
class PPIEstimate:
    """A corrected mean with its interval and the sample sizes it rests on.

    ``lam`` is the weight given to the judges (1 = classical PPI, 0 = the human sample alone);
    reports show it so that a reader can tell how much the judges contributed.
    """

    estimate: float
    interval: tuple[float, float]
    n_human: int
    n_judged: int
    lam: float

    def to_dict(self) -> dict[str, Any]:
        """The ``ppi`` object of ``calibrate --json`` (``lambda`` is the judges' weight)."""
        return {
            "estimate": self.estimate,
            "interval": [self.interval[0], self.interval[1]],
            "n_human": self.n_human,
            "n_judged": self.n_judged,
            "lambda": self.lam,
        }


@dataclass(frozen=True)
class _Terms:
    """The pieces every PPI figure is computed from, for one choice of ``lam``."""

    lam: float
    estimate: float
    rectifier_variance: float  # per-query variance of y - lam * yhat on the human sample
    imputed_variance: float  # per-query variance of lam * yhat on all judged queries
    n_human: int
    n_judged: int

    @property
    def standard_error(self) -> float:
        return math.sqrt(self.rectifier_variance / self.n_human
                         + self.imputed_variance / self.n_judged)


def prediction_powered_mean(
    *,
    y_labeled: ArrayLike,
    yhat_labeled: ArrayLike,
    yhat_unlabeled: ArrayLike,
    alpha: float = 0.05,
    lam: float | None = None,
) -> PPIEstimate:
    """PPI estimate of the mean of ``y`` with a two-sided ``1 - alpha`` CLT interval.

    Inputs, one value per query (keyword-only, because swapping two of them gives a plausible
    wrong number rather than an error):

    - ``y_labeled``: the human P@5 of the n human-labelled queries;
    - ``yhat_labeled``: the judges' P@5 of the same queries, in the same order;
    - ``yhat_unlabeled``: the judges' P@5 of all N judged queries.

    With ``lam`` the judges' weight::

        estimate   = lam * mean(yhat_unlabeled) + mean(y_labeled - lam * yhat_labeled)
        se**2      = var(y_labeled - lam * yhat_labeled) / n + lam**2 * var(yhat_unlabeled) / N
        interval   = estimate -/+ z * se,   z = norm.ppf(1 - alpha / 2)

    (variances with divisor n and N, as ppi-python computes them). ``lam = 1`` is classical
    PPI, ``estimate = mean(yhat_unlabeled) + mean(y_labeled - yhat_labeled)``: the judge mean
    plus the judges' average error measured on the human sample.

    ``lam=None`` (the default) is PPI++ power tuning, as ppi-python does with ``lam=None``::

        lam = cov(y_labeled, yhat_labeled) / ((1 + n / N) * var(yhat_labeled ++ yhat_unlabeled))

    (covariance with divisor n, variance of the concatenation with divisor n + N - 1), clipped
    to [0, 1]. Why it is the default: it minimises the estimated variance over lam, so its
    interval is (asymptotically) never wider than classical PPI's nor than the human sample's
    own interval (lam = 0). Classical PPI is wider than the human sample alone when the judges
    are weakly related to people (a noisy judge adds its noise with weight 1); the tuned lam
    then leans on the human labels instead. Both are unbiased and asymptotically valid; the
    estimated lam costs nothing measurable in coverage (tests/metrics/test_ppi.py simulates both).
    When the judges' P@5 does not vary at all, lam is irrelevant to the estimate and 1 is used.

    The human sample is drawn from the judged queries, so ``yhat_unlabeled`` includes the
    labelled queries (PPI's theory has two independent samples). For the P@5 of the judged
    query set itself this makes the interval conservative: the judged term counts sampling
    variance that a fixed query set does not have (97-98% coverage at nominal 95% with 200 of
    2,000 labelled, tests/metrics/test_ppi.py); for the mean over the queries' population it is
    close to nominal.

    The interval is not clipped to [0, 1], to stay the figure ppi-python reports; a P@5 near
    0 or 1 with few human labels can give an end point just outside.

    Degenerate input raises ``ValueError`` with one sentence: an empty input, fewer than two
    human-labelled queries (no variance can be estimated from one), labelled arrays of
    different lengths, a non-finite value (NaN or infinity), an array that is not
    one-dimensional, ``alpha`` outside (0, 1), a given ``lam`` outside [0, 1].

    Examples
    --------
    The judges over-rate both labelled queries by 0.2; their mean over the four judged
    queries is 0.7. Classical PPI (lam = 1): 0.7 + (-0.2) = 0.5, se**2 = 0 / 2 + 0.01 / 4
    (the rectifier -0.2, -0.2 does not vary), so se = 0.05 and the half-width 1.96 * 0.05.

    >>> data = dict(y_labeled=[0.6, 0.4], yhat_labeled=[0.8, 0.6],
    ...             yhat_unlabeled=[0.8, 0.6, 0.6, 0.8])
    >>> ppi = prediction_powered_mean(**data, lam=1.0)
    >>> round(ppi.estimate, 10), tuple(round(end, 3) for end in ppi.interval)
    (0.5, (0.402, 0.598))

    Tuned: lam = cov / ((1 + n / N) * var) = 0.01 / ((1 + 2 / 4) * 0.012) = 0.5556, where
    0.012 = 6 * 0.1**2 / 5 is the variance of the six judge values.

    >>> ppi = prediction_powered_mean(**data)
    >>> round(ppi.lam, 4), round(ppi.estimate, 10), (ppi.n_human, ppi.n_judged)
    (0.5556, 0.5, (2, 4))
    """
    if not 0.0 < alpha < 1.0:  # also rejects NaN
        raise ValueError(f"prediction_powered_mean: alpha must lie in (0, 1), got {alpha!r}.")
    terms = ppi_terms(y_labeled, yhat_labeled, yhat_unlabeled, lam)
    half_width = float(norm.ppf(1.0 - alpha / 2.0)) * terms.standard_error
    return PPIEstimate(
        estimate=terms.estimate,
        interval=(terms.estimate - half_width, terms.estimate + half_width),
        n_human=terms.n_human,
        n_judged=terms.n_judged,
        lam=terms.lam,
    )


def labels_to_halve_width(
    *,
    y_labeled: ArrayLike,
    yhat_labeled: ArrayLike,
    yhat_unlabeled: ArrayLike,
    lam: float | None = None,
) -> int | None:
    """How many more human-labelled queries would halve the PPI interval's width.

    Same inputs and ``lam`` as :func:`prediction_powered_mean` (the level does not matter:
    z cancels). With ``R = var(y - lam * yhat)`` on the human sample (the rectifier term) and
    ``I = lam**2 * var(yhat_unlabeled)`` (the judged term), the half-width is
    ``z * sqrt(R / n + I / N)``. Holding R, I, lam and N fixed (more people label queries the
    judges already judged), the number m of human labels that halves it solves::

        R / m + I / N = (R / n + I / N) / 4
        m = R / (R / (4 n) - 3 I / (4 N)) = 4 n / (1 - 3 n I / (N R))

    and the answer is ``ceil(m) - n``. When only the rectifier term counts (I / N << R / n) it
    is 3 n: four times the labels, half the width, the 1 / sqrt(n) law.

    Returns ``None`` when labelling cannot halve the width: when ``3 I / N >= R / n`` (the
    judged term alone is at least half of the current width, whatever m), or when m would
    exceed N (there are not that many judged queries to label). The answer is a plan, not a
    promise: R and lam are re-estimated on the larger sample. ``0`` when the width is already
    zero (``R = 0`` and ``I = 0``).

    Examples
    --------
    A constant judge (I = 0): the width follows 1 / sqrt(n), so 4 * 4 = 16 labels halve
    it, 12 more than the 4 there are.

    >>> labels_to_halve_width(y_labeled=[1, 0, 1, 0], yhat_labeled=[0.5] * 4,
    ...                       yhat_unlabeled=[0.5] * 20, lam=1.0)
    12

    The judges err by the same -0.2 on every labelled query (R = 0): the width is all
    judged term, which human labels do not shrink.

    >>> print(labels_to_halve_width(y_labeled=[0.6, 0.4], yhat_labeled=[0.8, 0.6],
    ...                             yhat_unlabeled=[0.8, 0.6, 0.6, 0.8], lam=1.0))
    None
    """
    terms = ppi_terms(y_labeled, yhat_labeled, yhat_unlabeled, lam)
    n, big_n = terms.n_human, terms.n_judged
    rectifier, imputed = terms.rectifier_variance, terms.imputed_variance
    if rectifier == 0.0 and imputed == 0.0:
        return 0
    room = rectifier / (4.0 * n) - 3.0 * imputed / (4.0 * big_n)
    if room <= 0.0:
        return None
    needed = math.ceil(rectifier / room - 1e-9)  # 1e-9: 4n computed as 400.0000001 is still 400
    if needed > big_n:
        return None
    return max(needed - n, 0)


def ppi_terms(
    y_labeled: ArrayLike, yhat_labeled: ArrayLike, yhat_unlabeled: ArrayLike, lam: float | None
) -> _Terms:
    """The PPI estimate's parts: ``lam``, the estimate ``lam * mean(yhat_unlabeled) +
    mean(y_labeled - lam * yhat_labeled)`` and the two variances its interval and the label
    plans are built from (``lam=None`` tunes it, as :func:`ppi_mean_ci` does).

    Examples:
        With ``lam = 1`` the estimate is the judges' mean over all queries (0.5) plus the
        mean rectifier ((1 - 1) + (0 - 1)) / 2 = -0.5:

        >>> terms = ppi_terms([1.0, 0.0], [1.0, 1.0], [1.0, 1.0, 0.0, 0.0], lam=1.0)
        >>> (terms.estimate, terms.rectifier_variance, terms.n_human, terms.n_judged)
        (0.0, 0.25, 2, 4)
    """
    y = _as_query_values(y_labeled, "y_labeled")
    yhat = _as_query_values(yhat_labeled, "yhat_labeled")
    yhat_all = _as_query_values(yhat_unlabeled, "yhat_unlabeled")
    if y.size != yhat.size:
        raise ValueError(
            f"PPI: y_labeled has {y.size} values but yhat_labeled has {yhat.size}; "
            "they must be the human and the judges' P@5 of the same queries."
        )
    if y.size < 2:
        raise ValueError(f"PPI: needs at least two human-labelled queries, got {y.size}.")
    if lam is None:
        lam = _tuned_lambda(y, yhat, yhat_all)
    elif not 0.0 <= lam <= 1.0:  # also rejects NaN
        raise ValueError(f"PPI: lam must lie in [0, 1], got {lam!r}.")
    lam = float(lam)
    rectifier = y - lam * yhat
    return _Terms(
        lam=lam,
        estimate=float(lam * yhat_all.mean() + rectifier.mean()),
        rectifier_variance=float(rectifier.var()),
        imputed_variance=float((lam * yhat_all).var()),
        n_human=int(y.size),
        n_judged=int(yhat_all.size),
    )


def _tuned_lambda(y: np.ndarray, yhat: np.ndarray, yhat_all: np.ndarray) -> float:
    """PPI++'s variance-minimising judges' weight for a mean (ppi-python's ``_calc_lam_glm``)."""
    n, big_n = y.size, yhat_all.size
    judged = np.concatenate([yhat, yhat_all])
    if judged.min() == judged.max():  # not var() == 0: the mean of 0.8s has rounding residue
        return 1.0
    covariance = float(((y - y.mean()) * (yhat - yhat.mean())).mean())
    judged_variance = float(judged.var(ddof=1))
    return float(np.clip(covariance / ((1.0 + n / big_n) * judged_variance), 0.0, 1.0))


def _as_query_values(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"PPI: {name} must be one value per query (1-D), got shape {array.shape}.")
    if array.size == 0:
        raise ValueError(f"PPI: {name} is empty; there is nothing to estimate from.")
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f"PPI: {name} holds a non-finite value ({array[bad]}) at position {bad}.")
    return array
