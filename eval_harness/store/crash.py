"""When the server dies under the harness: one sentence saying what, where and why.

A backend that crashes (a signal, a PANIC) makes PostgreSQL end every connection and run
crash recovery; clients then see "server closed the connection unexpectedly", "terminating
connection because of crash of another server process" or "the database system is in
recovery mode". None of that says why. The server log does: this module finds the line.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg

# What a client sees when the server (not the query) failed.
_LOST_SERVER = re.compile(
    r"server closed the connection unexpectedly|terminating connection because of crash"
    r"|database system is in recovery mode|database system is (starting up|shutting down)"
    r"|connection (is lost|is closed)|consuming input failed|connection already closed"
    r"|the connection is lost|no connection to the server|terminating connection due to "
    r"administrator command", re.IGNORECASE)

# The lines of a server log that say a process crashed, most telling first...
_CRASHES = (
    re.compile(r"was terminated by signal \d+(: [^\n]*)?"),
    re.compile(r"was terminated by exception [^\n]*"),
    re.compile(r"PANIC:\s+[^\n]*"),
)
# ...and those that may say why the server stopped or would not start.
_REASONS = _CRASHES + (
    re.compile(r"exited with exit code \d+"),
    re.compile(r"FATAL:\s+[^\n]*"),
)
# ...and the line saying the server was asked to stop (pg_ctl stop, a service manager)
_SHUTDOWN = re.compile(r"received (smart|fast|immediate) shutdown request")
_RUNNING = re.compile(r"DETAIL:\s+Failed process was running: (.*)")
_TAIL_BYTES = 256 * 1024


_RECOVERING = re.compile(r"database system is (in recovery mode|starting up|shutting down|"
                         r"not yet accepting connections)", re.IGNORECASE)


def is_recovering(error: BaseException | str) -> bool:
    """True when a refused connection means the server is restarting after a crash."""
    return bool(_RECOVERING.search(str(error)))


def is_server_failure(error: BaseException | str) -> bool:
    """True when ``error`` (or its text) means the server went away, not that a query failed."""
    if isinstance(error, psycopg.OperationalError) and getattr(error, "sqlstate", None) is None:
        return True  # psycopg raises these without a SQLSTATE when the socket dies
    return bool(_LOST_SERVER.search(str(error)))


def last_crash(log: Path | None, *, since: int = 0) -> str | None:
    """The line saying a server process crashed (signal, exception, PANIC), or None."""
    return last_reason(log, since=since, patterns=_CRASHES)


def last_reason(log: Path | None, *, since: int = 0,
                patterns: tuple[re.Pattern, ...] = _REASONS) -> str | None:
    """The most telling line about a failure in the server log (from byte ``since``), or None.

    ``client backend (PID 7) was terminated by signal 4: Illegal instruction, while running:
    CREATE INDEX ...`` for a crashed backend; a PANIC or FATAL line otherwise.
    """
    if log is None or not log.is_file():
        return None
    try:
        with log.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(since, size - _TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = text.splitlines()
    for pattern in patterns:
        for index in range(len(lines) - 1, -1, -1):
            found = pattern.search(lines[index])
            if not found:
                continue
            reason = _who(lines[index], found) + found.group(0).rstrip(".")
            if index + 1 < len(lines):
                running = _RUNNING.search(lines[index + 1])
                if running:
                    reason += f", while running: {_shorten(running.group(1))}"
            return reason
    return None


def server_failure_message(error: BaseException | str, log: Path | None, *,
                           where: str = "the PostgreSQL server", since: int = 0,
                           wait_seconds: float = 3.0) -> str | None:
    """One sentence for a lost server, or None when ``error`` is an ordinary query error.

    The postmaster logs why a backend died just after the client saw its socket close, so
    the log is polled for up to ``wait_seconds``. Lines before byte ``since`` (written
    before this process attached) are not taken as the reason.
    """
    if not is_server_failure(error):
        return None
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    deadline = time.monotonic() + wait_seconds
    reason = last_reason(log, since=since)
    while reason is None and log is not None and time.monotonic() < deadline:
        time.sleep(0.1)
        reason = last_reason(log, since=since)
    if log is None:
        return (f"{where} went away ({first}); the server's log says why "
                "(look for 'terminated by signal', PANIC or 'shutdown request').")
    if reason is None:
        return f"{where} went away ({first}); server log: {log}."
    stopped = None if last_crash(log, since=since) else last_reason(log, since=since,
                                                                     patterns=(_SHUTDOWN,))
    if stopped is not None:  # asked to stop, not crashed: its other lines are the shutdown's
        return f"{where} was shut down ({stopped}); server log: {log}."
    return f"{where} crashed ({reason}); server log: {log}."


def _who(line: str, found: re.Match) -> str:
    """'client backend (PID 7) ' from the part of the line before the matched reason."""
    before = line[:found.start()]
    before = re.sub(r"^.*?\b(LOG|WARNING|ERROR):\s+", "", before)
    return before if before.strip() else ""


def _shorten(statement: str, limit: int = 120) -> str:
    statement = " ".join(statement.split())
    return statement if len(statement) <= limit else statement[:limit - 3] + "..."
