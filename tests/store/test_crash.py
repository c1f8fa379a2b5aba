"""A server that dies under the harness: one sentence with what, where and why.

Each test crashes a backend of a server of its own for real (a signal to the backend
process, as a CPU fault would), never the shared test server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psycopg
import pytest

from eval_harness.store import StoreLocation
from eval_harness.store.connection import embedded_server_log, start_embedded
from paths import REPO

TESTS = REPO / "tests"
ROOT = TESTS.parent


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    pgdata = tmp_path_factory.mktemp("crash-pgdata")
    url = start_embedded(pgdata)
    return pgdata, url


def _wait_until_accepting(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(url, connect_timeout=3):
                return
        except psycopg.OperationalError:
            time.sleep(0.2)
    raise AssertionError("the server did not come back after crash recovery")


def test_a_crashed_backend_is_named_with_the_log_line(own_server):
    pgdata, url = own_server
    log = embedded_server_log(pgdata)
    location = StoreLocation(url, "test", log, log.stat().st_size)
    with psycopg.connect(url, autocommit=True) as victim:
        pid = victim.execute("SELECT pg_backend_pid()").fetchone()[0]
        os.kill(pid, signal.SIGILL)
        with pytest.raises(psycopg.OperationalError) as raised:
            victim.execute("SELECT 1")
    message = location.failure_message(raised.value)
    _wait_until_accepting(url)
    assert message.startswith("the embedded PostgreSQL crashed (client backend (PID ")
    assert "terminated by signal 4: Illegal instruction" in message
    assert message.endswith(f"server log: {log}.")
    assert "\n" not in message


def test_an_ordinary_query_error_is_not_called_a_crash(own_server):
    pgdata, url = own_server
    log = embedded_server_log(pgdata)
    location = StoreLocation(url, "test", log, log.stat().st_size)
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT no_such_column FROM pg_class")
    assert location.failure_message(raised.value) is None


def test_cli_prints_one_sentence_when_the_server_dies_mid_command(own_server, tmp_path):
    """`ingest` waits on the ingest lock the test holds; its backend is then killed with
    SIGILL. The user sees one line: what happened, the statement, the log path; no trace,
    no pg_ctl output."""
    from beir_factory import write_beir

    pgdata, url = own_server
    folder = write_beir(tmp_path / "mini", {"d1": "alpha", "d2": "beta"}, {"q1": "alpha"},
                        [("q1", "d1", 1)])
    config = tmp_path / "config.yaml"
    config.write_text(f"store: {{embedded_pgdata: {pgdata}}}\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "EVAL_HARNESS_PGDATA", "EVAL_HARNESS_CONFIG")}
    holder = psycopg.connect(url)  # the crash ends this session too: closed, never committed
    try:
        holder.execute("SELECT pg_advisory_xact_lock(hashtext('eval_harness.ingest'))")
        command = subprocess.Popen(
            [sys.executable, "-m", "eval_harness.cli", "--config", str(config), "ingest",
             str(folder), "--name", "mini"], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = _backend_waiting_on_a_lock(url)
        os.kill(pid, signal.SIGILL)
        out, err = command.communicate(timeout=120)
    finally:
        holder.close()
    _wait_until_accepting(url)
    assert command.returncode == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("eval-harness: error: the embedded PostgreSQL crashed (")
    assert "terminated by signal 4: Illegal instruction" in lines[0]
    assert "pg_advisory_xact_lock" in lines[0]
    assert f"server log: {embedded_server_log(pgdata)}" in lines[0]


def _backend_waiting_on_a_lock(url: str) -> int:
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%pg_advisory_xact_lock%' AND pid <> pg_backend_pid()").fetchone()
            if row:
                return row[0]
            time.sleep(0.1)
    raise AssertionError("the ingest never waited on the lock")


@pytest.mark.slow
def test_a_crash_stops_the_test_session_with_its_reason(tmp_path):
    """A suite on a server that crashes in its second test: the session stops there, the
    reason from the log is printed, and the three tests after it do not run."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS / 'support')!r})
        import pytest
        from eval_harness.store.connection import embedded_server_log, start_embedded
        from pg_crash_guard import pytest_runtest_makereport, watch_server

        @pytest.fixture(scope="session")
        def url(tmp_path_factory):
            pgdata = tmp_path_factory.mktemp("pgdata")
            url = start_embedded(pgdata)
            watch_server(url, embedded_server_log(pgdata))
            return url
    """))
    (suite / "test_suite.py").write_text(textwrap.dedent("""
        import os, signal, psycopg, pytest

        @pytest.fixture(scope="module")
        def conn(url):
            with psycopg.connect(url, autocommit=True) as conn:
                yield conn

        def test_1(conn):
            assert conn.execute("SELECT 1").fetchone() == (1,)

        def test_2_crash(conn):
            os.kill(conn.execute("SELECT pg_backend_pid()").fetchone()[0], signal.SIGILL)
            conn.execute("SELECT 1")

        @pytest.mark.parametrize("n", [3, 4, 5])
        def test_after(conn, n):
            conn.execute("SELECT 1")
    """))
    # its own basetemp: a pytest run in the default one prunes old sessions there; without
    # Phoenix's plugin, as in pyproject.toml's addopts (it imports the whole Phoenix server)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-p", "no:randomly", "-p", "no:phoenix",
                             f"--basetemp={tmp_path / 'inner'}", str(suite)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output  # pytest: interrupted
    assert "1 failed, 1 passed" in output, output
    assert "test_after" not in output.split("short test summary")[-1], output
    assert "terminated by signal 4: Illegal instruction" in output
    assert "Stopped at the first crash (suite/test_suite.py::test_2_crash)" in output
