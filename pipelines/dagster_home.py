"""The Dagster instance folder (DAGSTER_HOME) that eval-harness runs use.

``dagster.yaml`` is written by us (recognised by its first line) and rewritten when the
settings change; a file someone wrote by hand is left alone. It names our compute log
manager (:mod:`eval_harness_pipelines.compute_logs`: Dagster's own local one, whose helper
processes a Ctrl-C in the terminal does not reach). With ``DAGSTER_POSTGRES_URL``
set, Dagster's own run, event and schedule storage goes to that Postgres (dagster-postgres),
so several machines share one run history. The file names the environment variable, never
the URL, so no password is written to disk. With ``judges.shards_at_once`` set, it is the
default limit of Dagster's concurrency pools: the harness declares one pool, the judge shards'
(:func:`eval_harness_pipelines.assets.judging.judge_pool`).

Several processes may start on the same folder at once (two ``gate --partition`` jobs in CI,
``run`` next to a gate). Dagster's SQLite storage creates its tables on first use by checking
whether they exist and then creating them, and two processes doing that together crash with
``table ... already exists``. So writing ``dagster.yaml`` and opening the instance happen
under one inter-process file lock in the folder (:data:`INSTANCE_LOCK`): the second process
waits until the first has created the tables, then finds them. Only the opening is
serialised, not the runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from eval_harness.errors import UserError
from eval_harness.files import write_report
from eval_harness.settings import Settings
from eval_harness.store.connection import redact_conninfo

# Dagster takes seconds to import, and it and filelock (a dependency of Dagster's) serve only
# `run` and `gate --partition`, while the console command imports this module for every
# command: they are imported where they run.
if TYPE_CHECKING:
    import dagster as dg

# The marker keeps its first wording (files written by earlier versions are still ours).
MARKER = "# Written by eval-harness (eval_harness/dagster_home.py); edit config.yaml instead."
INSTANCE_LOCK = ".eval-harness-instance.lock"  # in DAGSTER_HOME; left in place, it is empty
LOCK_TIMEOUT_SECONDS = 300.0  # creating a new SQLite instance takes seconds, not minutes


def instance_yaml(settings: Settings) -> str:
    # compute logs: Dagster's local files, with helpers a Ctrl-C does not reach
    # (eval_harness_pipelines.compute_logs)
    lines = [MARKER, "telemetry:", "  enabled: false", "compute_logs:",
             "  module: eval_harness_pipelines.compute_logs",
             "  class: TerminalComputeLogManager", "  config:", "    dagster_home:",
             "      env: DAGSTER_HOME"]
    at_once = settings.judges.shards_at_once  # the judge shards' pools (assets.judging)
    if at_once is not None:
        lines += ["concurrency:", "  pools:", f"    default_limit: {at_once}"]
    if settings.dagster_postgres_url:
        lines += ["storage:", "  postgres:", "    postgres_url:",
                  "      env: DAGSTER_POSTGRES_URL"]
    return "\n".join(lines) + "\n"


def prepare_dagster_home(settings: Settings) -> Path:
    """Point DAGSTER_HOME at the project folder (unless set) and keep its dagster.yaml current.

    Raises :class:`UserError` (exit 2, one sentence) when the folder cannot be created or
    written, or another process holds its lock for longer than :data:`LOCK_TIMEOUT_SECONDS`.
    """
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(settings.dagster_home)))
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(home, exc) from None
    with instance_lock(home):
        path = home / "dagster.yaml"
        wanted = instance_yaml(settings)
        try:
            current = path.read_text(encoding="utf-8") if path.exists() else None
            if current is None or (current.startswith(MARKER) and current != wanted):
                write_report(home, path.name, wanted)  # atomic: a reader never sees half
        except OSError as exc:
            raise _unusable(home, exc) from None
    return home


@contextmanager
def instance_lock(home: Path) -> Iterator[None]:
    """Hold the inter-process lock of DAGSTER_HOME ``home`` (module docstring)."""
    from filelock import FileLock, Timeout  # only where it runs: see the imports

    lock = FileLock(str(home / INSTANCE_LOCK), timeout=LOCK_TIMEOUT_SECONDS)
    try:
        lock.acquire()
    except Timeout:
        raise UserError(f"another eval-harness process has held the lock of DAGSTER_HOME {home} "
                        f"for {LOCK_TIMEOUT_SECONDS:g} s ({home / INSTANCE_LOCK}); wait for it "
                        "to finish or stop it, then try again.") from None
    except OSError as exc:
        raise _unusable(home, exc) from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def open_instance(settings: Settings) -> Iterator[dg.DagsterInstance]:
    """The Dagster instance of DAGSTER_HOME (prepared first), opened under its lock.

    A failure to open it (a damaged or unwritable storage) is a :class:`UserError` naming the
    folder: exit 2, never the exit 1 of a failed check.
    """
    import dagster as dg  # only where it runs: see the imports

    home = prepare_dagster_home(settings)
    with instance_lock(home):
        try:
            instance = dg.DagsterInstance.get()
        except Exception as exc:  # SQLite, SQLAlchemy, Dagster's own: all mean "cannot open"
            reason = redact_conninfo(_first_line(exc))  # a storage URL may be quoted
            raise UserError(f"the Dagster instance in DAGSTER_HOME {home} cannot be opened "
                            f"({type(exc).__name__}: {reason}); check that folder (and "
                            "DAGSTER_POSTGRES_URL when set), or point DAGSTER_HOME at another "
                            "one.") from None
    with instance:
        yield instance


def _unusable(home: Path, exc: OSError) -> UserError:
    reason = exc.strerror or type(exc).__name__
    return UserError(f"DAGSTER_HOME {home} cannot be used as Dagster's instance folder "
                     f"({reason}); point DAGSTER_HOME (or dagster.home in config.yaml) at a "
                     "writable folder.")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
