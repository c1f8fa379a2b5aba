"""Judging domain: two independent relevance judges score every ground-truth pair.

``dual_judge_scores`` judges the whole dataset in one process (the nightly and judging jobs,
``eval-harness run``). ``dual_judge_shard`` is the same work cut into ``judges.shards``
static partitions "0".."n-1" by query (:func:`eval_harness.judges.dual.shards.shard_of`): a
backfill of ``judging_shards_job`` launches one run per shard, each in its own process, and
the shards run side by side (each holds its own shard's judge lock). ``dual_judge_scores``
depends on every partition of it: after a backfill it finds every reply in the cache, pays
nothing and brings the dataset-wide figures (pooled kappa, write-back) up to date; downstream
agreement and calibration read it as they read an unsharded run's. The shard asset is kept out of
the nightly and main jobs (a job's assets share one partitioning).
"""


from collections.abc import Iterator

import dagster as dg

from eval_harness.agreement.people import give_anchors_verdicts
from eval_harness.judges.anchors.drift import drift_check, stored_comparisons
from eval_harness.judges.dual.run import judge_dataset
from eval_harness_pipelines.check_outcomes import check_outcome, readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore

GROUP = "judging"


class JudgingConfig(dg.Config):
    dataset: str | None = None  # a key of `datasets` in config.yaml; default_dataset if unset
    limit: int | None = None    # judge only the first N ground-truth queries
    batch: bool = False            # providers' batch APIs (nightly: cheaper, slower)


SHARD_GROUP = "judging_shards"
SHARD_ASSET = "dual_judge_shard"


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
        if cfg.judges.anchors.enabled:  # verdicts people gave since: this night's drift check
            give_anchors_verdicts(conn, dataset)
            conn.commit()
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


# Declared blocking like the kappa check; judges.drift.blocking: false makes a failure a WARN
# result, which Dagster does not block on (its metadata says blocks_downstream: false).
@dg.asset_check(  # type: ignore[arg-type]  # a check may yield its result
    asset=dual_judge_scores, blocking=True,
    description="Blocking: each judge re-judged the frozen anchor set (judges.anchors) past "
                "the cache; fails when the lower bound of its label flip rate exceeds "
                "judges.drift.max_flip_rate or its agreement with the human verdicts on "
                "anchors falls below judges.drift.min_human_agreement. judges.drift.blocking: "
                "false makes a failure a warning.")
def judge_drift(context: dg.AssetCheckExecutionContext, settings: EvalSettings,
                store: LiveStore) -> Iterator[dg.AssetCheckResult]:
    cfg = settings.load()
    drift = cfg.judges.drift
    event = context.instance.get_latest_materialization_event(dual_judge_scores.key)
    seen = ({} if event is None or event.asset_materialization is None else
            {key: value.value for key, value in event.asset_materialization.metadata.items()})
    dataset = seen.get("dataset") or cfg.default_dataset
    with store.location().connection() as conn:
        # the comparisons of the run that materialized the asset (its run id is the judge run's)
        comparisons = stored_comparisons(conn, dataset, run_id=seen.get("run_id")
                                         or (None if event is None else event.run_id))
    result, reasons, figures = drift_result(comparisons, drift, dataset=dataset)
    yield from check_outcome(result, name="judge_drift", blocking=True,
                             figure="; ".join(reasons), figures=figures)


def drift_result(comparisons, drift, *, dataset: str):
    """The ``judge_drift`` result of the newest anchor comparisons
    (:func:`eval_harness.judges.anchors.drift.drift_check`), the failure reasons and the
    figures (the worst judge's flip rate and its bound against the thresholds)."""
    check = drift_check(comparisons, drift, dataset=dataset)
    severity = dg.AssetCheckSeverity.ERROR if check.blocking else dg.AssetCheckSeverity.WARN
    result = dg.AssetCheckResult(
        passed=check.passed, severity=severity, description=check.description,
        metadata=readable({**check.figures, "dataset": dataset,
                           "blocks_downstream": check.blocking, **check.per_judge}))
    return result, list(check.reasons), check.figures


# The domain's two jobs, judging_job and judging_shards_job, are in eval_harness_pipelines.jobs.
defs = dg.Definitions(assets=[dual_judge_scores], asset_checks=[judge_drift])


def shard_partitions(shards: int) -> dg.StaticPartitionsDefinition:
    """The static partitions "0" .. "shards - 1" of the shard asset."""
    return dg.StaticPartitionsDefinition([str(i) for i in range(shards)])


def judge_pool(settings) -> str:
    """The concurrency pool of the judge shards: one per set of providers the two judges call
    ("judges_anthropic_openai", "judges_local"), so the UI shows a shard waiting on the
    providers it would send to. ``judges.shards_at_once`` is the pools' limit."""
    providers = sorted({spec.split(":", 1)[0] for spec in
                        (settings.judges.judge1, settings.judges.judge2)})
    return "judges_" + "_".join(providers)


def shard_definitions(settings) -> dg.Definitions:
    """The partitioned judging asset; ``judges.shards`` fixes the partitions (like the
    answers' partitions, they are structure, read when the definitions load)."""
    partitions = shard_partitions(settings.judges.shards)
    count = settings.judges.shards

    @dg.asset(
        name=SHARD_ASSET, group_name=SHARD_GROUP, deps=["ground_truth"],
        partitions_def=partitions, pool=judge_pool(settings),
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

    return dg.Definitions(assets=[dual_judge_shard])
