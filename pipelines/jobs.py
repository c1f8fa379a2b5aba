"""The jobs of the code location, and where each one is defined.

Defined here, because they span domains or a domain has more than one:

- ``main_job``: ingest the default dataset and report retrieval quality;
- ``nightly_job``: everything except the partitioned answers and the report;
- ``judging_job`` and ``judging_shards_job``: the judging domain's two jobs (the whole
  dataset in one process; one query shard, partitioned by ``judges.shards``).

Defined beside the assets they run, as their domain's only job
(``eval_harness_pipelines.assets.<domain>``):

- ``agreement_job`` (agreement), ``calibration_job`` (calibration),
  ``quality_gate_job`` (quality_gates), ``report_job`` (reporting), ``record_job``
  (comparison: partitioned by record name, so outside main_job and nightly_job),
  ``ground_truth_job`` (query_sources: queries for a dataset without any, on request).
"""

from __future__ import annotations

import dagster as dg

from eval_harness.settings import Settings
from eval_harness_pipelines.assets import (
    agreement,
    calibration,
    comparison,
    judging,
    quality_gates,
    query_sources,
    reporting,
)

MAIN_JOB = "main_job"

main_job = dg.define_asset_job(
    MAIN_JOB,  # agreement stays out until dual_judge_scores fills the judge columns
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups(agreement.GROUP)
    - dg.AssetSelection.groups(calibration.GROUP)  # calibration_job: it rewrites config.yaml
    - dg.AssetSelection.groups(quality_gates.GROUP)  # partitioned: quality_gate_job
    - dg.AssetSelection.groups(judging.GROUP)  # may call paid APIs: judging_job
    - dg.AssetSelection.groups(judging.SHARD_GROUP)
    - dg.AssetSelection.groups(reporting.GROUP)
    - dg.AssetSelection.groups(comparison.GROUP)  # partitioned by record: record_job
    - dg.AssetSelection.groups(query_sources.GROUP),  # may call paid APIs: ground_truth_job
    description=("Ingest the default dataset and report retrieval quality at the configured "
                 "weights."))

NIGHTLY_JOB = "nightly_job"

# Everything except the partitioned answers and the report: ingest -> retrieval report;
# ground truth -> judges -> agreement (blocking kappa check) -> calibration (P@5 verdict
# check). The report follows every nightly run, failed or not, through a sensor
# (eval_harness_pipelines.schedules).
nightly_job = dg.define_asset_job(
    NIGHTLY_JOB, selection=dg.AssetSelection.all() - dg.AssetSelection.groups(quality_gates.GROUP)
    - dg.AssetSelection.groups(reporting.GROUP)
    - dg.AssetSelection.groups(judging.SHARD_GROUP)  # partitioned: judging_shards_job
    - dg.AssetSelection.groups(comparison.GROUP)  # partitioned by record: record_job
    - dg.AssetSelection.groups(query_sources.GROUP),  # asked for: ground_truth_job
    description="The nightly pipeline: ingest, retrieval report, dual judges, agreement gate, "
                "calibration and the P@5 verdict.")

JUDGING_JOB = "judging_job"

judging_job = dg.define_asset_job(
    JUDGING_JOB, selection=dg.AssetSelection.groups(judging.GROUP),
    description="Dual-judge relevance scores of the default dataset's ground truth.")

SHARD_JOB = "judging_shards_job"


def judging_shards_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """One query shard of the dual judges; ``judges.shards`` fixes its partitions (structure,
    read when the definitions load, like the answers' partitions)."""
    return dg.define_asset_job(
        SHARD_JOB, selection=dg.AssetSelection.assets(judging.SHARD_ASSET),
        partitions_def=judging.shard_partitions(settings.judges.shards),
        description="One query shard of the dual judges; backfill it to judge every shard "
                    "in parallel.")


def build_jobs(settings: Settings) -> list:
    """The jobs defined here (the domains' own jobs come with their definitions)."""
    return [main_job, nightly_job, judging_job, judging_shards_job(settings)]
