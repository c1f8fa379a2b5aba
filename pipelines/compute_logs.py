"""Dagster's compute logs for eval-harness runs, without tracebacks on Ctrl-C.

Dagster keeps each step's stdout and stderr in files (the UI shows them) and mirrors them to
the terminal through two helper processes per stream: ``tail -F`` and a small Python script,
``watch_orphans``, that ends the tail if this process dies. Both are started in this
process's group, so a Ctrl-C in the terminal, which goes to the whole foreground group, also
reaches them: each ``watch_orphans`` prints a ``KeyboardInterrupt`` traceback above the one
line the command prints, and the ``tail`` dies before the rest of the step's output is shown.

:class:`TerminalComputeLogManager` is Dagster's own local manager (same files, same folder
``DAGSTER_HOME/storage``) that starts those helpers with SIGINT blocked: a blocked signal
stays blocked across ``exec``, so they never see the Ctrl-C, and Dagster ends them itself
(SIGTERM) when the step's capture ends, stopped or not. This process blocks SIGINT only
while the helpers are being started (a Ctrl-C then is delivered the moment it is unblocked).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from dagster import Field, StringSource

# Dagster exports no name for its local manager; this module path is the one its own
# dagster.yaml documentation gives for `compute_logs: module:`
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager

if TYPE_CHECKING:
    from dagster._core.storage.compute_log_manager import CapturedLogContext
    from dagster._serdes import ConfigurableClassData


class TerminalComputeLogManager(LocalComputeLogManager):
    """:class:`LocalComputeLogManager` whose terminal mirroring helpers ignore Ctrl-C.

    Configured with ``dagster_home`` (the instance folder, usually ``{env: DAGSTER_HOME}``);
    the logs go where Dagster's default manager puts them, its ``storage`` folder."""

    @classmethod
    def config_type(cls) -> dict:
        return {"dagster_home": StringSource,
                "polling_timeout": Field(float, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None,
                          config_value) -> TerminalComputeLogManager:
        # the folder Dagster's default instance gives its local manager
        return cls(base_dir=os.path.join(config_value["dagster_home"], "storage"),
                   polling_timeout=config_value.get("polling_timeout"), inst_data=inst_data)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Generator[CapturedLogContext, None, None]:
        with ExitStack() as stack:
            with sigint_blocked():  # the helpers start now, and inherit the blocked signal
                captured = stack.enter_context(super().capture_logs(log_key))
            yield captured


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while the block runs (a Ctrl-C meanwhile is delivered
    when it ends); processes started meanwhile keep it blocked. A no-op where signal masks
    do not exist (Windows, where Dagster mirrors logs another way)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
