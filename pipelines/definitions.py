"""The Definitions: every domain's assets and checks, resources, jobs, schedules, sensors.

:func:`build_defs` builds them from a :class:`~eval_harness.settings.Settings`; nothing here
reads config.yaml or the environment at import. Dagster's tools (``dagster dev``, the
webserver, the daemon) call :func:`defs` when they load the code location; it reads the
settings then (``EVAL_HARNESS_CONFIG`` or ./config.yaml, and the environment). The CLI passes
its own settings to :func:`build_defs`.
"""

from __future__ import annotations

from datetime import timedelta, timezone

import dagster as dg

from eval_harness_pipelines.assets import (agreement, calibration, datasets, judging,
                                         quality_gates, reporting, retrieval)
from eval_harness_pipelines.resources import DUCKDB_IO_MANAGER_KEY, default_resources, duckdb_io_manager
from eval_harness.settings import Settings, load_settings

MAIN_JOB = "main_job"

main_job = dg.define_asset_job(
    MAIN_JOB,  # agreement stays out until dual_judge_scores fills the judge columns
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups(agreement.GROUP)
    - dg.AssetSelection.groups(calibration.GROUP)  # calibration_job: it rewrites config.yaml
    - dg.AssetSelection.groups(quality_gates.GROUP)  # partitioned: quality_gate_job
    - dg.AssetSelection.groups(judging.GROUP)  # may call paid APIs: judging_job
    - dg.AssetSelection.groups(judging.SHARD_GROUP)
    - dg.AssetSelection.groups(reporting.GROUP),
    description="Ingest the default dataset and report retrieval quality at the configured weights.")

NIGHTLY_JOB = "nightly_job"

# Everything except the partitioned answers and the report: ingest -> retrieval report;
# ground truth -> judges -> agreement (blocking kappa check) -> calibration (P@5 verdict
# check). The report follows every nightly run, failed or not, through a sensor.
nightly_job = dg.define_asset_job(
    NIGHTLY_JOB, selection=dg.AssetSelection.all() - dg.AssetSelection.groups(quality_gates.GROUP)
    - dg.AssetSelection.groups(reporting.GROUP)
    - dg.AssetSelection.groups(judging.SHARD_GROUP),  # partitioned: judging_shards_job
    description="The nightly pipeline: ingest, retrieval report, dual judges, agreement gate, "
                "calibration and the P@5 verdict.")

def build_defs(settings: Settings) -> dg.Definitions:
    """Every definition, with the structure ``settings`` fixes: the nightly cron and timezone,
    the answers partitions and gate checks, and the DuckDB history file. The resources read
    the same config file again at run time, for everything that may change between runs."""
    nightly_schedule = dg.ScheduleDefinition(
        name="nightly", job=nightly_job, cron_schedule=settings.nightly_cron,
        execution_timezone=settings.nightly_timezone,
        description="Runs nightly_job (dagster.nightly in config.yaml).")

    @dg.schedule(name="nightly_quality_gates", job=quality_gates.quality_gate_job,
                 cron_schedule=settings.nightly_cron,
                 execution_timezone=settings.nightly_timezone,
                 description="Runs quality_gate_job for yesterday's answers partition (UTC "
                             "days).")
    def quality_gate_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        # The answers partitions include today, which is still filling up: gate yesterday.
        day = (context.scheduled_execution_time.astimezone(timezone.utc)
               - timedelta(days=1)).date()
        return dg.RunRequest(partition_key=day.isoformat(), run_key=f"quality-gates-{day}")

    config_path = str(settings.config_path) if settings.config_path else None
    return dg.Definitions.merge(
        datasets.defs,
        retrieval.defs,
        agreement.defs,
        calibration.defs,
        quality_gates.quality_gate_definitions(settings),
        judging.defs,
        judging.shard_definitions(settings),
        reporting.defs,
        dg.Definitions(jobs=[main_job, nightly_job],
                       schedules=[nightly_schedule, quality_gate_schedule],
                       sensors=reporting.report_sensors(nightly_job),
                       resources=default_resources(config_path=config_path)),
        dg.Definitions(resources={DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(
            str(settings.history_duckdb_path))}),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """Dagster's entry point (workspace.yaml, ``[tool.dagster]``): the settings of the
    environment Dagster runs in, read when it loads the definitions."""
    return build_defs(load_settings())
