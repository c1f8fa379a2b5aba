"""Calibration domain: hybrid-weight grid search (story 2.8) and the P@5 verdict (story 2.9).

``calibration_grid`` sweeps the weights on the ground truth (one row per weight, stored by
Dagster's DuckDB I/O manager and appended to the DuckDB history) and writes the dataset's
report (reports/calibration-results-<dataset>.md); ``calibrated_weights`` publishes the
decision for that dataset (:mod:`eval_harness.calibration.decision`): a row of the
``calibrated_weights`` table (what the RAG system reads) and, only when the best grid point
beats the weights in force after correcting for the grid search, ``datasets.<name>.
hybrid_search`` in config.yaml (the global ``hybrid_search`` stays the default of datasets
never calibrated); the check ``p_at_5_verdict`` grades them on
the complete ground truth. As in the stories, the weights are written first and then
validated: a failure verdict (ERROR, blocking) stops whatever runs downstream of the
calibrated weights and fails the run with the verdict and its figure
(``eval_harness_pipelines.check_outcomes``); a partial success warns.
"""


from collections.abc import Iterator
from typing import Optional

import dagster as dg
import pandas as pd

from eval_harness_pipelines.check_outcomes import below, check_outcome, readable
from eval_harness_pipelines.resources import DUCKDB_IO_MANAGER_KEY, EvalSettings, LiveStore
from eval_harness.calibration.history import (calibrated_row, decision_from_grid,
                                              figure_from_grid, outcome_from_grid)
from eval_harness.calibration.report import calibration_markdown
from eval_harness.calibration.run import calibrate_with_settings
from eval_harness.calibration.text import format_table
from eval_harness.calibration.verdict import VERDICT_LABELS
from eval_harness.calibration.workflow import (publish_calibration, record_calibration,
                                               verdict_bands)

GROUP = "calibration"


class CalibrationConfig(dg.Config):
    dataset: Optional[str] = None  # a dataset in the store; default_dataset if unset
    grid_step: Optional[float] = None  # overrides calibration.grid.step (0.01 .. 1)
    labels: Optional[str] = None  # human | judges; default human when expected_docs exist


# Downstream of judge_agreement: its blocking kappa check stops calibration on untrustworthy
# labels.
@dg.asset(group_name=GROUP, deps=["judge_agreement"], io_manager_key=DUCKDB_IO_MANAGER_KEY,
          description="P@5, Recall@5, nDCG@10, MRR@10 of hybrid search at every weight of the "
                      "grid on the ground truth; best weight, uplift, cross-validated P@5.")
def calibration_grid(context: dg.AssetExecutionContext, config: CalibrationConfig,
                     settings: EvalSettings, store: LiveStore) -> dg.Output[pd.DataFrame]:
    cfg = settings.load()
    with store.location().connection() as conn:
        result = calibrate_with_settings(conn, cfg, config.dataset, grid_step=config.grid_step,
                                         labels=config.labels)
        conn.commit()  # the candidate cache's new entries (a rerun reads them)
    recorded = record_calibration(cfg, result)
    # the label source is not in the history table: the publishing asset reads it for the row
    frame = recorded.grid.assign(label_source=result.label_source)
    context.log.info(format_table(result))
    uplift, cv, figure = result.uplift, result.cross_validation, result.figure
    metadata = {
        "dataset": result.dataset, "label_source": result.label_source,
        "verdict_p_at_5": figure.p_at_5, "verdict_label_source": figure.label_source,
        "queries": result.n_queries,
        "best_semantic_weight": result.best.semantic_weight,
        "best_keyword_weight": result.best.keyword_weight,
        "p_at_5_best": result.best.p_at_5, "p_at_5_default": result.default.p_at_5,
        "p_at_5_ceiling": result.p_at_5_ceiling, "p_at_5_rrf": result.rrf.p_at_5,
        "uplift_absolute": uplift.absolute, "uplift_ci_low": uplift.ci_low,
        "uplift_ci_high": uplift.ci_high, "uplift_p_value": uplift.p_value,
        "verdict": VERDICT_LABELS[result.verdict],
        "judged_at_5_best": result.best.judged_at_5, "min_judged": result.min_judged,
        "decision": result.decision.decision, "decision_sentence": result.decision.sentence,
        "in_force_semantic_weight": result.decision.in_force[0],
        "in_force_keyword_weight": result.decision.in_force[1],
        "decision_gain": result.decision.gain,
        "decision_adjusted_p": result.decision.adjusted_p,
        "report": dg.MetadataValue.md(calibration_markdown(result)),
        "report_path": dg.MetadataValue.path(str(recorded.report)),
        "history_path": dg.MetadataValue.path(str(recorded.history_path)),
        "dagster/row_count": len(frame)}
    if uplift.relative is not None:
        metadata["uplift_relative"] = uplift.relative
    if cv is not None:
        metadata["p_at_5_cross_validated"] = cv.p_at_5
    if result.judged.is_lower_bound:  # Judged@5 below calibration.min_judged somewhere
        lines = result.judged.lines()
        metadata["p_at_5_lower_bound"] = " ".join(f"{line}." for line in lines)
        context.log.warning(lines[0])
    return dg.Output(frame, metadata=readable(metadata))


@dg.asset(group_name=GROUP,
          description="The decision of calibration_grid for its dataset: a row of the "
                      "calibrated_weights table (changed or kept, with the gain, its interval "
                      "and the grid-adjusted p) and, only when the best grid point beats the "
                      "weights in force significantly, datasets.<name>.hybrid_search in "
                      "config.yaml (other keys, datasets and comments kept).")
def calibrated_weights(context: dg.AssetExecutionContext, calibration_grid: pd.DataFrame,
                       settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    outcome = outcome_from_grid(calibration_grid, verdict_bands(cfg))
    published = publish_calibration(store.location(), cfg, outcome, run_id=context.run_id)
    figure, decision = outcome.figure, outcome.decision
    metadata = {"semantic_weight": published.semantic, "keyword_weight": published.keyword,
                "p_at_5": figure.p_at_5, "dataset": published.dataset,
                "label_source": published.label_source,
                "calibrated_weights_id": published.row_id}
    if decision is not None:
        context.log.info(f"Decision on dataset '{published.dataset}': {decision.sentence}")
        metadata.update(decision=decision.decision, decision_sentence=decision.sentence,
                        decision_gain=decision.gain, decision_ci_low=decision.low,
                        decision_ci_high=decision.high,
                        decision_adjusted_p=decision.adjusted_p, decision_alpha=decision.alpha)
    change = published.config
    if change is None and decision is not None and not decision.changed:
        return dg.MaterializeResult(metadata=readable(dict(
            metadata, written=False, config_note=published.config_note)))
    if change is None:
        context.log.warning(f"config.yaml not written: {published.config_note}.")
        return dg.MaterializeResult(metadata=readable(dict(
            metadata, written=False, config_note=published.config_note)))
    return dg.MaterializeResult(metadata=readable(dict(
        metadata, written=change.changed, config_key=change.key,
        config_path=dg.MetadataValue.path(str(change.path)),
        previous_semantic_weight=dg.MetadataValue.float(change.previous_semantic)
        if change.previous_semantic is not None else dg.MetadataValue.null())))


@dg.asset_check(asset=calibrated_weights, blocking=True,
                additional_ins={"calibration_grid": dg.AssetIn("calibration_grid")},
                description="Blocking: P@5 at the weights in force after the decision (the "
                            "new weights, or those kept) on the complete ground "
                            "truth. A failure verdict is an ERROR and stops the run with the "
                            "figure; partial success warns.")
def p_at_5_verdict(calibration_grid: pd.DataFrame,
                   settings: EvalSettings) -> Iterator[dg.AssetCheckResult]:
    bands = verdict_bands(settings.load())
    figure = figure_from_grid(calibration_grid, bands)  # the CLI's and the row's figure
    verdict, p_at_5 = figure.verdict, figure.p_at_5
    # A blocking check with WARN severity does not block: partial success only warns.
    severity = dg.AssetCheckSeverity.ERROR if verdict == "failure" else dg.AssetCheckSeverity.WARN
    metadata = {"p_at_5": p_at_5, "verdict": VERDICT_LABELS[verdict],
                "label_source": figure.label_source or "not recorded", "basis": figure.basis,
                "full_success": bands.full_success, "partial_success": bands.partial_success,
                "semantic_weight": figure.semantic_weight,
                "keyword_weight": (dg.MetadataValue.null() if figure.keyword_weight is None
                                   else figure.keyword_weight),
                "weights": figure.weights or "best grid point"}
    if figure.interval is not None:
        metadata.update(interval_low=figure.interval[0], interval_high=figure.interval[1],
                        judges_p_at_5=figure.judges_p_at_5, n_human=figure.n_human,
                        n_judged=figure.n_judged)
    result = dg.AssetCheckResult(
        passed=verdict == "full_success", severity=severity,
        description=_with_decision(figure.sentence(bands, _ceiling(calibration_grid)),
                                   calibration_grid),
        metadata=readable(metadata))
    yield from check_outcome(
        result, name="p_at_5_verdict", blocking=True,
        figure=f"{'PPI-corrected ' if figure.basis == 'ppi' else ''}P@5 "
               f"{below(p_at_5, bands.partial_success)} ({VERDICT_LABELS[verdict].upper()})",
        figures={"p_at_5": p_at_5, "partial_success": bands.partial_success,
                 "full_success": bands.full_success, "p_at_5_ceiling": _ceiling(calibration_grid)})


def _with_decision(sentence: str, grid: pd.DataFrame) -> str:
    """The verdict sentence, then the decision on the weights in one line (when recorded)."""
    decision = decision_from_grid(grid)
    return sentence if decision is None else f"{sentence}\nWeights: {decision.sentence}"


def _ceiling(grid: pd.DataFrame) -> Optional[float]:
    """The P@5 ceiling of the ground truth, when the grid carries it."""
    value = calibrated_row(grid).get("p_at_5_ceiling")
    return None if value is None or pd.isna(value) else float(value)


calibration_job = dg.define_asset_job(  # upstream: ingest (a no-op on unchanged data)
    "calibration_job", selection=dg.AssetSelection.groups(GROUP).upstream(),
    description="Ingest the dataset, grid-search the hybrid weights on its ground truth, "
                "publish them for that dataset (calibrated_weights table, config.yaml) and "
                "give the P@5 verdict.")

defs = dg.Definitions(assets=[calibration_grid, calibrated_weights],
                      asset_checks=[p_at_5_verdict], jobs=[calibration_job])
