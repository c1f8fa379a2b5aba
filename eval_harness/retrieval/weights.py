"""The hybrid weights a search and a calibration use: the keyword weight paired with a
semantic weight, and the grid of semantic weights a calibration evaluates.

The keyword weight at semantic weight ``w`` is ``round(1 - w, 10)``: the value written to
config.yaml (:mod:`eval_harness.calibration.config_writeback` writes it there), so the P@5 a
calibration measures at a weight is exactly what hybrid search at the configured weights gets
afterwards. The grid is the ``calibration.grid`` range plus the default weight.
"""

from __future__ import annotations

import numpy as np

from eval_harness.errors import InvalidInput
from eval_harness.metrics.calibration import weight_grid
from eval_harness.settings import Settings

WEIGHT_DECIMALS = 10  # keyword = round(1 - semantic, 10): YAML shows 0.2, not 0.19999999999999996
MIN_GRID_STEP = 0.01
DEFAULT_WEIGHTS = weight_grid()  # 0.5, 0.6, ..., 0.9: the sweep's grid when none is given


def keyword_weight_for(semantic_weight: float) -> float:
    """The keyword weight paired with a semantic weight: ``1 - semantic``, rounded to 10
    decimals so that it is the double the YAML file shows (and hybrid search then uses)."""
    return round(1.0 - float(semantic_weight), WEIGHT_DECIMALS)


def grid_from_range(start: float, stop: float, step: float) -> np.ndarray:
    """Semantic weights ``start..stop`` (inclusive) by ``step`` within [0, 1], step >= 0.01."""
    if not MIN_GRID_STEP - 1e-12 <= step <= 1.0:
        raise InvalidInput(f"the grid step must lie between {MIN_GRID_STEP} and 1, got {step}.")
    return weight_grid(start=start, stop=stop, step=step)


def configured_grid(settings: Settings) -> np.ndarray:
    """The semantic weights a calibration with ``settings`` evaluates (the grid and the
    default weight), ascending."""
    options = settings.calibration
    return grid_with_default(grid_from_range(options.grid.start, options.grid.stop,
                                             options.grid.step), options.default_weight)


def grid_or_default(grid) -> np.ndarray:
    """``grid`` as an array of semantic weights; None is the default grid 0.5..0.9."""
    return weight_grid() if grid is None else np.asarray(grid, dtype=np.float64)


def grid_with_default(grid, default_weight: float) -> np.ndarray:
    """The grid plus ``default_weight``, ascending and without duplicates (the default weight
    is always evaluated)."""
    weights = grid_or_default(grid)
    if weights.ndim != 1 or weights.size == 0:
        raise ValueError("the weight grid must hold at least one semantic weight.")
    if not np.all((weights >= 0.0) & (weights <= 1.0)) or not 0.0 <= default_weight <= 1.0:
        raise ValueError("semantic weights and the default weight must lie in [0, 1].")
    weights = np.round(np.append(weights, default_weight), 10)
    return np.unique(weights)  # sorted; drops the default when the grid already holds it
