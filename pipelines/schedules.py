"""What starts runs without a person: the nightly schedules and the report sensors.

``nightly`` runs ``nightly_job`` and ``nightly_quality_gates`` gates yesterday's answers
partition, both on ``dagster.nightly`` of config.yaml (cron and timezone: structure, so they
come from the settings the definitions are built with). After every ``nightly_job`` run,
successful or not, a sensor asks for ``report_job`` on that run: a blocking check that stops
calibration must not stop the report that explains why.
"""

from __future__ import annotations

from datetime import UTC, timedelta

import dagster as dg

from eval_harness.settings import Settings
from eval_harness_pipelines.assets import quality_gates, reporting

SOURCE_RUN_TAG = "eval-harness/report-of"


def build_schedules(settings: Settings, nightly_job) -> list[dg.ScheduleDefinition]:
    """The nightly schedule of ``nightly_job`` and the one of ``quality_gate_job``."""
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
        day = (context.scheduled_execution_time.astimezone(UTC)
               - timedelta(days=1)).date()
        return dg.RunRequest(partition_key=day.isoformat(), run_key=f"quality-gates-{day}")

    return [nightly_schedule, quality_gate_schedule]


def _report_request(context: dg.RunStatusSensorContext) -> dg.RunRequest:
    run_id = context.dagster_run.run_id
    return dg.RunRequest(
        run_key=f"report-{run_id}", tags={SOURCE_RUN_TAG: run_id},
        run_config={"ops": {"run_report": {"config": {"source_run_id": run_id}}}})


def report_sensors(monitored_job) -> list[dg.SensorDefinition]:
    """Two sensors (run succeeded / run failed) that request the report of ``monitored_job``."""

    @dg.run_status_sensor(
        name="report_after_nightly", run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[monitored_job], request_job=reporting.report_job,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Writes the run report after nightly_job succeeds.")
    def after_success(context: dg.RunStatusSensorContext):
        return _report_request(context)

    @dg.run_failure_sensor(
        name="report_after_failed_nightly", monitored_jobs=[monitored_job],
        request_job=reporting.report_job, default_status=dg.DefaultSensorStatus.RUNNING,
        description="Writes the run report after nightly_job fails (e.g. a blocking check): "
                    "the report says what failed.")
    def after_failure(context: dg.RunFailureSensorContext):
        return _report_request(context)

    return [after_success, after_failure]
