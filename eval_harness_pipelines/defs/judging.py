"""Judging domain: two independent relevance judges score every ground-truth pair."""


from typing import Optional

import dagster as dg

from eval_harness_pipelines.check_outcomes import readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore
from eval_harness.judges.dual import judge_dataset

GROUP = "judging"


class JudgingConfig(dg.Config):
    dataset: Optional[str] = None  # a key of `datasets` in config.yaml; default_dataset if unset
    limit: Optional[int] = None    # judge only the first N ground-truth queries
    batch: bool = False            # providers' batch APIs (nightly: cheaper, slower)


@dg.asset(
    group_name=GROUP,
    deps=["ground_truth"],
    description="Both relevance judges score expected_docs + the top hybrid hits of every "
                "ground-truth query; scores, per-query kappa and outcomes go to ground_truth.")
def dual_judge_scores(context: dg.AssetExecutionContext, config: JudgingConfig,
                      settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    dataset = config.dataset or cfg.default_dataset
    with store.location().connection() as conn:
        summary = judge_dataset(conn, cfg, dataset, limit=config.limit, batch=config.batch,
                                run_id=context.run_id)
    context.log.info(summary.format())
    if not summary.complete:
        context.log.warning(f"judging incomplete: {summary.unscored} unscored and "
                            f"{summary.failed} failed judgements, "
                            f"{summary.queries - summary.queries_written} queries not written"
                            + (f"; {summary.stop_reason}" if summary.stopped else "")
                            + " (eval-harness judge --retry-unscored re-asks unscored ones)")
    metadata = readable(summary.metadata())
    metadata["summary"] = dg.MetadataValue.md(f"```\n{summary.format()}\n```")
    return dg.MaterializeResult(metadata=metadata)


judging_job = dg.define_asset_job(
    "judging_job", selection=dg.AssetSelection.groups(GROUP),
    description="Dual-judge relevance scores of the default dataset's ground truth.")

defs = dg.Definitions(assets=[dual_judge_scores], jobs=[judging_job])
