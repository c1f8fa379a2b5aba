"""``eval-harness gate --partition DAY`` through Dagster: ``quality_gate_job`` in-process.

The run and its checks land in the project's Dagster run history, as runs from the UI do;
the report is then read from the stored results of that run, as the library's own gate run
reads it (:func:`eval_harness.gates.runner.stored_gate_report`).
"""

from __future__ import annotations

from datetime import date

from eval_harness import stopping
from eval_harness.errors import UserError
from eval_harness.gates.answers_mapping import answers_relation_of
from eval_harness.gates.window import TimeWindow
from eval_harness.settings import Settings
from eval_harness.store import locate_store
from eval_harness_pipelines.in_process import execute_job

# Dagster (and the Dagster definitions), and the gate runner with scipy.stats, take seconds to
# import and only `gate --partition` needs them, while the console command imports this module
# for every command: they are imported where the job runs.

# a blocking check failed (eval_harness_pipelines.check_outcomes, or Dagster's own error):
# exit 1, not 2
EXPECTED_CHECK_FAILURE = ("BlockingCheckFailed", "DagsterAssetCheckFailedError")


def root_cause(error) -> str:
    """The innermost cause of a Dagster step failure (SerializableErrorInfo), as one line."""
    while error.cause is not None:
        error = error.cause
    lines = error.message.strip().splitlines()
    text = lines[0] if lines else error.cls_name or "unknown error"
    return text.split(": ", 1)[1] if text.startswith(f"{error.cls_name}: ") else text


def run_gate_job(settings: Settings, day: date, gates):
    """Run ``quality_gate_job`` for partition ``day`` in-process; the report of its checks."""
    import dagster as dg  # these: only where the job runs (see the imports)

    from eval_harness.gates.runner import stored_gate_report
    from eval_harness_pipelines.assets.quality_gates import (QUALITY_GATE_JOB,
                                                             quality_gate_definitions)
    from eval_harness_pipelines.resources import default_resources

    location = locate_store(settings)
    relation = answers_relation_of(location, settings)  # a bad mapping: one sentence, no run
    resources = default_resources(
        config_path=str(settings.config_path) if settings.config_path else None,
        database_url=settings.database_url)
    defs = dg.Definitions.merge(quality_gate_definitions(settings),
                                dg.Definitions(resources=resources))
    # The CLI prints its own one-line errors; a failing blocking check is no crash to log.
    run_config = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    result = execute_job(settings, defs.resolve_job_def(QUALITY_GATE_JOB),
                         partition_key=day.isoformat(), run_config=run_config,
                         raise_on_error=False)  # a stop: its run ends as canceled
    stopping.check()  # a stop signal ended the run: say so, not that a step failed
    for event in result.all_events:
        if event.is_step_failure:
            error = event.event_specific_data.error
            if error.cls_name not in EXPECTED_CHECK_FAILURE:
                raise UserError(f"the quality-gate job failed: {root_cause(error)}")
    checked = {e.check_name for e in result.get_asset_check_evaluations()}
    for gate in gates:
        if gate.name not in checked:
            raise UserError(f"the quality-gate job did not run the {gate.name} check; "
                            "see the Dagster run history.")
    return stored_gate_report(location, TimeWindow.day(day), gates, relation=relation,
                              run_id=result.run_id)
