"""Drift of a judge on a frozen anchor set: how far today's verdicts moved from the frozen ones.

Two figures, each with an interval, and the decision rule of the ``judge_drift`` check:

* :func:`wilson_lower_bound`: the lower Wilson bound of a flip rate, vectorised (the
  simulation of the decision rule draws thousands of anchor sets at once);
* :func:`drift_alarm`: the rule itself, "the flip rate's lower bound exceeds the ceiling";
* :func:`paired_shift`: the mean paired score shift (today minus frozen) with a Student t
  interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t


def wilson_lower_bound(flips, n, *, confidence: float = 0.95) -> np.ndarray:
    """The lower end of the two-sided Wilson score interval of ``flips`` out of ``n`` (both
    integers or integer arrays of one shape), as an array; the same value as
    :func:`eval_harness.metrics.proportions.wilson_interval`'s first element::

        lower = (flips + z**2/2) / (n + z**2)
                - z * sqrt(n) / (n + z**2) * sqrt(p * (1 - p) + z**2 / (4 * n)),  p = flips/n

    exactly 0 at ``flips == 0``. Degenerate input: ``n <= 0`` where given, counts outside
    [0, n] and a confidence outside (0, 1) raise ``ValueError``.

    Examples
    --------
    15 flips of 100 anchors at 95% (z**2 = 3.8415): centre = 16.9207 / 103.8415 = 0.16295,
    half-width = 1.95996 * 10 / 103.8415 * sqrt(0.1275 + 0.0096) = 0.18875 * 0.37027 = 0.06989,
    lower = 0.0931.

    >>> round(float(wilson_lower_bound(15, 100)), 4)
    0.0931
    >>> wilson_lower_bound(np.array([0, 5]), 10).round(4).tolist()   # 5 of 10: see wilson_interval
    [0.0, 0.2366]
    """
    flips, n = np.asarray(flips), np.asarray(n)
    if np.any(n <= 0):
        raise ValueError("wilson_lower_bound: n must be positive.")
    if np.any(flips < 0) or np.any(flips > n):
        raise ValueError("wilson_lower_bound: flips must lie in [0, n].")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"wilson_lower_bound: confidence must lie in (0, 1), got {confidence!r}.")
    z = float(norm.ppf(0.5 + confidence / 2.0))
    z2 = z * z
    p = flips / n
    centre = (flips + z2 / 2.0) / (n + z2)
    half = z * np.sqrt(n) / (n + z2) * np.sqrt(p * (1.0 - p) + z2 / (4.0 * n))
    return np.where(flips == 0, 0.0, np.maximum(0.0, centre - half))


def drift_alarm(flips, n, *, max_flip_rate: float, confidence: float = 0.95):
    """True where the judge has drifted: the lower Wilson bound of ``flips / n`` exceeds
    ``max_flip_rate`` (so a flip rate merely at the ceiling, or too few anchors to tell, does
    not alarm). Vectorised like :func:`wilson_lower_bound`; a bool for scalar input.

    Examples
    --------
    15 of 100 anchors flipped: lower bound 0.0931 (see :func:`wilson_lower_bound`), above a
    ceiling of 0.05, below one of 0.10.

    >>> drift_alarm(15, 100, max_flip_rate=0.05), drift_alarm(15, 100, max_flip_rate=0.10)
    (True, False)
    """
    alarm = wilson_lower_bound(flips, n, confidence=confidence) > max_flip_rate
    return bool(alarm) if np.ndim(alarm) == 0 else alarm


def paired_shift(before: Sequence[float] | np.ndarray, after: Sequence[float] | np.ndarray, *,
                 confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """Mean of ``after - before`` over paired scores with its Student t interval::

        d = after - before,  mean = sum(d) / n,  s = sd(d, ddof=1)
        interval = mean -+ t_{(1 + confidence)/2, n-1} * s / sqrt(n)

    Degenerate input: no pair raises ``ValueError``; one pair has no interval (None, None);
    identical differences give the zero-width interval (mean, mean). Lengths must match.

    Examples
    --------
    Shifts 0.1, 0.2, 0.3: mean 0.2, s = 0.1, t_{0.975, 2} = 4.3027, half-width
    4.3027 * 0.1 / sqrt(3) = 0.2484.

    >>> mean, low, high = paired_shift([0.5, 0.5, 0.5], [0.6, 0.7, 0.8])
    >>> round(mean, 4), round(low, 4), round(high, 4)
    (0.2, -0.0484, 0.4484)
    """
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if b.shape != a.shape:
        raise ValueError("paired_shift: before and after must have the same length.")
    if b.size == 0:
        raise ValueError("paired_shift: no pair to compare.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"paired_shift: confidence must lie in (0, 1), got {confidence!r}.")
    d = a - b
    mean = float(d.mean())
    if d.size == 1:
        return mean, None, None
    half = float(student_t.ppf(0.5 + confidence / 2.0, d.size - 1)) * float(d.std(ddof=1)) \
        / math.sqrt(d.size)
    return mean, mean - half, mean + half
