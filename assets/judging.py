"""Judging domain: two independent relevance judges score every ground-truth pair.

``dual_judge_scores`` judges the whole dataset in one process (the nightly and judging jobs,
``eval-harness run``). ``dual_judge_shard`` is the same work cut into ``judges.shards``
static partitions "0".."n-1" by query (:func:`eval_harness.judges.dual.shards.shard_of`): a
backfill of ``judging_shards_job`` launches one run per shard, each in its own process, and
the shards run side by side (each holds its own shard's judge lock). ``dual_judge_scores``
depends on every partition of it: after a backfill it finds every reply in the cache, pays
nothing and brings the dataset-wide figures (pooled kappa, write-back) up to date; downstream
agreement and calibration read it as before. The shard asset is kept out of the nightly and
main jobs (a job's assets share one partitioning).
"""


from typing import Optional

import dagster as dg

from eval_harness_pipelines.check_outcomes import readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore
from eval_harness.judges.dual.run import judge_dataset

GROUP = "judging"


class JudgingConfig(dg.Config):
    dataset: Optional[str] = None  # a key of `datasets` in config.yaml; default_dataset if unset
    limit: Optional[int] = None    # judge only the first N ground-truth queries
    batch: bool = False            # providers' batch APIs (nightly: cheaper, slower)


SHARD_GROUP = "judging_shards"
SHARD_ASSET = "dual_judge_shard"
SHARD_JOB = "judging_shards_job"


@dg.asset(
    group_name=GROUP,
    deps=["ground_truth", SHARD_ASSET],
    description="Both relevance judges score expected_docs + the top hybrid hits of every "
                "ground-truth query; scores, per-query kappa and outcomes go to ground_truth.")
def dual_judge_scores(context: dg.AssetExecutionContext, config: JudgingConfig,
                      settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    dataset = config.dataset or cfg.default_dataset
    with store.location().connection() as conn:
        summary = judge_dataset(conn, cfg, dataset, limit=config.limit, batch=config.batch,
                                run_id=context.run_id)
    return _result(context, summary)


def _result(context, summary) -> dg.MaterializeResult:
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


def shard_partitions(shards: int) -> dg.StaticPartitionsDefinition:
    """The static partitions "0" .. "shards - 1" of the shard asset."""
    return dg.StaticPartitionsDefinition([str(i) for i in range(shards)])


def shard_definitions(settings) -> dg.Definitions:
    """The partitioned judging asset and its job; ``judges.shards`` fixes the partitions
    (like the answers' partitions, they are structure, read when the definitions load)."""
    partitions = shard_partitions(settings.judges.shards)
    count = settings.judges.shards

    @dg.asset(
        name=SHARD_ASSET, group_name=SHARD_GROUP, deps=["ground_truth"],
        partitions_def=partitions,
        description="Both relevance judges on one query shard (judges.shards static "
                    "partitions; a query's shard is a stable hash of its id). A backfill "
                    "judges the shards in parallel processes; the reply cache and the "
                    "per-shard lock keep every pair paid once.")
    def dual_judge_shard(context: dg.AssetExecutionContext, config: JudgingConfig,
                         settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
        cfg = settings.load()
        dataset = config.dataset or cfg.default_dataset
        shard = (int(context.partition_key), count)
        with store.location().connection() as conn:
            summary = judge_dataset(conn, cfg, dataset, limit=config.limit,
                                    batch=config.batch, run_id=context.run_id, shard=shard)
        return _result(context, summary)

    job = dg.define_asset_job(
        SHARD_JOB, selection=dg.AssetSelection.assets(dual_judge_shard),
        partitions_def=partitions,
        description="One query shard of the dual judges; backfill it to judge every shard "
                    "in parallel.")
    return dg.Definitions(assets=[dual_judge_shard], jobs=[job])
