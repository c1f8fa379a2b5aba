"""A stop signal leaves no Dagster run unfinished (eval_harness_pipelines.in_process): the
run of the job it ended is reported canceled, whatever moment the stop came at; a run that
finished on its own keeps its status. The CLI tests send real signals
(tests/test_stopping_signals.py, tests/pipelines/test_run.py); this one reaches the moments
a signal hits only by luck: before the run was created, and after it was created but before
it started (it stayed NOT_STARTED for good, "Starting..." in the UI)."""

from __future__ import annotations

import signal
import uuid

import dagster as dg
import pytest

from eval_harness_pipelines.in_process import (
    FAILURE_REASON_TAG,
    INTERRUPTED_REASON,
    end_stopped_run,
)


@dg.op
def noop() -> None:
    pass


@dg.job
def tiny_job() -> None:
    noop()


@pytest.fixture
def instance(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        yield instance


def created(instance, status: dg.DagsterRunStatus | None = None, tags=None) -> str:
    """A run of ``tiny_job`` in ``instance``, moved on to ``status`` (None: just created)."""
    run = instance.create_run_for_job(tiny_job, run_id=str(uuid.uuid4()), tags=tags)
    if status is dg.DagsterRunStatus.FAILURE:
        instance.report_run_failed(run)
    elif status is not None:
        event = {dg.DagsterRunStatus.STARTED: dg.DagsterEventType.RUN_START,
                 dg.DagsterRunStatus.SUCCESS: dg.DagsterEventType.RUN_SUCCESS}[status]
        instance.report_dagster_event(dg.DagsterEvent(event_type_value=event.value,
                                                      job_name=run.job_name),
                                      run_id=run.run_id)
    return run.run_id


def status(instance, run_id: str) -> str:
    return instance.get_run_by_id(run_id).status.value


def test_a_run_the_stop_caught_before_it_started_ends_canceled(instance):
    run_id = created(instance)
    assert status(instance, run_id) == "NOT_STARTED"
    assert end_stopped_run(instance, run_id, signal.SIGINT)
    assert status(instance, run_id) == "CANCELED"
    events = [e.dagster_event for e in instance.all_logs(run_id) if e.is_dagster_event]
    assert events[-1].message == ("Stopped by SIGINT (eval-harness): what its steps finished "
                                  "is kept.")


def test_a_started_run_and_one_dagster_failed_as_interrupted_end_canceled(instance):
    started = created(instance, dg.DagsterRunStatus.STARTED)
    interrupted = created(instance, dg.DagsterRunStatus.FAILURE,
                          tags={FAILURE_REASON_TAG: INTERRUPTED_REASON})
    assert status(instance, started) == "STARTED"
    assert end_stopped_run(instance, started, signal.SIGTERM)
    assert end_stopped_run(instance, interrupted, signal.SIGTERM)
    assert status(instance, started) == status(instance, interrupted) == "CANCELED"


def test_runs_that_finished_before_the_stop_and_runs_never_made_are_left_alone(instance):
    succeeded = created(instance, dg.DagsterRunStatus.SUCCESS)
    failed = created(instance, dg.DagsterRunStatus.FAILURE,
                     tags={FAILURE_REASON_TAG: "STEP_FAILURE"})
    assert not end_stopped_run(instance, succeeded, signal.SIGINT)
    assert not end_stopped_run(instance, failed, signal.SIGINT)
    assert not end_stopped_run(instance, str(uuid.uuid4()), signal.SIGINT)
    assert (status(instance, succeeded), status(instance, failed)) == ("SUCCESS", "FAILURE")
