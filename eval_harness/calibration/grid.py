"""The calibration grid's points: one weight's mean metrics, and how the outputs write a weight.

A :class:`GridPoint` is read off a weight sweep (:func:`eval_harness.retrieval.sweep.
sweep_weights`), with its P@5 query bootstrap interval
(:func:`eval_harness.metrics.calibration.grid_p_at_5_intervals`) when it is a point of the
grid searched; every calibration output names weights with :func:`weight_label`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eval_harness.metrics.calibration import grid_p_at_5_intervals
from eval_harness.retrieval.sweep import SweepResult


@dataclass(frozen=True)
class GridPoint:
    """Mean metrics over all ground-truth queries at one pair of weights."""

    semantic_weight: float
    keyword_weight: float
    p_at_5: float
    recall_at_5: float
    ndcg_at_10: float
    mrr_at_10: float
    judged_at_5: float = math.nan  # share of the top 5 with any label (:mod:`.judged_at_5`)
    p_at_5_low: float = math.nan  # P@5 interval, level 1 - alpha (:mod:`.intervals`); NaN: none
    p_at_5_high: float = math.nan

    def to_dict(self) -> dict:
        return {"semantic_weight": self.semantic_weight, "keyword_weight": self.keyword_weight,
                "p_at_5": self.p_at_5, "recall_at_5": self.recall_at_5,
                "ndcg_at_10": self.ndcg_at_10, "mrr_at_10": self.mrr_at_10,
                **{name: None if math.isnan(value) else value for name, value in (
                    ("judged_at_5", self.judged_at_5), ("p_at_5_low", self.p_at_5_low),
                    ("p_at_5_high", self.p_at_5_high))}}


def grid_points(sweep: SweepResult, *, confidence: float, resamples: int,
                seed: int) -> tuple[GridPoint, ...]:
    """Every weight's means, with its P@5's query bootstrap interval at ``confidence``."""
    low, high = grid_p_at_5_intervals(sweep.per_query_p_at_5, confidence=confidence,
                                      n_resamples=resamples, seed=seed)
    return tuple(GridPoint(float(sweep.semantic_weights[i]), float(sweep.keyword_weights[i]),
                           float(sweep.p_at_5[i]), float(sweep.recall_at_5[i]),
                           float(sweep.ndcg_at_10[i]), float(sweep.mrr_at_10[i]),
                           float(sweep.judged_at_5[i]), float(low[i]), float(high[i]))
                 for i in range(sweep.semantic_weights.size))


def grid_point(sweep: SweepResult, i: int) -> GridPoint:
    """The means at row ``i`` of ``sweep``, without an interval."""
    return GridPoint(float(sweep.semantic_weights[i]), float(sweep.keyword_weights[i]),
                     float(sweep.p_at_5[i]), float(sweep.recall_at_5[i]),
                     float(sweep.ndcg_at_10[i]), float(sweep.mrr_at_10[i]),
                     float(sweep.judged_at_5[i]))


def weight_label(weight: float) -> str:
    """0.7 -> "0.70", 0.05 -> "0.05", 0.125 -> "0.125": at least two decimals, exact.

    >>> weight_label(0.7), weight_label(0.05), weight_label(0.125), weight_label(1.0)
    ('0.70', '0.05', '0.125', '1.00')
    """
    text = f"{weight:.10f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"
