"""Real OS processes made to collide on the real store: the shared part of test_*_concurrency.

Every writer is exercised the way it fails in production: (a) a process is killed in the
middle and the same work is run again; (b) two processes do the same work at the same moment.
Each test gets its own freshly migrated database (the ``fresh`` fixture), so counts and the
judge cache start empty.

Two processes are made to collide deterministically rather than by luck: the test holds an
ACCESS EXCLUSIVE lock on a table both of them write, waits until both are queued behind it
(``pg_stat_activity`` shows two backends waiting on a lock, be it that table or an advisory
lock of the code under test), then lets go (``lock_step``). Without the library's own
serialisation both would then run their writes side by side.

The BEIR ingest (``beir`` + ``ingest``) and the fake LLM provider's keys (``fake_keys``, for the
root conftest's ``fake``) are here because the ingest, judge, review and gate tests all build
on them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from beir_factory import write_beir

REPO = Path(__file__).resolve().parents[2]
SUPPORT = Path(__file__).resolve().parent
CLI = Path(sys.executable).with_name("eval-harness")
_SCRUBBED = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "DATABASE_URL", "DAGSTER_HOME")


# ---------------------------------------------------------------------------------------
# Processes, databases and lock-step


def child_env(location, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _SCRUBBED and not k.startswith("EVAL_HARNESS_")}
    env.update(DATABASE_URL=location.url, PYTHONPATH=f"{REPO}{os.pathsep}{SUPPORT}",
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def spawn(argv: list[str], env: dict[str, str], cwd: Path, **popen) -> subprocess.Popen:
    return subprocess.Popen([str(a) for a in argv], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def cli(*args, env, cwd, **popen) -> subprocess.Popen:
    """``eval-harness args...``; ``start_new_session=True`` gives it a process group of its
    own, as a shell gives a command, for :func:`ctrl_c`."""
    return spawn([CLI, *args], env, cwd, **popen)


def ctrl_c(process: subprocess.Popen) -> None:
    """What a terminal's Ctrl-C does: SIGINT to the command's whole process group (its own
    helper processes included), not to the command alone."""
    os.killpg(process.pid, signal.SIGINT)


def dagster_run_statuses(home: Path) -> dict[str, str]:
    """{run id: status name} of every run in the Dagster instance of DAGSTER_HOME ``home``."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        return {run.run_id: run.status.value for run in instance.get_runs()}


def python(code: str, *args, env, cwd) -> subprocess.Popen:
    """``python -c code args...``: for library entry points, which start in a fraction of the
    CLI's time (the CLI imports both provider SDKs)."""
    return spawn([sys.executable, "-c", textwrap.dedent(code), *args], env, cwd)


def finish(process: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def wait_until(condition, *, what: str, timeout: float = 30, processes=()) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for process in processes:
            if process.poll() is not None:
                out, err = process.communicate()
                pytest.fail(f"a process ended (exit {process.returncode}) while waiting for "
                            f"{what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def lock_waiters(location) -> int:
    with location.connection(autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'").fetchone()[0]


@contextmanager
def held(location, table: str, mode: str = "ACCESS EXCLUSIVE"):
    """A lock on ``table`` until the block ends: whoever needs a conflicting one waits."""
    holder = location.connect()
    holder.execute(f"LOCK TABLE {table} IN {mode} MODE")
    try:
        yield
    finally:
        holder.commit()
        holder.close()


@contextmanager
def lock_step(location, table: str, processes: list[subprocess.Popen]):
    """Queue ``processes`` behind an exclusive lock on ``table``; release them together."""
    with held(location, table):
        yield
        wait_until(lambda: lock_waiters(location) >= len(processes),
                   what=f"{len(processes)} processes queued on a lock", processes=processes)


def scalar(location, query: str, params=()):
    with location.connection() as conn:
        return conn.execute(query, params).fetchone()[0]


# ---------------------------------------------------------------------------------------
# Ingest: the dataset most tests start from

INGEST = """
    import os, sys
    from eval_harness.store import StoreLocation
    from eval_harness.datasets.ingest import ingest_beir
    with StoreLocation(os.environ["DATABASE_URL"]).connection() as conn:
        report = ingest_beir(conn, sys.argv[1], name=sys.argv[2])
    print(f"documents {report.documents}; queries {report.queries}")
"""


def ingest(folder: Path, name: str, *, env, cwd) -> subprocess.Popen:
    return python(INGEST, folder, name, env=env, cwd=cwd)


def beir(folder: Path, n_docs: int = 40, n_queries: int = 8, seed: int = 0,
         tag: str = "") -> Path:
    docs = {f"d{i}": f"document {i} about topic {i % 7} {tag}" for i in range(n_docs)}
    queries = {f"q{i}": f"question {i} on topic {i % 7} {tag}" for i in range(n_queries)}
    qrels = [(f"q{i}", f"d{(3 * i + j) % n_docs}", 1) for i in range(n_queries) for j in (0, 1)]
    return write_beir(folder, docs, queries, qrels, seed=seed)


def shipped_judge_limits() -> tuple[dict[str, tuple[float, float | None]], int]:
    """The shipped config.yaml's ``judges.rate_limits`` (provider -> requests and tokens per
    minute) and ``judges.concurrency``, read from the file itself."""
    from eval_harness.settings import load_settings

    judges = load_settings(REPO / "config.yaml", environ={}).judges
    return ({name: (limit.requests_per_minute, limit.tokens_per_minute)
             for name, limit in judges.rate_limits.items()}, judges.concurrency)


def rate_limits_yaml(limits: dict[str, tuple[float, float | None]] | None) -> str:
    """``judges.rate_limits`` as flow-style YAML lines (None: no rate limit to speak of)."""
    limits = limits or {"openai": (100000, None), "anthropic": (100000, None)}
    return "".join(f"    {name}: {{requests_per_minute: {rpm:g}, tokens_per_minute: "
                   f"{'null' if tpm is None else format(tpm, 'g')}}}\n"
                   for name, (rpm, tpm) in limits.items())


def judges_yaml(concurrency: int, rate_limits=None) -> str:
    """config.yaml's ``judges:`` block for an OpenAI and an Anthropic judge on the fake
    provider, ``concurrency`` requests at a time each, at ``rate_limits`` (see
    :func:`rate_limits_yaml`; default: no rate limit to speak of)."""
    return textwrap.dedent(f"""
        judges:
          judge1: openai:gpt-4o
          judge2: anthropic:claude-haiku-4-5
          budget_usd: 5.0
          concurrency: {concurrency}
          hybrid_top_k: 2
          rate_limits:
    """) + rate_limits_yaml(rate_limits)


def two_judges_config(folder: Path, tmp_path: Path, *, concurrency: int,
                      rate_limits=None, name: str = "config.yaml") -> Path:
    """A config file ``name`` in ``tmp_path`` judging the dataset ``jd`` (ingested from
    ``folder``) with :func:`judges_yaml`'s two judges."""
    config = tmp_path / name
    config.write_text(textwrap.dedent(f"""
        default_dataset: jd
        datasets:
          jd: {{path: {folder}}}
        hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
        history: {{duckdb_path: {tmp_path / 'history.duckdb'}}}
    """) + judges_yaml(concurrency, rate_limits))
    return config


# ---------------------------------------------------------------------------------------
# The fake LLM provider: reply cache and cost log


def fake_keys(fake) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-concurrency-0000", "OPENAI_BASE_URL": fake.openai_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-concurrency-0000",
            "ANTHROPIC_BASE_URL": fake.anthropic_base_url}


def ledger_counts(location) -> tuple[int, int]:
    """(judge_cache rows, api_cost_log rows)."""
    with location.connection() as conn:
        return conn.execute("SELECT (SELECT count(*) FROM judge_cache), "
                            "(SELECT count(*) FROM api_cost_log)").fetchone()
