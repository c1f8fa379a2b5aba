"""The result of calibrating one dataset: one frozen object from the calibration
(:func:`eval_harness.calibration.run.calibrate_dataset`) to every output.

The CLI prints it (:mod:`.text`, or :meth:`CalibrationResult.to_dict` as JSON) and publishes
its :attr:`~CalibrationResult.outcome`; the Dagster asset logs it and attaches its figures as
metadata; the history and the report are written from it (:mod:`.workflow`). Only the
history turns it into a table (:func:`eval_harness.calibration.history.grid_frame`), and only
readers of the history (Dagster's publishing asset and check, the run report) read a table
back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from eval_harness.calibration.decision import CalibrationOutcome, WeightDecision
from eval_harness.calibration.grid import GridPoint
from eval_harness.calibration.judged_at_5 import JudgedSummary, judged_summary
from eval_harness.calibration.ppi_p_at_5 import CorrectedEstimates
from eval_harness.calibration.verdict import Verdict, VerdictBands, VerdictFigure
from eval_harness.metrics.calibration import CrossValidation, Uplift
from eval_harness.retrieval.sweep import CandidateSet, MethodResult, SweepResult


@dataclass(frozen=True)
class CalibrationResult:
    dataset: str
    n_queries: int
    n_documents: int
    candidate_depth: int
    grid: tuple[GridPoint, ...]  # ascending semantic weight
    default_added_to_grid: bool
    p_at_5_ceiling: float  # mean min(5, relevant) / 5: a perfect ranker on this ground truth
    p_at_5_candidate_ceiling: float  # same, counting only relevant docs among the candidates
    current_weight: float  # the semantic weight in force (tie-break target)
    best: GridPoint
    default: GridPoint
    # the weights in force before the decision (a grid point, or swept alone when their
    # keyword weight is not 1 - semantic), and whether they were added to the grid
    in_force: GridPoint
    in_force_added_to_grid: bool
    decision: WeightDecision  # whether the best grid point replaces the weights in force
    figure: VerdictFigure  # the P@5 the verdict is given on, and the verdict (:mod:`.verdict`)
    bands: VerdictBands
    # descriptive figures, which decide nothing: the uplift over the default weight, the
    # cross-validated P@5 (None with fewer than 2 queries), reciprocal rank fusion
    uplift: Uplift
    bootstrap_resamples: int
    cross_validation: CrossValidation | None
    rrf_k: int
    rrf: MethodResult
    calibrated_at: datetime
    seconds: dict[str, float]
    candidates: CandidateSet = field(repr=False, compare=False)
    sweep: SweepResult = field(repr=False, compare=False)
    label_source: str = "human"  # "human" (expected_docs) or "judges" (agreement.labels)
    judge_labels: dict | None = None  # with judge labels: the rule and pairs per source
    # P@5 corrected by a human sample (:mod:`.ppi_p_at_5`); None without one
    corrected: CorrectedEstimates | None = field(default=None, repr=False, compare=False)
    min_judged: float = 0.9  # calibration.min_judged: below it, P@5 is a lower bound
    # {origin: queries} of the queries calibrated on (dataset, generated, users)
    query_origins: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        return self.figure.verdict

    @property
    def judged(self) -> JudgedSummary:
        """The grid weights (the best and the weights in force named) whose Judged@5 falls
        below ``min_judged``, so that their P@5 is a lower bound (:mod:`.judged_at_5`)."""
        return judged_summary(
            self.dataset, ((p.semantic_weight, p.keyword_weight, p.judged_at_5)
                           for p in self.grid),
            min_judged=self.min_judged,
            named={"best": self.best.semantic_weight, "in force": self.current_weight})

    @property
    def verdict_point(self) -> GridPoint:
        """The weights in force after the decision, where the verdict is given: the best grid
        point when the decision changed the weights to it, else the weights kept."""
        return self.best if self.decision.changed else self.in_force

    @property
    def verdict_p_at_5(self) -> float:
        """The P@5 the verdict is given on: at the weights in force after the decision
        (:attr:`verdict_point`) on the complete ground truth, or its PPI-corrected estimate
        (:mod:`.verdict`)."""
        return self.figure.p_at_5

    @property
    def outcome(self) -> CalibrationOutcome:
        """What publishing writes of this calibration."""
        return CalibrationOutcome(
            dataset=self.dataset, best_semantic=self.best.semantic_weight,
            decision=self.decision, figure=self.figure,
            label_source=self.figure.label_source or self.label_source,
            calibrated_at=self.calibrated_at)

    def to_dict(self) -> dict:
        """JSON-safe (plain floats, no NaN; None where a value does not exist)."""
        cv = self.cross_validation
        data = {
            "dataset": self.dataset,
            "label_source": self.label_source,
            "judge_labels": self.judge_labels,
            "queries": self.n_queries,
            "query_origins": dict(self.query_origins),
            "documents": self.n_documents,
            "candidate_depth": self.candidate_depth,
            "calibrated_at": self.calibrated_at.isoformat(),
            "current_weight": self.current_weight,
            "grid": [dict(point.to_dict(), p_at_5_ceiling=self.p_at_5_ceiling)
                     for point in self.grid],
            "default_added_to_grid": self.default_added_to_grid,
            "p_at_5_ceiling": self.p_at_5_ceiling,
            "p_at_5_candidate_ceiling": self.p_at_5_candidate_ceiling,
            "best": self.best.to_dict(),
            "default": self.default.to_dict(),
            "decision": self.decision.to_dict(),
            "in_force_added_to_grid": self.in_force_added_to_grid,
            "uplift": {
                "absolute": self.uplift.absolute, "relative": self.uplift.relative,
                "ci_low": self.uplift.ci_low, "ci_high": self.uplift.ci_high,
                "confidence": self.uplift.confidence, "p_value": self.uplift.p_value,
                "bootstrap_resamples": self.bootstrap_resamples},
            "cross_validated_p_at_5": None if cv is None else {
                "p_at_5": cv.p_at_5, "folds": len(cv.fold_sizes),
                "optimism": self.best.p_at_5 - cv.p_at_5,
                "fold_weights": list(cv.fold_weights), "fold_p_at_5": list(cv.fold_p_at_5),
                "fold_sizes": list(cv.fold_sizes)},
            "rrf": {"k": self.rrf_k, "p_at_5": self.rrf.p_at_5,
                    "recall_at_5": self.rrf.recall_at_5, "ndcg_at_10": self.rrf.ndcg_at_10,
                    "mrr_at_10": self.rrf.mrr_at_10},
            "verdict": dict(self.figure.to_dict(),
                            full_success=self.bands.full_success,
                            partial_success=self.bands.partial_success),
            "judged": self.judged.to_dict(),
            "seconds": dict(self.seconds),
        }
        return data if self.corrected is None else self.corrected.add_to_json(data)
