"""Merge-gate domain: a record of the retrieval metrics per query, and its comparison with the
baseline record.

``retrieval_record`` is partitioned by record name (dynamic partitions ``records``: ``main``,
``pr-7``, ...): materializing a partition records the configured dataset's per-query metrics
under that name, as ``eval-harness report --record NAME`` does, and its blocking check
``no_worse_than_baseline`` compares the record with ``ci.compare.baseline`` (default
``main``) as ``eval-harness compare`` does. A candidate worse on a blocking metric fails the
check with ERROR severity, which stops whatever is downstream of the record in that run;
records that cannot be compared (no baseline yet, another corpus or ground truth) warn; the
baseline's own partition passes.
"""


from collections.abc import Iterator

import dagster as dg

from eval_harness.comparison.compare import compare_records
from eval_harness.comparison.output import format_table, headline, markdown
from eval_harness.comparison.records import record_retrieval
from eval_harness.errors import UserError
from eval_harness.retrieval.report import configured_retrieval_report
from eval_harness_pipelines.check_outcomes import check_outcome, readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore

GROUP = "records"
RECORDS = dg.DynamicPartitionsDefinition(name="records")
CHECK = "no_worse_than_baseline"


class RecordConfig(dg.Config):
    dataset: str | None = None


@dg.asset(group_name=GROUP, deps=["ground_truth"], partitions_def=RECORDS,
          check_specs=[dg.AssetCheckSpec(CHECK, asset="retrieval_record", blocking=True,
                                         description=(
                                             "Blocking: the record is not worse than "
                                             "ci.compare.baseline on any blocking metric "
                                             "(paired test, Holm, beyond ci.compare.margin)."))],
          description="Each ground-truth query's P@5, Recall@5, nDCG@10 and MRR@10 at the "
                      "configured weights, recorded under the partition's name for `compare`.")
def retrieval_record(context: dg.AssetExecutionContext, config: RecordConfig,
                     settings: EvalSettings,
                     store: LiveStore) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    cfg = settings.load()
    dataset = config.dataset or cfg.default_dataset
    name = context.partition_key
    baseline = cfg.ci.compare.baseline
    with store.location().connection() as conn:
        report = configured_retrieval_report(conn, cfg, dataset)
        stored = record_retrieval(conn, name, report, root=cfg.root)
        conn.commit()
        comparison, reason = None, ""
        if name != baseline:
            try:
                comparison = compare_records(conn, cfg, baseline, name, dataset=dataset)
            except UserError as exc:
                reason = str(exc)
    context.log.info(stored.describe())
    yield dg.MaterializeResult(metadata=readable({
        "dataset": dataset, "record": name, "record_id": stored.record_id,
        "queries": stored.units, "semantic_weight": report.semantic_weight,
        "keyword_weight": report.keyword_weight}))
    if name == baseline:
        yield dg.AssetCheckResult(check_name=CHECK, passed=True, metadata={
            "verdict": f"'{name}' is the baseline (ci.compare.baseline)"})
        return
    if comparison is None or not comparison.comparable:
        text = reason if comparison is None else headline(comparison)
        yield dg.AssetCheckResult(check_name=CHECK, passed=False,
                                  severity=dg.AssetCheckSeverity.WARN,
                                  metadata={"verdict": text})
        return
    context.log.info(format_table(comparison))
    worse = [row for row in comparison.worse if row.blocking]
    metadata = {"verdict": headline(comparison), "baseline": baseline,
                "comparison": dg.MetadataValue.md(markdown(comparison))}
    metadata.update({f"{row.name}_difference": row.difference for row in comparison.rows})
    result = dg.AssetCheckResult(
        check_name=CHECK, passed=not worse, metadata=readable(metadata),
        severity=dg.AssetCheckSeverity.ERROR if worse else dg.AssetCheckSeverity.WARN)
    yield from check_outcome(
        result, name=CHECK, blocking=True,
        figure=", ".join(f"{row.name} {row.difference:+.4f} [{row.interval[0]:+.4f}, "
                         f"{row.interval[1]:+.4f}] against '{baseline}'" for row in worse),
        figures={row.name: row.difference for row in worse})


record_job = dg.define_asset_job(
    "record_job", selection=dg.AssetSelection.groups(GROUP), partitions_def=RECORDS,
    description="Record the default dataset's retrieval metrics per query under the "
                "partition's name and compare them with ci.compare.baseline.")

defs = dg.Definitions(assets=[retrieval_record], jobs=[record_job])
