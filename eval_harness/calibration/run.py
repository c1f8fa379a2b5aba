"""Calibrate a dataset's hybrid weights on its ground truth, and give the P@5 verdict.

Stories 2.8 and 2.9, in the steps of :func:`calibrate_dataset`:

1. the labels: human or the judges' (below), as qrels;
2. the candidates: every ground-truth query's candidate union with both raw scores, fetched
   once (:func:`eval_harness.retrieval.hybrid.candidate_scores`);
3. the sweep: all semantic weights in numpy (:func:`eval_harness.retrieval.sweep.
   sweep_weights`, bit-identical to hybrid search at each weight, ties by document id), each
   grid point with its P@5 interval (:mod:`.grid`);
4. the best grid point: highest mean P@5, ties to the weight closest to the one in force;
5. the decision (:mod:`eval_harness.calibration.decision`), the one test of whether the best
   grid point is better: it replaces the weights in force only when its gain over them
   survives a max-statistic permutation test over the grid (``calibration.decision``; on
   judge labels also the human sample's PPI-corrected gain), else they are kept;
6. figures that describe the grid and decide nothing: the uplift of the best grid point over
   the default 0.7 (absolute, relative, paired bootstrap interval, paired randomization
   p-value), the k-fold cross-validated P@5 (how much is overfitting), and reciprocal rank
   fusion on the same candidates, as a reference method;
7. the verdict (:mod:`.verdict`) at the weights in force after the decision, on the complete
   ground truth or, on judge labels with a labelled human sample, the PPI-corrected P@5
   (:mod:`.ppi_p_at_5`).

The result's ``seconds`` time steps 1 to 6 (fetching the labels and candidates, the sweep,
the statistics); step 7's correction of the P@5 by the human sample is not counted in them.

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
from datetime import UTC, datetime

import numpy as np
import psycopg

from eval_harness.agreement import labels as judge_labels
from eval_harness.calibration.decision import (
    JUDGES_UNCORRECTED,
    WeightDecision,
    decide_weights,
    with_judged_gain,
)
from eval_harness.calibration.grid import GridPoint, grid_point, grid_points
from eval_harness.calibration.ppi_gain import UNCORRECTED, gain_on_sweep
from eval_harness.calibration.ppi_p_at_5 import CorrectedEstimates, corrected_estimates
from eval_harness.calibration.result import CalibrationResult
from eval_harness.calibration.verdict import VerdictBands, VerdictFigure, verdict_figure
from eval_harness.datasets import ground_truth
from eval_harness.errors import InvalidInput
from eval_harness.metrics.calibration import (
    DEFAULT_SEMANTIC_WEIGHT,
    CrossValidation,
    Uplift,
    best_weight,
    cross_validated_p_at_5,
    uplift_over_default,
)
from eval_harness.metrics.ranking import PRECISION_CUTOFF
from eval_harness.retrieval.hybrid import candidate_scores, dataset_info
from eval_harness.retrieval.report import load_qrels, queries_of
from eval_harness.retrieval.sweep import (
    CandidateSet,
    MethodResult,
    SweepResult,
    rank_top_k,
    reciprocal_rank_fusion,
    sweep_weights,
)
from eval_harness.retrieval.weights import (
    grid_from_range,
    grid_or_default,
    grid_with_default,
    keyword_weight_for,
)
from eval_harness.settings import AgreementSettings, DecisionSettings, Settings


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
                      decision: DecisionSettings = DecisionSettings(),
                      human_sample: bool = False) -> CalibrationResult:
    """Grid-search the hybrid weights of ``dataset`` on its ground truth (module docstring).

    ``grid`` holds the semantic weights (default 0.5..0.9 step 0.1); the weights in force are
    ``current_weight`` / ``in_force_keyword`` (default ``1 - current_weight``), and
    ``decision`` says when the best grid point replaces them. Raises ``LookupError``
    for an unknown dataset and ``ValueError`` when it has no ground-truth query or an
    option is out of range; reads the store only. ``labels`` picks the label source
    (module docstring; ``agreement`` holds the judge labels' threshold and disagreement
    rule); :class:`~eval_harness.agreement.labels.LabelsMissing` when they do not exist.
    ``min_judged``: below this Judged@5 a weight's P@5 is a lower bound (:mod:`.judged_at_5`).
    ``human_sample``: also correct the P@5 with the dataset's labelled human sample, if any
    (:mod:`.ppi_p_at_5`; the verdict on judge labels is then given on the corrected figure).
    """
    started = time.perf_counter()
    in_force = (float(current_weight), keyword_weight_for(current_weight)
                if in_force_keyword is None else float(in_force_keyword))
    weights = grid_with_default(grid_with_default(grid, default_weight), in_force[0])
    if cv_folds < 2:
        raise ValueError(f"cv_folds must be at least 2, got {cv_folds}.")
    info = dataset_info(conn, dataset)
    label_source = label_source_for(conn, dataset, labels)
    qrels, derived = _qrels(conn, dataset, label_source, agreement)  # 1. labels
    candidates = _candidates(conn, dataset, qrels, candidate_depth)  # 2. candidates
    fetch_seconds = time.perf_counter() - started

    if derived is not None:
        _refuse_unjudged(conn, dataset, candidates, weights, derived)
    sweep = sweep_weights(candidates, weights,  # 3. the sweep
                          keyword_weights=[keyword_weight_for(w) for w in weights])
    sweep_seconds = time.perf_counter() - started - fetch_seconds

    points = grid_points(sweep, confidence=1.0 - decision.alpha, resamples=bootstrap_resamples,
                         seed=seed)
    best = points[sweep.index_of(best_weight(  # 4. the best grid point
        sweep.semantic_weights, sweep.p_at_5, current_weight=current_weight))]
    default = points[sweep.index_of(default_weight)]
    in_force_swept, in_force_row = _in_force_sweep(candidates, sweep, in_force)
    decided = _decide(conn, dataset, candidates, sweep, points, best, in_force,  # 5. decide
                      in_force_swept.per_query_p_at_5[in_force_row], decision=decision,
                      bootstrap_resamples=bootstrap_resamples, seed=seed,
                      label_source=label_source)
    in_force_point = grid_point(in_force_swept, in_force_row)
    uplift, cross_validation, rrf = _descriptive(  # 6. figures that decide nothing
        candidates, sweep, best, default_weight=default_weight, current_weight=current_weight,
        cv_folds=cv_folds, rrf_k=rrf_k, bootstrap_resamples=bootstrap_resamples, seed=seed)
    total = time.perf_counter() - started  # step 7 is not timed (module docstring)
    corrected, figure = _verdict(  # 7. the verdict
        conn, dataset, candidates, decided, best=best, default=default, kept=in_force_point,
        bands=bands, label_source=label_source, human_sample=human_sample,
        relevance_threshold=agreement.relevance_threshold)
    return CalibrationResult(
        dataset=dataset, n_queries=candidates.n_queries, n_documents=info.documents,
        candidate_depth=candidate_depth, grid=points,
        default_added_to_grid=not np.any(np.isclose(grid_or_default(grid), default_weight,
                                                    atol=1e-9)),
        p_at_5_ceiling=sweep.p_at_5_ceiling,
        p_at_5_candidate_ceiling=sweep.p_at_5_candidate_ceiling,
        current_weight=float(current_weight), best=best, default=default,
        in_force=in_force_point,
        in_force_added_to_grid=not np.any(np.isclose(
            grid_with_default(grid, default_weight), in_force[0], atol=1e-9)),
        decision=decided, figure=figure, bands=bands, uplift=uplift,
        bootstrap_resamples=bootstrap_resamples, cross_validation=cross_validation,
        rrf_k=rrf_k, rrf=rrf, calibrated_at=datetime.now(UTC),
        seconds={"fetch_candidates": fetch_seconds, "sweep": sweep_seconds,
                 "statistics": total - fetch_seconds - sweep_seconds, "total": total},
        candidates=candidates, sweep=sweep, label_source=label_source,
        judge_labels=None if derived is None else derived.to_dict(), corrected=corrected,
        min_judged=float(min_judged),
        query_origins=ground_truth.origins_of(conn, [int(q) for q in candidates.query_ids]))


def calibrate_with_settings(conn: psycopg.Connection, settings: Settings,
                            dataset: str | None = None, *,
                            grid_step: float | None = None,
                            labels: str | None = None) -> CalibrationResult:
    """:func:`calibrate_dataset` with every option taken from ``settings`` (config.yaml's
    ``calibration`` section, the dataset's weights: :meth:`Settings.weights_for`) and the
    dataset's human sample; ``grid_step`` overrides the step; ``labels``: human, judges or
    None (module docstring)."""
    options = settings.calibration
    grid = grid_from_range(options.grid.start, options.grid.stop,
                           options.grid.step if grid_step is None else grid_step)
    dataset = dataset or settings.default_dataset
    weights = settings.weights_for(dataset)  # the weights in force: its own, else the global
    return calibrate_dataset(
        conn, dataset, grid=grid,
        current_weight=weights.semantic, in_force_keyword=weights.keyword,
        decision=options.decision, default_weight=options.default_weight,
        candidate_depth=weights.candidate_depth, rrf_k=options.rrf_k,
        cv_folds=options.cv_folds, seed=options.seed,
        bands=VerdictBands(options.verdict.full_success, options.verdict.partial_success),
        bootstrap_resamples=options.bootstrap_resamples, labels=labels,
        agreement=settings.agreement, min_judged=options.min_judged, human_sample=True)


# ------------------------------------------------------------------ 1. labels, 2. candidates

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


def _qrels(conn: psycopg.Connection, dataset: str, label_source: str,
           agreement: AgreementSettings) -> tuple[dict, judge_labels.JudgeLabels | None]:
    """The ground truth's relevance labels per query from ``label_source``, and the judge
    labels they came from (None: human labels)."""
    qrels: dict[int, dict[int, int]]
    if label_source == "judges":
        derived = judge_labels.load_judge_labels(conn, dataset, agreement)
        qrels = {q: {} for q in load_qrels(conn, dataset)} | derived.qrels()
    else:
        derived, qrels = None, load_qrels(conn, dataset)
    if not qrels:
        raise InvalidInput(f"Dataset '{dataset}' has no ground-truth queries to calibrate on; "
                         f"ingest it with its qrels first.")
    return qrels, derived


def _candidates(conn: psycopg.Connection, dataset: str, qrels: dict,
                candidate_depth: int) -> CandidateSet:
    """Every ground-truth query's candidate union with both raw scores and its labels."""
    fetched = candidate_scores(conn, dataset, query_ids=queries_of(conn, dataset, qrels),
                               candidate_depth=candidate_depth)
    return CandidateSet.from_queries(
        [c.doc_ids for c in fetched], [c.semantic for c in fetched],
        [c.keyword for c in fetched], [qrels[c.query_id] for c in fetched],
        query_ids=[c.query_id for c in fetched])


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


# ------------------------------------------------------------------------------ 5. decision

def _decide(conn: psycopg.Connection, dataset: str, candidates: CandidateSet,
            sweep: SweepResult, points: tuple[GridPoint, ...], best: GridPoint,
            in_force: tuple[float, float], in_force_p_at_5: np.ndarray, *,
            decision: DecisionSettings, bootstrap_resamples: int, seed: int,
            label_source: str) -> WeightDecision:
    """The decision on the weights in force (:func:`~.decision.decide_weights`); on judge
    labels with the human sample's PPI-corrected gain too (:func:`_with_ppi_gain`)."""
    decided = decide_weights(
        sweep.per_query_p_at_5, [(p.semantic_weight, p.keyword_weight) for p in points],
        in_force, in_force_p_at_5, best_index=sweep.index_of(best.semantic_weight),
        alpha=decision.alpha, min_gain=decision.min_gain, permutations=decision.permutations,
        bootstrap_resamples=bootstrap_resamples, seed=seed, label_source=label_source,
        note=JUDGES_UNCORRECTED if label_source == "judges" else None)
    if label_source != "judges":
        return decided
    return _with_ppi_gain(conn, dataset, decided, candidates, sweep, alpha=decision.alpha)


def _with_ppi_gain(conn: psycopg.Connection, dataset: str, decided: WeightDecision,
                   candidates: CandidateSet, sweep: SweepResult, *,
                   alpha: float) -> WeightDecision:
    """The decision on judge labels with the human sample's PPI-corrected gain of the best
    grid point over the weights in force (:func:`~.decision.with_judged_gain`); ``decided``
    (noting the uncorrected bias) when no usable human sample exists."""
    in_force_semantic, in_force_keyword = decided.in_force
    if not math.isclose(keyword_weight_for(in_force_semantic), in_force_keyword, abs_tol=1e-9):
        return dataclasses.replace(decided, note=(
            f"{JUDGES_UNCORRECTED} (the PPI gain covers weights whose keyword weight is "
            "1 - semantic only)"))
    gain = gain_on_sweep(conn, dataset, candidates, sweep, decided.best[0], in_force_semantic,
                         alpha=alpha)
    if gain is None:
        return dataclasses.replace(decided, note=UNCORRECTED)
    note = (f"{gain.incomplete_queries} sampled queries left out because a top-5 document is "
            "unlabelled: label them" if gain.incomplete_queries else None)
    return with_judged_gain(decided, estimate=gain.estimate, low=gain.low, high=gain.high,
                            n_human=gain.n_human, note=note)


# ------------------------------------------------------------ 6. verdict, 7. descriptive

def _verdict(conn: psycopg.Connection, dataset: str, candidates: CandidateSet,
             decided: WeightDecision, *, best: GridPoint, default: GridPoint, kept: GridPoint,
             bands: VerdictBands, label_source: str, human_sample: bool,
             relevance_threshold: float) -> tuple[CorrectedEstimates | None, VerdictFigure]:
    """The P@5 corrected by the human sample (``human_sample``; None without a labelled one)
    and the verdict's figure at the weights in force after the decision: the best grid point
    when it changed them, else ``kept`` (:mod:`.verdict`)."""
    at = best if decided.changed else kept
    corrected = (corrected_estimates(
        conn, dataset, candidates, default_weight=default.semantic_weight,
        best_weight=best.semantic_weight, kept=None if decided.changed else kept,
        relevance_threshold=relevance_threshold) if human_sample else None)
    figure = verdict_figure(at, bands, label_source=label_source, weights=decided.decision,
                            corrected=None if corrected is None else corrected.at(at))
    return corrected, figure


def _descriptive(candidates: CandidateSet, sweep: SweepResult, best: GridPoint, *,
                 default_weight: float, current_weight: float, cv_folds: int, rrf_k: int,
                 bootstrap_resamples: int, seed: int
                 ) -> tuple[Uplift, CrossValidation | None, MethodResult]:
    """The uplift of the best grid point over the default weight, the cross-validated P@5
    (None with fewer than 2 queries) and reciprocal rank fusion: printed beside the
    decision, deciding nothing."""
    uplift = uplift_over_default(sweep, default_weight=default_weight,
                                 current_weight=current_weight, n_resamples=bootstrap_resamples,
                                 seed=seed, best=best.semantic_weight)
    folds = min(cv_folds, candidates.n_queries)
    cross_validation = (cross_validated_p_at_5(sweep, n_folds=folds, seed=seed,
                                               current_weight=current_weight)
                        if folds >= 2 else None)
    return uplift, cross_validation, reciprocal_rank_fusion(candidates, k=rrf_k)


def in_force_p_at_5(candidates: CandidateSet, sweep: SweepResult,
                    in_force: tuple[float, float]) -> np.ndarray:
    """Per-query P@5 at the weights in force: the sweep's row when the grid holds the pair,
    else a sweep of that pair alone (a keyword weight other than ``1 - semantic``)."""
    swept, row = _in_force_sweep(candidates, sweep, in_force)
    return swept.per_query_p_at_5[row]


def _in_force_sweep(candidates: CandidateSet, sweep: SweepResult,
                    in_force: tuple[float, float]) -> tuple[SweepResult, int]:
    row = sweep.index_of(in_force[0])
    if math.isclose(sweep.keyword_weights[row], in_force[1], abs_tol=1e-9):
        return sweep, row
    return sweep_weights(candidates, [in_force[0]], keyword_weights=[in_force[1]]), 0
