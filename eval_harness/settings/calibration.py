"""The weights sections of ``config.yaml``: ``hybrid_search:`` (the global hybrid weights,
:class:`HybridWeights`) and ``calibration:`` (the weight grid, statistics and the P@5 verdict
bands, :class:`CalibrationSettings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_harness.metrics.calibration import weight_grid
from eval_harness.settings.errors import ConfigError
from eval_harness.settings.values import mapping_of, number_of

HYBRID_SEARCH_KEYS = ("semantic", "keyword", "candidate_depth")


@dataclass(frozen=True)
class HybridWeights:
    """The hybrid weights of a search (``hybrid_search:`` or a dataset's calibrated ones)."""

    semantic: float = 0.7
    keyword: float = 0.3
    candidate_depth: int = 50


@dataclass(frozen=True)
class DecisionSettings:
    """``calibration.decision``: when a calibration changes the weights in force
    (:mod:`eval_harness.calibration.decision`)."""

    alpha: float = 0.05          # change only when the grid-adjusted p <= alpha ...
    min_gain: float = 0.0        # ... and the gain in P@5 is at least this (and positive)
    permutations: int = 10_000   # sign-flip permutations of the max-statistic test


@dataclass(frozen=True)
class CalibrationSettings:
    """The ``calibration:`` section: the weight grid, statistics and the P@5 verdict bands."""

    grid_start: float = 0.5          # semantic weights start..stop by step; keyword = 1 - semantic
    grid_stop: float = 0.9
    grid_step: float = 0.1           # 0.01 .. 1
    default_weight: float = 0.7      # the uplift is measured against this semantic weight
    rrf_k: int = 60                  # reciprocal rank fusion constant (reference method)
    cv_folds: int = 5                # k of the cross-validated P@5
    seed: int = 0                    # folds, bootstrap and randomization test
    bootstrap_resamples: int = 10_000
    full_success: float = 0.75       # verdict: P@5 >= full_success
    partial_success: float = 0.70    # verdict: partial_success <= P@5 < full_success
    # below this Judged@5 (share of a weight's top 5 carrying any label), P@5 there is only
    # a lower bound and every output says so
    min_judged: float = 0.9
    decision: DecisionSettings = DecisionSettings()


def parse_hybrid(raw: Mapping[str, Any]) -> HybridWeights:
    section = mapping_of(raw, "hybrid_search", HYBRID_SEARCH_KEYS)
    semantic = number_of(section, "semantic", 0.7, "hybrid_search")
    keyword = number_of(section, "keyword", round(1.0 - semantic, 10), "hybrid_search")
    depth = section.get("candidate_depth", 50)
    if not 0.0 <= semantic <= 1.0 or not 0.0 <= keyword <= 1.0:
        raise ConfigError("hybrid_search weights must lie in [0, 1].")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError("'hybrid_search.candidate_depth' must be a positive integer.")
    return HybridWeights(semantic, keyword, depth)


def parse_calibration(raw: Mapping[str, Any]) -> CalibrationSettings:
    section = mapping_of(raw, "calibration", ("grid", "default_weight", "rrf_k", "cv_folds",
                                              "seed", "bootstrap_resamples", "verdict",
                                              "min_judged", "decision"))
    grid = mapping_of(section, "grid", ("start", "stop", "step"), where="calibration")
    bands = mapping_of(section, "verdict", ("full_success", "partial_success"),
                       where="calibration")
    d = CalibrationSettings()
    start = number_of(grid, "start", d.grid_start, "calibration.grid")
    stop = number_of(grid, "stop", d.grid_stop, "calibration.grid")
    step = number_of(grid, "step", d.grid_step, "calibration.grid")
    if not 0.01 - 1e-12 <= step <= 1.0:
        raise ConfigError("'calibration.grid.step' must lie between 0.01 and 1.")
    try:
        weight_grid(start=start, stop=stop, step=step)
    except ValueError as exc:
        raise ConfigError(f"calibration.grid: {exc}") from None
    default = number_of(section, "default_weight", d.default_weight, "calibration")
    full = number_of(bands, "full_success", d.full_success, "calibration.verdict")
    partial = number_of(bands, "partial_success", d.partial_success, "calibration.verdict")
    if not 0.0 <= default <= 1.0:
        raise ConfigError("'calibration.default_weight' must lie in [0, 1].")
    min_judged = number_of(section, "min_judged", d.min_judged, "calibration")
    if not 0.0 <= min_judged <= 1.0:
        raise ConfigError(f"'calibration.min_judged' must lie in [0, 1] (a share of the top 5), "
                          f"got {min_judged:g}.")
    if not 0.0 <= partial <= full <= 1.0:
        raise ConfigError("calibration.verdict needs 0 <= partial_success <= "
                          "full_success <= 1.")
    integers = {}
    for key, low in (("rrf_k", 0), ("cv_folds", 2), ("seed", 0), ("bootstrap_resamples", 1)):
        value = section.get(key, getattr(d, key))
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"'calibration.{key}' must be an integer >= {low}.")
        integers[key] = value
    return CalibrationSettings(start, stop, step, default, full_success=full,
                               partial_success=partial, min_judged=min_judged,
                               decision=parse_decision(section), **integers)



def parse_decision(section: Mapping[str, Any]) -> DecisionSettings:
    """``calibration.decision``: alpha in (0, 1), min_gain >= 0, permutations >= 100."""
    raw = mapping_of(section, "decision", ("alpha", "min_gain", "permutations"),
                     where="calibration")
    d = DecisionSettings()
    alpha = number_of(raw, "alpha", d.alpha, "calibration.decision")
    min_gain = number_of(raw, "min_gain", d.min_gain, "calibration.decision")
    permutations = raw.get("permutations", d.permutations)
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"'calibration.decision.alpha' must lie strictly between 0 and 1, "
                          f"got {alpha:g}.")
    if min_gain < 0.0:
        raise ConfigError(f"'calibration.decision.min_gain' must be >= 0 (a P@5 gain), "
                          f"got {min_gain:g}.")
    if isinstance(permutations, bool) or not isinstance(permutations, int) \
            or permutations < 100:
        raise ConfigError(f"'calibration.decision.permutations' must be an integer >= 100, "
                          f"got {permutations!r}.")
    return DecisionSettings(alpha, min_gain, permutations)
