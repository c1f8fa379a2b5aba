"""`eval-harness gate --partition DAY` on a new DAGSTER_HOME, from two processes at once, and
what `gate` says when something inside it breaks.

Exit 1 from `gate` means "a blocking gate failed" to CI; anything else that stops it is exit 2
with one sentence. Two real processes are started on the same fresh, not yet existing
DAGSTER_HOME and released together: both must gate the day and agree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from answer_files import SAMPLE
from paths import REPO

DAY = "2025-03-04"
_SCRUBBED = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "DATABASE_URL", "DAGSTER_HOME", "DAGSTER_POSTGRES_URL")


def write_config(folder: Path, home: str = "dagster-home") -> Path:
    config = folder / "config.yaml"
    config.write_text(f"""
quality_gates:
  partition_start: 2025-01-01
  answers_file: {SAMPLE}
  gates:
    grounding: {{enabled: false}}
judges: {{judge1: local:lexical, judge2: local:embedding}}
dagster: {{home: {home}}}
""")
    return config


def child_env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _SCRUBBED and not k.startswith("EVAL_HARNESS_")}
    env.update(DATABASE_URL=url, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


# The installed command with its slow imports done up front. Two of them released together
# still reach Dagster's "create the tables unless they exist" a few milliseconds apart, and
# whether those overlap is luck; so each process's first ``MetaData.create_all`` (Dagster's
# SQLite run storage) waits at a barrier until both processes are there, or 4 s have passed.
# Unserialised, both then find no tables and both create them; serialised, the first waits
# out the 4 s alone and the second finds the tables made.
PREPARED_CLI = """
import os, sys, time
from pathlib import Path
import dagster, sqlalchemy
import eval_harness_pipelines.assets.quality_gates, eval_harness_pipelines.resources
from eval_harness_pipelines.cli import main

barrier = Path(os.environ["TEST_BARRIER"])
create_all = sqlalchemy.MetaData.create_all

def create_all_together(self, *args, **kwargs):
    if not (barrier / str(os.getpid())).exists():
        (barrier / str(os.getpid())).touch()
        deadline = time.monotonic() + 4
        while len(list(barrier.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
    return create_all(self, *args, **kwargs)

sqlalchemy.MetaData.create_all = create_all_together
sys.exit(main(sys.argv[1:]))
"""


def gate(config: Path, env: dict[str, str], cwd: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PREPARED_CLI, "--config", str(config), "gate",
         "--partition", DAY, "--json", *extra], env=env, cwd=cwd, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def lock_waiters(conn) -> int:
    # pg_stat_activity is read once per transaction unless the snapshot is cleared
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event_type = 'Lock'").fetchone()[0]


@pytest.fixture
def answers_imported(fresh, tmp_path, monkeypatch):
    from eval_harness_pipelines import cli

    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in _SCRUBBED[:-3]:
        monkeypatch.delenv(variable, raising=False)
    config = write_config(tmp_path)
    assert cli.main(["--config", str(config), "answers", "import", str(SAMPLE)]) == 0
    return config


def test_two_gates_on_a_new_dagster_home_at_once_both_gate_the_day(fresh, answers_imported,
                                                                  tmp_path):
    home = tmp_path / "dagster-home"
    assert not home.exists()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = child_env(fresh.url, TEST_BARRIER=str(barrier))
    # Both processes queue behind a lock on the migrations table (every command reads it
    # first to see whether the schema is current), so they reach the Dagster instance within
    # milliseconds of each other once it is let go.
    with fresh.connection() as holder:
        holder.execute("LOCK TABLE eval_harness.schema_migrations IN ACCESS EXCLUSIVE MODE")
        runs = [gate(answers_imported, env, tmp_path) for _ in range(2)]
        deadline = time.monotonic() + 120
        while lock_waiters(holder) < 2:
            finished = [r for r in runs if r.poll() is not None]
            if finished:
                out, err = finished[0].communicate()
                pytest.fail(f"a gate ended before the lock was let go:\n{out}\n{err}")
            assert time.monotonic() < deadline, "the gates never queued on the migrations table"
            time.sleep(0.02)
        holder.commit()
    outcomes = [(r.returncode, out, err) for r in runs
                for out, err in [r.communicate(timeout=180)]]
    for code, _out, err in outcomes:
        assert "Traceback" not in err and "already exists" not in err, err
        assert code in (0, 1), err
    assert outcomes[0][0] == outcomes[1][0]
    assert (home / "dagster.yaml").is_file()


def test_an_internal_error_in_gate_is_exit_2_with_one_sentence(fresh, answers_imported,
                                                               tmp_path):
    """A DAGSTER_HOME that cannot be a folder (here: a file) is no failed gate."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    junit = tmp_path / "gates.xml"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = child_env(fresh.url, DAGSTER_HOME=str(blocker), TEST_BARRIER=str(barrier))
    run = gate(answers_imported, env, tmp_path,
               "--junit-xml", str(junit))
    out, err = run.communicate(timeout=180)
    assert run.returncode == 2, err
    assert "Traceback" not in err and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("eval-harness: error: ") and str(blocker) in line
    assert "could not run" in junit.read_text()


def test_an_unexpected_exception_in_gate_is_exit_2_and_names_a_traceback_file(
        answers_imported, tmp_path, monkeypatch, capsys):
    """Whatever breaks inside the job, `gate` never says "a blocking gate failed" (exit 1)."""
    from eval_harness_pipelines import cli

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    # the job ran; reading its report from the stored results breaks (a bug)
    monkeypatch.setattr("eval_harness.gates.runner.stored_gate_report", broken)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    summary = tmp_path / "summary.md"
    code = cli.main(["--config", str(answers_imported), "gate", "--partition", DAY,
                     "--summary", str(summary)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("eval-harness: error: internal error (RuntimeError: boom); the "
                           "command could not run, no check failed; traceback: ")
    [trace] = tmp_path.glob("eval-harness-error-*.txt")
    assert str(trace) in line and "Traceback" in trace.read_text()
    assert "could not run: RuntimeError: boom" in summary.read_text()
