"""A backfill of ``judging_shards_job`` as a team runs it: ``dagster job backfill`` on the
project's workspace with the Dagster daemon running (as ``dagster dev`` runs it), Dagster's own
storage in Postgres (``DAGSTER_POSTGRES_URL``), each shard a run of its own on the default
launcher with the multiprocess executor, both judges on the fake provider. Every shard's run
succeeds; the shard steps are in the judges' concurrency pool, and no more of them run at once
than ``judges.shards_at_once`` although every run was queued at once; together they pay every
judgement once; ``dual_judge_scores`` after them pays nothing and writes what one unsharded
run writes (the same scores, statuses and kappa for every query)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from colliding_processes import REPO, child_env, fake_keys, finish, spawn
from judge_projects import clean_judge_run, judge_project, judged_rows

DAGSTER = Path(sys.executable).with_name("dagster")
DAGSTER_DAEMON = DAGSTER.with_name("dagster-daemon")
SHARDS, AT_ONCE = 2, 1
POOL = "judges_anthropic_openai"


@pytest.fixture
def dagster_database(server_url):
    """A database of its own for Dagster's run, event and schedule storage, as a URL."""
    name = f"eh_dagster_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(server_url)  # Dagster (SQLAlchemy) takes a URL, not key=value
    user, password = parts.username or "postgres", parts.password or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    yield urlunsplit((parts.scheme, f"{user}:{password}@{host}", f"/{name}", parts.query, ""))
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def _steps(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float, float]:
    """(run queued, shard step start, shard step end) of one run, in seconds since the epoch;
    the step ran in a worker process of its own (the multiprocess executor)."""
    kinds = (dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.STEP_START,
             dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_WORKER_STARTED)
    times: dict[dg.DagsterEventType, float] = {}
    for record in instance.all_logs(run_id):
        if record.dagster_event_type in kinds:
            times.setdefault(record.dagster_event_type, record.timestamp)
    queued, start, end, _ = (times[kind] for kind in kinds)
    return queued, start, end


def _wait_for_the_runs(daemon) -> list[tuple[float, float, float]]:
    """The shard runs' (queued, step start, step end), once all of them succeeded."""
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        deadline = time.monotonic() + 240
        while True:
            runs = instance.get_runs()
            if len(runs) == SHARDS and all(r.is_finished for r in runs):
                break
            assert daemon.poll() is None, daemon.communicate()[1][-4000:]
            assert time.monotonic() < deadline, [(r.run_id, r.status) for r in runs]
            time.sleep(0.5)
        assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        assert sorted(r.tags["dagster/partition"] for r in runs) == [str(i) for i in range(SHARDS)]
        assert len({r.tags["dagster/backfill"] for r in runs}) == 1
        info = instance.event_log_storage.get_concurrency_info(POOL)
        assert info.slot_count == AT_ONCE and info.active_slot_count == 0
        return sorted(_steps(instance, r.run_id) for r in runs)


@pytest.mark.slow
def test_a_backfill_of_the_shards_on_postgres_storage_judges_each_pair_once(
        fresh, tmp_path, fake, server_url, dagster_database, monkeypatch):
    from eval_harness.settings import load_settings
    from eval_harness_pipelines.dagster_home import prepare_dagster_home

    project = judge_project(fresh, tmp_path, n_queries=12)
    text = project["config"].read_text()
    limits = "".join(f"    {p}: {{requests_per_minute: 120, tokens_per_minute: null}}\n"
                     for p in ("openai", "anthropic"))
    text = text[:text.index("  rate_limits:")] + "  rate_limits:\n" + limits
    fast = tmp_path / "fast.yaml"  # the unsharded reference run, at no rate to speak of
    fast.write_text(project["config"].read_text())
    project["config"].write_text(text.replace(
        "  budget_usd: 5.0\n",
        f"  budget_usd: 5.0\n  shards: {SHARDS}\n  shards_at_once: {AT_ONCE}\n"
        "  retest: {enabled: false}\n  anchors: {enabled: false}\n"))
    home = tmp_path / "dagster"
    dagster_env = {"DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_database,
                   "EVAL_HARNESS_CONFIG": str(project["config"])}
    for name, value in dagster_env.items():
        monkeypatch.setenv(name, value)
    prepare_dagster_home(load_settings(project["config"], environ=dagster_env))
    assert f"default_limit: {AT_ONCE}" in (home / "dagster.yaml").read_text()

    env = child_env(fresh, **fake_keys(fake), **dagster_env)
    # the daemon (as `dagster dev` runs it) takes the queued runs off the run queue
    daemon = spawn([DAGSTER_DAEMON, "run", "-w", REPO / "workspace.yaml"], env, cwd=REPO,
                   start_new_session=True)
    try:
        backfill = spawn([DAGSTER, "job", "backfill", "-w", REPO / "workspace.yaml",
                          "-j", "judging_shards_job", "--all", "--noprompt"], env, cwd=REPO)
        code, out, err = finish(backfill, timeout=180)
        assert code == 0, (out, err)
        spans = _wait_for_the_runs(daemon)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.communicate(timeout=60)
    # the pool: every shard's run was queued before the first shard step ended, and yet no
    # more than AT_ONCE shard steps ran at once (the daemon holds a run back while its pool is
    # full, and a started run's step waits for a slot)
    assert max(queued for queued, _, _ in spans) < min(end for _, _, end in spans), spans
    for _, start, _ in spans:
        assert sum(1 for _, s, e in spans if s <= start < e) <= AT_ONCE, spans

    # every judgement paid once over the shards
    records = [r for r in fake.chat_records() if r.api in ("openai", "anthropic")]
    requests = fake.chat_requests
    assert requests == len(records) > 0
    assert len({json.dumps(r.body, sort_keys=True) for r in records}) == len(records)
    # the dataset-wide asset after the backfill: every reply cached, nothing paid
    materialize = spawn([DAGSTER, "asset", "materialize", "-m",
                         "eval_harness_pipelines.definitions", "--select", "dual_judge_scores"],
                        env, cwd=REPO)
    code, out, err = finish(materialize, timeout=180)
    assert code == 0, (out, err)
    assert fake.chat_requests == requests
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("dual_judge_scores"))
        assert event is not None and event.asset_materialization is not None
        metadata = event.asset_materialization.metadata
        assert metadata["queries"].value == 12 and metadata["provider_calls"].value == 0
        assert metadata["shard"].value == "all"
        shard_events = instance.fetch_materializations(dg.AssetKey("dual_judge_shard"),
                                                       limit=10).records
        assert sorted(e.partition_key for e in shard_events) == [str(i) for i in range(SHARDS)]
    sharded = judged_rows(fresh)
    assert sharded == clean_judge_run(server_url, {**project, "config": fast}, fake)
