"""A job run in-process in the project's Dagster instance, ended in its run history when a
stop signal (SIGINT, SIGTERM: :mod:`eval_harness.stopping`) ends it.

Dagster leaves two traces of a stopped in-process run that are not true. A stop that lands
after the run was created but before it started leaves it ``NOT_STARTED`` for good (the UI
shows "Starting..." forever). A stop inside a step ends it as a failure, "Execution was
interrupted unexpectedly. No user initiated termination request was found", although the
user did ask. So once the job returns (or raises) after a stop, its run, if it is still
unfinished or ended by the interrupt, is reported canceled: the status Dagster's own
termination gives. A run that finished before the stop keeps its status.
"""

from __future__ import annotations

import signal
import uuid
from typing import TYPE_CHECKING, Any

from eval_harness_pipelines.dagster_home import open_instance

from eval_harness import stopping
from eval_harness.settings import Settings

# Dagster takes seconds to import and only `run` and `gate --partition` need it, while the
# console command imports this module for every command: it is imported where it runs.
if TYPE_CHECKING:
    import dagster as dg

# Dagster's tag on a run its interrupt ended (RunFailureReason.UNEXPECTED_TERMINATION)
FAILURE_REASON_TAG, INTERRUPTED_REASON = "dagster/failure_reason", "UNEXPECTED_TERMINATION"


def execute_job(settings: Settings, job: dg.JobDefinition, **options: Any):
    """``job.execute_in_process(**options)`` in the DAGSTER_HOME instance (opened under its
    lock, :func:`~eval_harness_pipelines.dagster_home.open_instance`); after a stop signal
    its run is ended as canceled (module docstring) before the stop goes on."""
    run_id = str(uuid.uuid4())  # known before Dagster creates the run: a stop may come first
    with open_instance(settings) as instance:
        try:
            return job.execute_in_process(instance=instance, run_id=run_id, **options)
        finally:
            signum = stopping.requested()
            if signum is not None:
                end_stopped_run(instance, run_id, signum)


def end_stopped_run(instance: dg.DagsterInstance, run_id: str, signum: int) -> bool:
    """Report run ``run_id`` canceled if the stop by ``signum`` left it unfinished or ended it
    (a run never created, or finished before the stop, is left alone); True when it did."""
    import dagster as dg  # only where it runs: see the imports

    run = instance.get_run_by_id(run_id)
    if run is None:
        return False
    ended_by_stop = (run.status == dg.DagsterRunStatus.FAILURE
                     and run.tags.get(FAILURE_REASON_TAG) == INTERRUPTED_REASON)
    if run.is_finished and not ended_by_stop:
        return False
    instance.report_run_canceled(run, message=f"Stopped by {signal.Signals(signum).name} "
                                              "(eval-harness): what its steps finished is kept.")
    return True
