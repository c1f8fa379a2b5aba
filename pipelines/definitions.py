"""The one Definitions object: every domain's assets and checks, resources, jobs."""

from __future__ import annotations

from datetime import timedelta, timezone

import dagster as dg

from assets import (agreement, calibration, ground_truth, judging, quality_gates, reports,
                    retrieval)
from assets.resources import DUCKDB_IO_MANAGER_KEY, default_resources, duckdb_io_manager
from eval_harness.settings import load_settings

MAIN_JOB = "main_job"

main_job = dg.define_asset_job(
    MAIN_JOB,  # agreement stays out until dual_judge_scores fills the judge columns
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups(agreement.GROUP)
    - dg.AssetSelection.groups(calibration.GROUP)  # calibration_job: it rewrites config.yaml
    - dg.AssetSelection.groups(quality_gates.GROUP)  # partitioned: quality_gate_job
    - dg.AssetSelection.groups(judging.GROUP)  # may call paid APIs: judging_job
    - dg.AssetSelection.groups(reports.GROUP),
    description="Ingest the default dataset and report retrieval quality at the configured weights.")

NIGHTLY_JOB = "nightly_job"

# Everything except the partitioned answers and the report: ingest -> retrieval report;
# ground truth -> judges -> agreement (blocking kappa check) -> calibration (P@5 verdict
# check). The report follows every nightly run, failed or not, through a sensor.
nightly_job = dg.define_asset_job(
    NIGHTLY_JOB, selection=dg.AssetSelection.all() - dg.AssetSelection.groups(quality_gates.GROUP)
    - dg.AssetSelection.groups(reports.GROUP),
    description="The nightly pipeline: ingest, retrieval report, dual judges, agreement gate, "
                "calibration and the P@5 verdict.")

# Cron and timezone must be known when the definitions load, so they are read here.
_settings = load_settings()
nightly_schedule = dg.ScheduleDefinition(
    name="nightly", job=nightly_job, cron_schedule=_settings.nightly_cron,
    execution_timezone=_settings.nightly_timezone,
    description="Runs nightly_job (dagster.nightly in config.yaml).")



@dg.schedule(name="nightly_quality_gates", job=quality_gates.quality_gate_job,
             cron_schedule=_settings.nightly_cron,
             execution_timezone=_settings.nightly_timezone,
             description="Runs quality_gate_job for yesterday's answers partition (UTC days).")
def quality_gate_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    # The answers partitions include today, which is still filling up: gate yesterday.
    day = (context.scheduled_execution_time.astimezone(timezone.utc) - timedelta(days=1)).date()
    return dg.RunRequest(partition_key=day.isoformat(), run_key=f"quality-gates-{day}")

defs = dg.Definitions.merge(
    ground_truth.defs,
    retrieval.defs,
    agreement.defs,
    calibration.defs,
    quality_gates.defs,
    judging.defs,
    reports.defs,
    dg.Definitions(jobs=[main_job, nightly_job],
                   schedules=[nightly_schedule, quality_gate_schedule],
                   sensors=reports.report_sensors(nightly_job),
                   resources=default_resources()),
    dg.Definitions(resources={DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(
        str(_settings.history_duckdb_path))}),
)
