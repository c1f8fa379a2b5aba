"""What every ``eval-harness`` subcommand module shares: the user-facing error, the sentences
for an internal error and a lost store, the config notice, and parsing ``--since``.

Kept apart from :mod:`eval_harness.cli`, which imports the subcommand modules, so they can
import this at the top instead of reaching back into ``cli`` at call time.
"""

from __future__ import annotations

import logging
import tempfile
import traceback
from datetime import date, datetime, time, timezone
from typing import TYPE_CHECKING

# the one-sentence error, shared with the Dagster-backed commands
from eval_harness.errors import UserError
from eval_harness.store.connection import redact_conninfo, server_failure

if TYPE_CHECKING:
    from eval_harness.settings import Settings

CliError = UserError  # a user-facing error: printed as one sentence, exit code 2


def internal_error(exc: Exception) -> str:
    """One sentence for an unexpected exception (a bug, a library failing inside): exit 1
    means "the work ran and found a failure" and CI acts on it, so this is exit 2 like any
    other "could not run". The traceback goes to a temporary file the sentence names; both
    are redacted (an exception may quote a connection string)."""
    lines = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", prefix="eval-harness-error-",
                                         suffix=".txt", delete=False) as out:
            out.write(redact_conninfo("".join(traceback.format_exception(exc))))
        where = f"; traceback: {out.name}"
    except OSError:
        where = ""
    return redact_conninfo(f"internal error ({what}); the command could not run, no check "
                           f"failed{where}; please report it.")


def store_lost_message(settings, lost) -> str:
    """One sentence when the store went away under paid work (``lost``: a
    :class:`~eval_harness.judges.client.stops.StoreLost`): what happened, what was kept, where the
    server's log is, and that a rerun resumes."""
    error = getattr(lost, "error", None) or lost
    what = server_failure(settings, error) if settings is not None else None
    if what is None:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        what = f"the store failed under the run ({lines[0]})"
    kept = getattr(lost, "kept", None)
    again = ("run the same command again once the server is back"
             if settings is None or settings.database_url else
             "run the same command again (it starts the embedded server again)")
    return redact_conninfo(
        f"{what.rstrip('.')}; the run stopped at once and sent no more paid requests"
        + (f" ({kept})" if kept else "") + f"; {again}: it resumes with the rest.")


class _IgnoredErrors(logging.Filter):
    """psycopg's warnings about errors it ignored while cleaning up after an earlier one
    (a rollback, a pipeline or a cancel on a lost connection): the command reports that
    earlier error itself, in one sentence."""

    _PREFIXES = ("error ignored", "query cancellation interrupted",
                 "query not terminated after cancellation")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._PREFIXES)


_IGNORED_ERRORS = _IgnoredErrors()


def quiet_psycopg_warnings() -> None:
    """Leave out psycopg's "error ignored ..." warnings (see :class:`_IgnoredErrors`)."""
    for name in ("psycopg", "psycopg.transaction"):  # a logger's filters skip its children
        logger = logging.getLogger(name)
        if _IGNORED_ERRORS not in logger.filters:
            logger.addFilter(_IGNORED_ERRORS)


def describe_config(settings: "Settings") -> str:
    """Which config file was read and why, or that none was and what the defaults mean for
    the store: the file's absolute path, or "none (...): defaults apply; ...". A command
    started in the wrong folder must say so, not quietly start a new embedded store there."""
    origin = settings.config_origin
    if settings.config_path is not None:
        why = {"environment": " (from EVAL_HARNESS_CONFIG)",
               "working directory": " (found in the working directory)"}.get(origin, "")
        return f"{settings.config_path}{why}"
    store = ("the store at DATABASE_URL" if settings.database_url
             else f"an embedded store in {settings.embedded_pgdata}")
    return (f"none (no config.yaml in {settings.root}, EVAL_HARNESS_CONFIG unset): defaults "
            f"apply, with {store}")


def config_notice(settings: "Settings") -> str | None:
    """The one line a command prints on stderr about its config, unless the file was named
    on the command line (``--config``): then the person already knows which one."""
    if settings.config_origin == "option":
        return None
    return f"eval-harness: config: {describe_config(settings)}"


def parse_since(text: str) -> datetime:
    """``YYYY-MM-DD`` (midnight UTC) or an ISO-8601 timestamp with a timezone."""
    try:
        return datetime.combine(date.fromisoformat(text), time(0), tzinfo=timezone.utc)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--since {text!r} is neither a date YYYY-MM-DD nor an ISO-8601 "
                         "timestamp (e.g. 2025-03-03T12:00:00Z).") from None
    if moment.tzinfo is None:
        raise CliError(f"--since {text!r} has no timezone; add one (e.g. {text}Z).")
    return moment
