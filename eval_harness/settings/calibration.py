"""The weights sections of ``config.yaml``: ``hybrid_search:`` (the global hybrid weights,
:class:`HybridWeights`) and ``calibration:`` (the weight grid, statistics and the P@5 verdict
bands, :class:`CalibrationSettings`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, Strict, model_validator
from pydantic.dataclasses import dataclass

from eval_harness.metrics.calibration import weight_grid
from eval_harness.settings.errors import problem, sentence
from eval_harness.settings.values import SECTION, Count, Natural, Number, OrEmpty, Share


@dataclass(frozen=True, config=SECTION)
class HybridWeights:
    """The hybrid weights of a search (``hybrid_search:`` or a dataset's calibrated ones);
    ``keyword`` is ``1 - semantic`` when only ``semantic`` is given."""

    semantic: Number = 0.7       # the weight of the vector side, 0..1
    keyword: Number = 0.3        # the weight of the keyword side (default 1 - semantic)
    candidate_depth: Count = 50  # candidates each side fetches before the fusion

    @model_validator(mode="before")
    @classmethod
    def _keyword_completes_semantic(cls, data: Any) -> Any:
        if isinstance(data, dict) and "keyword" not in data \
                and isinstance(data.get("semantic"), (int, float)) \
                and not isinstance(data.get("semantic"), bool):
            return {**data, "keyword": round(1.0 - data["semantic"], 10)}
        return data

    @model_validator(mode="after")
    def _weights_in_range(self) -> HybridWeights:
        if not 0.0 <= self.semantic <= 1.0 or not 0.0 <= self.keyword <= 1.0:
            raise sentence("hybrid_search weights must lie in [0, 1].")
        return self


@dataclass(frozen=True, config=SECTION)
class DecisionSettings:
    """``calibration.decision``: when a calibration changes the weights in force
    (:mod:`eval_harness.calibration.decision`)."""

    # change only when the grid-adjusted p <= alpha ...
    alpha: Annotated[float, Strict(), Field(gt=0.0, lt=1.0)] = 0.05
    min_gain: Annotated[float, Strict(), Field(ge=0.0)] = 0.0  # ... and the P@5 gain this
    # sign-flip permutations of the max-statistic test
    permutations: Annotated[int, Strict(), Field(ge=100)] = 10_000


@dataclass(frozen=True, config=SECTION)
class GridSettings:
    """``calibration.grid``: semantic weights start..stop by step; keyword = 1 - semantic."""

    start: Number = 0.5          # the first semantic weight
    stop: Number = 0.9           # the last
    step: Number = 0.1           # 0.01 .. 1

    @model_validator(mode="after")
    def _a_grid(self) -> GridSettings:
        if not 0.01 - 1e-12 <= self.step <= 1.0:
            raise problem("must lie between 0.01 and 1.", key="step")
        try:
            weight_grid(start=self.start, stop=self.stop, step=self.step)
        except ValueError as exc:
            raise sentence(f"calibration.grid: {exc}") from None
        return self


@dataclass(frozen=True, config=SECTION)
class VerdictSettings:
    """``calibration.verdict``: P@5 >= full_success is full success, partial_success <= P@5
    < full_success partial success."""

    full_success: Number = 0.75      # P@5 at or above it: full success
    partial_success: Number = 0.70   # P@5 at or above it (below full_success): partial success

    @model_validator(mode="after")
    def _ordered(self) -> VerdictSettings:
        if not 0.0 <= self.partial_success <= self.full_success <= 1.0:
            raise sentence("calibration.verdict needs 0 <= partial_success <= "
                           "full_success <= 1.")
        return self


@dataclass(frozen=True, config=SECTION)
class CalibrationSettings:
    """The ``calibration:`` section: the weight grid, statistics and the P@5 verdict bands."""

    grid: Annotated[GridSettings, OrEmpty] = GridSettings()
    default_weight: Share = 0.7      # the uplift is measured against this semantic weight
    rrf_k: Natural = 60              # reciprocal rank fusion constant (reference method)
    cv_folds: Annotated[int, Strict(), Field(ge=2)] = 5   # k of the cross-validated P@5
    seed: Natural = 0                # folds, bootstrap and randomization test
    bootstrap_resamples: Count = 10_000   # resamples of the bootstrap intervals
    verdict: Annotated[VerdictSettings, OrEmpty] = VerdictSettings()
    # below this Judged@5 (share of a weight's top 5 carrying any label), P@5 there is only
    # a lower bound and every output says so
    min_judged: Share = 0.9
    decision: Annotated[DecisionSettings, OrEmpty] = DecisionSettings()
