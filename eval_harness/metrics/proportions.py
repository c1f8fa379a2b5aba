"""Confidence intervals for a binomial proportion (a pass rate)."""

from __future__ import annotations

import math
from numbers import Integral

from scipy.stats import norm


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` trials.

    With ``p = successes / n`` and ``z`` the ``(1 + confidence) / 2`` quantile of the standard
    normal distribution (1.959964 for 95%)::

        centre     = (successes + z**2 / 2) / (n + z**2)
        half_width = z * sqrt(n) / (n + z**2) * sqrt(p * (1 - p) + z**2 / (4 * n))
        interval   = (centre - half_width, centre + half_width)

    Reference: E. B. Wilson, "Probable inference, the law of succession, and statistical
    inference", JASA 22 (1927) 209-212; method 3 of R. G. Newcombe, "Two-sided confidence
    intervals for the single proportion", Statistics in Medicine 17 (1998) 857-872. The same
    as statsmodels' ``proportion_confint(successes, n, alpha=1 - confidence, method="wilson")``.

    Unlike the normal (Wald) interval it stays inside [0, 1] and is not degenerate at 0 or n
    successes: 0 of 20 gives (0, 0.1611), 20 of 20 gives (0.8389, 1); those end points are
    returned exactly (0.0 and 1.0), not as the formula's rounding residue. Degenerate input:
    ``n == 0`` has no information and raises ``ValueError`` (the caller reports "no answers" instead
    of an interval), as do counts outside ``0 <= successes <= n`` and a confidence outside (0, 1).

    Examples
    --------
    5 of 10 at 95% (z = 1.96, z**2 = 3.8415): centre = (5 + 1.9208) / 13.8415 = 0.5,
    half-width = 1.96 * 3.1623 / 13.8415 * sqrt(0.25 + 0.0960) = 0.4478 * 0.5882 = 0.2634.

    >>> low, high = wilson_interval(5, 10)
    >>> round(low, 4), round(high, 4)
    (0.2366, 0.7634)
    >>> low, high = wilson_interval(0, 20)   # centre = half-width = 1.9208 / 23.8415
    >>> low, round(high, 4)
    (0.0, 0.1611)
    """
    for name, value in (("successes", successes), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise TypeError(f"wilson_interval: {name} must be an integer, got {value!r}.")
    if n <= 0:
        raise ValueError(f"wilson_interval: n must be positive, got {n}.")
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: successes must lie in [0, n={n}], got {successes}.")
    if not 0.0 < confidence < 1.0:  # also rejects NaN
        raise ValueError(f"wilson_interval: confidence must lie in (0, 1), got {confidence!r}.")
    z = float(norm.ppf(0.5 + confidence / 2.0))
    z2 = z * z
    p = successes / n
    centre = (successes + z2 / 2.0) / (n + z2)
    half_width = z * math.sqrt(n) / (n + z2) * math.sqrt(p * (1.0 - p) + z2 / (4.0 * n))
    # At 0 (or n) successes the bound is exactly 0 (or 1); the subtraction is off by rounding.
    low = 0.0 if successes == 0 else max(0.0, centre - half_width)
    high = 1.0 if successes == n else min(1.0, centre + half_width)
    return low, high
