"""Calibrate a dataset's hybrid weights on its ground truth, and give the P@5 verdict.

Stories 2.8 and 2.9: fetch every ground-truth query's candidate union with both raw scores
once (:func:`eval_harness.retrieval.hybrid.candidate_scores`), sweep all semantic weights
in numpy (:func:`eval_harness.retrieval.sweep.sweep_weights`, bit-identical to hybrid
search at each weight, ties by document id), then

* the best weight: highest mean P@5, ties to the weight closest to the one in force;
* the decision (:mod:`eval_harness.calibration.decision`): the best grid point replaces the
  weights in force only when its gain over them survives a max-statistic permutation test
  over the grid (``calibration.decision``), else the weights in force are kept;
* its uplift over the default 0.7 (absolute, relative, paired bootstrap interval, paired
  randomization p-value) and the k-fold cross-validated P@5 (how much is overfitting);
* reciprocal rank fusion on the same candidates, as a reference method;
* the verdict on the complete ground truth at the best weight: ``>= full_success`` full
  success, ``>= partial_success`` partial success, else failure.

The keyword weight at semantic weight ``w`` is ``round(1 - w, 10)``: the value written to
config.yaml, so the calibrated P@5 is exactly what hybrid search at the configured weights
gets afterwards. The default weight and the weights in force are always evaluated; they are
added to the grid when the grid does not hold them (weights in force whose keyword weight is
not ``1 - semantic`` are swept on their own, for the decision).

The labels are the human ones (``expected_docs``: BEIR qrels, the RAG system's own ground
truth) or the judges' (:mod:`eval_harness.agreement.labels`): ``labels="human"|"judges"``,
by default human when the dataset has expected_docs, else judges. Every output names the
source (``label_source``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any
from datetime import datetime, timezone

import numpy as np
import psycopg

from eval_harness.agreement import labels as judge_labels
from eval_harness.calibration.judged import JudgedSummary, judged_summary
from eval_harness.calibration.decision import (JUDGES_UNCORRECTED, WeightDecision,
                                               decide_weights, with_judged_gain)
from eval_harness.calibration.verdict import (VERDICT_LABELS, VERDICT_MEANING,  # noqa: F401
                                              VerdictBands, VerdictFigure, verdict_figure,
                                              verdict_sentence)  # (re-exported)
from eval_harness.metrics.calibration import (
    DEFAULT_SEMANTIC_WEIGHT, CrossValidation, Uplift, Verdict, cross_validated_p_at_5,
    grid_p_at_5_intervals, precision_verdict, uplift_over_default)
from eval_harness.retrieval.hybrid import candidate_scores, dataset_info
from eval_harness.retrieval.report import load_qrels
from eval_harness.metrics.ranking import PRECISION_CUTOFF
from eval_harness.retrieval.sweep import (CandidateSet, MethodResult, SweepResult, rank_top_k,
                                          reciprocal_rank_fusion, sweep_weights)
from eval_harness.retrieval.weights import (grid_from_range, grid_or_default, grid_with_default,
                                            keyword_weight_for)
from eval_harness.settings import AgreementSettings, DecisionSettings, Settings
from eval_harness.datasets import ground_truth
from eval_harness.calibration.text import (decision_line, format_table,  # noqa: F401
                                           label_source_line, summary_lines,
                                           weight_label)  # (re-exported)

@dataclass(frozen=True)
class GridPoint:
    """Mean metrics over all ground-truth queries at one pair of weights."""

    semantic_weight: float
    keyword_weight: float
    p_at_5: float
    recall_at_5: float
    ndcg_at_10: float
    mrr_at_10: float
    judged_at_5: float = math.nan  # share of the top 5 with any label (:mod:`.judged`)
    p_at_5_low: float = math.nan  # P@5 interval, level 1 - alpha (:mod:`.intervals`); NaN: none
    p_at_5_high: float = math.nan

    def to_dict(self) -> dict:
        return {"semantic_weight": self.semantic_weight, "keyword_weight": self.keyword_weight,
                "p_at_5": self.p_at_5, "recall_at_5": self.recall_at_5,
                "ndcg_at_10": self.ndcg_at_10, "mrr_at_10": self.mrr_at_10,
                **{name: None if math.isnan(value) else value for name, value in (
                    ("judged_at_5", self.judged_at_5), ("p_at_5_low", self.p_at_5_low),
                    ("p_at_5_high", self.p_at_5_high))}}


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
    uplift: Uplift
    bootstrap_resamples: int
    cross_validation: CrossValidation | None  # None with fewer than 2 queries
    rrf_k: int
    rrf: MethodResult
    verdict: Verdict
    bands: VerdictBands
    calibrated_at: datetime
    seconds: dict[str, float]
    candidates: CandidateSet = field(repr=False, compare=False)
    sweep: SweepResult = field(repr=False, compare=False)
    label_source: str = "human"  # "human" (expected_docs) or "judges" (agreement.labels)
    judge_labels: dict | None = None  # with judge labels: the rule and pairs per source
    # P@5 corrected by a human sample (eval_harness.calibration.corrected); None without one
    corrected: Any = field(default=None, repr=False, compare=False)
    min_judged: float = 0.9  # calibration.min_judged: below it, P@5 is a lower bound

    @property
    def judged(self) -> JudgedSummary:
        """The grid weights (the best and the weights in force named) whose Judged@5 falls
        below ``min_judged``, so that their P@5 is a lower bound (:mod:`.judged`)."""
        return judged_summary(
            self.dataset, ((p.semantic_weight, p.keyword_weight, p.judged_at_5)
                           for p in self.grid),
            min_judged=self.min_judged,
            named={"best": self.best.semantic_weight, "in force": self.current_weight})
    # whether the best grid point replaces the weights in force (calibration.decision)
    decision: WeightDecision | None = None
    in_force_added_to_grid: bool = False
    # the metrics at the weights in force before the decision (a grid point, or swept alone
    # when their keyword weight is not 1 - semantic); None for a result built without them
    in_force: GridPoint | None = None

    @property
    def verdict_point(self) -> GridPoint:
        """The weights in force after the decision, where the verdict is given: the best grid
        point when the decision changed the weights to it (or none was made), else the weights
        kept."""
        if self.decision is None or self.decision.changed or self.in_force is None:
            return self.best
        return self.in_force

    @property
    def verdict_weights(self) -> str | None:
        """``changed`` / ``kept``: how the verdict's weights came to be in force (None: no
        decision was made, the verdict is at the best grid point)."""
        return None if self.decision is None else self.decision.decision

    @property
    def figure(self) -> VerdictFigure:
        """The P@5 the verdict is given on, with its label source (:mod:`.verdict`)."""
        return verdict_figure(self)

    @property
    def verdict_p_at_5(self) -> float:
        """The P@5 the verdict is given on: at the weights in force after the decision
        (:attr:`verdict_point`) on the complete ground truth, or its PPI-corrected estimate
        (:mod:`.verdict`)."""
        return self.figure.p_at_5

    def to_dict(self) -> dict:
        """JSON-safe (plain floats, no NaN; None where a value does not exist)."""
        cv = self.cross_validation
        data = {
            "dataset": self.dataset,
            "label_source": self.label_source,
            "judge_labels": self.judge_labels,
            "queries": self.n_queries,
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
            "decision": None if self.decision is None else self.decision.to_dict(),
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


def calibrate_dataset(conn: psycopg.Connection, dataset: str, *,
                      grid: np.ndarray | list[float] | None = None,
                      current_weight: float = DEFAULT_SEMANTIC_WEIGHT,
                      default_weight: float = DEFAULT_SEMANTIC_WEIGHT,
                      candidate_depth: int = 50, rrf_k: int = 60, cv_folds: int = 5,
                      seed: int = 0, bands: VerdictBands = VerdictBands(),
                      bootstrap_resamples: int = 10_000, labels: str | None = None,
                      agreement: AgreementSettings = AgreementSettings(),
                      min_judged: float = 0.9,
                      in_force_keyword: float | None = None,
                      decision: DecisionSettings = DecisionSettings()) -> CalibrationResult:
    """Grid-search the hybrid weights of ``dataset`` on its ground truth (module docstring).

    ``grid`` holds the semantic weights (default 0.5..0.9 step 0.1); the weights in force are
    ``current_weight`` / ``in_force_keyword`` (default ``1 - current_weight``), and
    ``decision`` says when the best grid point replaces them. Raises ``LookupError``
    for an unknown dataset and ``ValueError`` when it has no ground-truth query or an
    option is out of range; reads the store only. ``labels`` picks the label source
    (module docstring; ``agreement`` holds the judge labels' threshold and disagreement
    rule); :class:`~eval_harness.agreement.labels.LabelsMissing` when they do not exist.
    ``min_judged``: below this Judged@5 a weight's P@5 is a lower bound (:mod:`.judged`).
    """
    started = time.perf_counter()
    in_force = (float(current_weight), keyword_weight_for(current_weight)
                if in_force_keyword is None else float(in_force_keyword))
    weights = grid_with_default(grid_with_default(grid, default_weight), in_force[0])
    if cv_folds < 2:
        raise ValueError(f"cv_folds must be at least 2, got {cv_folds}.")
    info = dataset_info(conn, dataset)
    label_source = label_source_for(conn, dataset, labels)
    derived = None
    if label_source == "judges":
        derived = judge_labels.load_judge_labels(conn, dataset, agreement)
        qrels = {q: {} for q in load_qrels(conn, dataset)} | derived.qrels()
    else:
        qrels = load_qrels(conn, dataset)
    if not qrels:
        raise ValueError(f"Dataset '{dataset}' has no ground-truth queries to calibrate on; "
                         f"ingest it with its qrels first.")
    fetched = candidate_scores(conn, dataset, candidate_depth=candidate_depth)
    candidates = CandidateSet.from_queries(
        [c.doc_ids for c in fetched], [c.semantic for c in fetched],
        [c.keyword for c in fetched], [qrels[c.query_id] for c in fetched],
        query_ids=[c.query_id for c in fetched])
    fetch_seconds = time.perf_counter() - started

    if derived is not None:
        _refuse_unjudged(conn, dataset, candidates, weights, derived)
    sweep = sweep_weights(candidates, weights,
                          keyword_weights=[keyword_weight_for(w) for w in weights])
    sweep_seconds = time.perf_counter() - started - fetch_seconds

    uplift = uplift_over_default(sweep, default_weight=default_weight,
                                 current_weight=current_weight, n_resamples=bootstrap_resamples,
                                 seed=seed)
    folds = min(cv_folds, candidates.n_queries)
    cross_validation = (cross_validated_p_at_5(sweep, n_folds=folds, seed=seed,
                                               current_weight=current_weight)
                        if folds >= 2 else None)
    rrf = reciprocal_rank_fusion(candidates, k=rrf_k)
    points = _grid_points(sweep, 1.0 - decision.alpha, bootstrap_resamples, seed)
    best = points[sweep.index_of(uplift.best_weight)]
    decided = decide_weights(
        sweep.per_query_p_at_5, [(p.semantic_weight, p.keyword_weight) for p in points],
        in_force, _in_force_p_at_5(candidates, sweep, in_force),
        best_index=sweep.index_of(uplift.best_weight), alpha=decision.alpha,
        min_gain=decision.min_gain, permutations=decision.permutations,
        bootstrap_resamples=bootstrap_resamples, seed=seed, label_source=label_source,
        note=JUDGES_UNCORRECTED if label_source == "judges" else None)
    if derived is not None:
        decided = _judges_decision(conn, dataset, decided, candidates, sweep, alpha=decision.alpha)
    in_force_point = _in_force_point(candidates, sweep, in_force)
    at = best if decided.changed else in_force_point  # the weights in force after it
    verdict = precision_verdict(at.p_at_5, full_success=bands.full_success,
                                partial_success=bands.partial_success)
    total = time.perf_counter() - started
    return CalibrationResult(
        dataset=dataset, n_queries=candidates.n_queries, n_documents=info.documents,
        candidate_depth=candidate_depth, grid=points,
        default_added_to_grid=not np.any(np.isclose(grid_or_default(grid), default_weight, atol=1e-9)),
        p_at_5_ceiling=sweep.p_at_5_ceiling,
        p_at_5_candidate_ceiling=sweep.p_at_5_candidate_ceiling,
        current_weight=float(current_weight), best=best,
        default=points[sweep.index_of(default_weight)], uplift=uplift,
        bootstrap_resamples=bootstrap_resamples, cross_validation=cross_validation,
        rrf_k=rrf_k, rrf=rrf, verdict=verdict, bands=bands,
        calibrated_at=datetime.now(timezone.utc),
        seconds={"fetch_candidates": fetch_seconds, "sweep": sweep_seconds,
                 "statistics": total - fetch_seconds - sweep_seconds, "total": total},
        label_source=label_source, judge_labels=None if derived is None else derived.to_dict(),
        candidates=candidates, sweep=sweep, min_judged=float(min_judged), decision=decided,
        in_force=in_force_point,
        in_force_added_to_grid=not np.any(np.isclose(
            grid_with_default(grid, default_weight), in_force[0], atol=1e-9)))


def _judges_decision(conn: psycopg.Connection, dataset: str, decided: WeightDecision,
                     candidates: CandidateSet, sweep: SweepResult, *,
                     alpha: float) -> WeightDecision:
    """The decision on judge labels with the human sample's PPI-corrected gain of the best
    grid point over the weights in force (:func:`~.decision.with_judged_gain`); ``decided``
    (noting the uncorrected bias) when no usable human sample exists."""
    from eval_harness.calibration.judged_gain import bias_note, judged_gain

    in_force_semantic, in_force_keyword = decided.in_force
    if not math.isclose(keyword_weight_for(in_force_semantic), in_force_keyword, abs_tol=1e-9):
        return dataclasses.replace(decided, note=(
            f"{JUDGES_UNCORRECTED} (the PPI gain covers weights whose keyword weight is "
            "1 - semantic only)"))
    probe = _JudgedProbe(dataset=dataset, candidates=candidates, sweep=sweep)
    gain = judged_gain(conn, probe, decided.best[0], in_force_semantic, alpha=alpha)
    if gain is None:
        return dataclasses.replace(decided, note=bias_note(probe))
    note = (f"{gain.incomplete_queries} sampled queries left out because a top-5 document is "
            "unlabelled: label them" if gain.incomplete_queries else None)
    return with_judged_gain(decided, estimate=gain.estimate, low=gain.low, high=gain.high,
                            n_human=gain.n_human, note=note)


@dataclass(frozen=True)
class _JudgedProbe:
    """What :func:`~.judged_gain.judged_gain` reads of a calibration on judge labels, before
    the :class:`CalibrationResult` exists."""

    dataset: str
    candidates: CandidateSet
    sweep: SweepResult
    label_source: str = "judges"
    corrected: Any = None


def _in_force_p_at_5(candidates: CandidateSet, sweep: SweepResult,
                     in_force: tuple[float, float]) -> np.ndarray:
    """Per-query P@5 at the weights in force: the sweep's row when the grid holds the pair,
    else a sweep of that pair alone (a keyword weight other than ``1 - semantic``)."""
    swept, row = _in_force_sweep(candidates, sweep, in_force)
    return swept.per_query_p_at_5[row]


def _in_force_point(candidates: CandidateSet, sweep: SweepResult,
                    in_force: tuple[float, float]) -> GridPoint:
    """The mean metrics at the weights in force (:func:`_in_force_p_at_5`'s sweep)."""
    return _grid_point(*_in_force_sweep(candidates, sweep, in_force))


def _in_force_sweep(candidates: CandidateSet, sweep: SweepResult,
                    in_force: tuple[float, float]) -> tuple[SweepResult, int]:
    row = sweep.index_of(in_force[0])
    if math.isclose(sweep.keyword_weights[row], in_force[1], abs_tol=1e-9):
        return sweep, row
    return sweep_weights(candidates, [in_force[0]], keyword_weights=[in_force[1]]), 0


def label_source_for(conn: psycopg.Connection, dataset: str, labels: str | None) -> str:
    """The label source a calibration of ``dataset`` uses: ``labels`` when given, else human
    when the dataset has expected_docs, else judges; human labels that do not exist are
    :class:`~eval_harness.agreement.labels.LabelsMissing`."""
    if labels is not None and labels not in judge_labels.LABEL_SOURCES:
        raise ValueError(f"labels must be human or judges, got {labels!r}.")
    has_labels = ground_truth.dataset_has_labels(conn, dataset)
    if labels == "human" and not has_labels:
        raise judge_labels.LabelsMissing(
            f"Dataset '{dataset}' has no human labels (no query has expected_docs); calibrate "
            f"on the judges' labels with --labels judges after "
            f"{judge_labels.JUDGE_FIRST.format(dataset=dataset)}.")
    return labels or ("human" if has_labels else "judges")


def _refuse_unjudged(conn: psycopg.Connection, dataset: str, candidates: CandidateSet,
                     weights: np.ndarray, derived: judge_labels.JudgeLabels) -> None:
    """:class:`~eval_harness.agreement.labels.LabelsMissing` when a top 5 of some grid
    weight holds a document the judges have not labelled (its P@5 would be a guess)."""
    tops: dict[int, list[int]] = {}
    for weight in weights:
        ranked = rank_top_k(candidates, float(weight), keyword_weight=keyword_weight_for(weight),
                            k=PRECISION_CUTOFF)
        for query_id, top in zip(candidates.query_ids, ranked):
            tops.setdefault(query_id, []).extend(int(d) for d in top)
    missing = judge_labels.unjudged_in_top(derived, tops)
    if missing:
        names = ground_truth.query_external_ids(conn, list(missing))
        shown = ", ".join(f"'{names[q]}'" for q in sorted(missing)[:3])
        pairs = sum(len(set(d)) for d in missing.values())
        raise judge_labels.LabelsMissing(
            f"Dataset '{dataset}': {pairs} documents in the top 5 of the calibration grid of "
            f"{len(missing)} queries (e.g. {shown}) have no judge label; "
            f"{judge_labels.JUDGE_FIRST.format(dataset=dataset)}.")


def calibrate_with_settings(conn: psycopg.Connection, settings: Settings,
                            dataset: str | None = None, *,
                            grid_step: float | None = None,
                            labels: str | None = None) -> CalibrationResult:
    """:func:`calibrate_dataset` with every option taken from ``settings`` (config.yaml's
    ``calibration`` section, the dataset's weights: :meth:`Settings.weights_for`);
    ``grid_step`` overrides the step; ``labels``: human, judges or None (module docstring)."""
    options = settings.calibration
    grid = grid_from_range(options.grid_start, options.grid_stop,
                           options.grid_step if grid_step is None else grid_step)
    dataset = dataset or settings.default_dataset
    weights = settings.weights_for(dataset)  # the weights in force: its own, else the global
    result = calibrate_dataset(
        conn, dataset, grid=grid,
        current_weight=weights.semantic, in_force_keyword=weights.keyword,
        decision=options.decision, default_weight=options.default_weight,
        candidate_depth=weights.candidate_depth, rrf_k=options.rrf_k,
        cv_folds=options.cv_folds, seed=options.seed,
        bands=VerdictBands(options.full_success, options.partial_success),
        bootstrap_resamples=options.bootstrap_resamples, labels=labels,
        agreement=settings.agreement, min_judged=options.min_judged)
    from eval_harness.calibration.corrected import with_corrected_p_at_5

    return with_corrected_p_at_5(conn, result,
                                 relevance_threshold=settings.agreement.relevance_threshold)


def _grid_points(sweep: SweepResult, confidence: float, resamples: int,
                 seed: int) -> tuple[GridPoint, ...]:
    """Every weight's means, with its P@5's query bootstrap interval at ``confidence``."""
    low, high = grid_p_at_5_intervals(sweep.per_query_p_at_5, confidence=confidence,
                                      n_resamples=resamples, seed=seed)
    return tuple(GridPoint(float(sweep.semantic_weights[i]), float(sweep.keyword_weights[i]),
                           float(sweep.p_at_5[i]), float(sweep.recall_at_5[i]),
                           float(sweep.ndcg_at_10[i]), float(sweep.mrr_at_10[i]),
                           float(sweep.judged_at_5[i]), float(low[i]), float(high[i]))
                 for i in range(sweep.semantic_weights.size))


def _grid_point(sweep: SweepResult, i: int) -> GridPoint:
    return GridPoint(float(sweep.semantic_weights[i]), float(sweep.keyword_weights[i]),
                     float(sweep.p_at_5[i]), float(sweep.recall_at_5[i]),
                     float(sweep.ndcg_at_10[i]), float(sweep.mrr_at_10[i]),
                     float(sweep.judged_at_5[i]))
