"""Stop the test session at the first crash of the shared test server, saying why.

One crashed backend makes PostgreSQL end every connection and run crash recovery; every
later test would then fail or error on "the database system is in recovery mode" or on a
dead session fixture, and the one line that explains it (in the server log) would sit under
a hundred tracebacks. This plugin reads the server log after each failed test: at the first
crash it adds the log's reason to that test's report and stops the session there.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from eval_harness.store.crash import is_recovering, is_server_failure, last_crash

_watched: dict[str, object] = {"log": None, "offset": 0, "url": None}


def watch_server(url: str, log: Path | None) -> None:
    """Follow the session's test server (``log`` is None for an external server)."""
    _watched.update(url=url, log=log,
                    offset=log.stat().st_size if log is not None and log.is_file() else 0)


def crash_message(failure_text: str) -> str | None:
    """Why the shared server went down, if it did; None when the test failed on its own."""
    log, offset = _watched["log"], _watched["offset"]
    reason = last_crash(log, since=offset) if log is not None else None
    if reason is None and is_server_failure(failure_text):
        if log is not None:
            import time

            for _ in range(30):  # the postmaster logs the crash just after clients see it
                time.sleep(0.1)
                reason = last_crash(log, since=offset)
                if reason:
                    break
        elif _watched["url"] and _server_recovering(str(_watched["url"])):
            return ("the test PostgreSQL server went away and is recovering from a crash; "
                    "its log on the server says why (look for 'terminated by signal')")
    if reason is None:
        return None
    return f"the test PostgreSQL server crashed ({reason}); server log: {log}"


def _server_recovering(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=5):
            return False
    except psycopg.OperationalError as exc:
        return is_recovering(exc)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed or item.session.shouldstop:
        return
    message = crash_message(report.longreprtext)
    if message is None:
        return
    report.sections.append(("PostgreSQL server crash", message))
    item.session.shouldstop = (f"{message}. Stopped at the first crash ({item.nodeid}): the "
                               "tests after it would only fail on a server in recovery")
