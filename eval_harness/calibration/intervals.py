"""Each calibration grid point's P@5 interval as the outputs show it.

The interval is :func:`eval_harness.metrics.calibration.grid_p_at_5_intervals`: a seeded
percentile bootstrap over the queries at level ``1 - calibration.decision.alpha``, one
weight at a time. It says how precisely each weight's P@5 is known; whether one weight beats
another is the decision's test (:mod:`.decision`), not two intervals compared.
"""

from __future__ import annotations

import math

from eval_harness.calibration.grid import GridPoint
from eval_harness.calibration.result import CalibrationResult


def interval_level(alpha: float | None) -> str:
    """``"95% "`` for alpha 0.05; empty when the level is unknown (a grid from before it)."""
    return "" if alpha is None or math.isnan(alpha) else f"{1 - alpha:.0%} "


def format_interval(low: float | None, high: float | None) -> str:
    """``[low, high]`` to four decimals; "n/a" when not computed (an older history)."""
    if any(value is None or math.isnan(value) for value in (low, high)):
        return "n/a"
    return f"[{low:.4f}, {high:.4f}]"


def p_at_5_interval(point: GridPoint) -> str:
    """A :class:`~eval_harness.calibration.grid.GridPoint`'s P@5 interval, formatted."""
    return format_interval(point.p_at_5_low, point.p_at_5_high)


def interval_note(result: CalibrationResult) -> str:
    """How a :class:`~eval_harness.calibration.result.CalibrationResult`'s P@5 intervals were
    computed, in one line."""
    alpha = result.decision.alpha
    return (f"P@5 interval: {interval_level(alpha)}percentile bootstrap over the "
            f"{result.n_queries} queries ({result.bootstrap_resamples} resamples, seeded): "
            f"each describes one weight's P@5, not a difference between weights (the "
            f"decision's test compares those)")
