"""Query shards: a stable, complete assignment; shard runs in separate processes pay for each
pair once and lose no reply; the partitioned Dagster asset judges one shard."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import dagster as dg
import pytest

from colliding_processes import (
    child_env,
    cli,
    fake_keys,
    finish,
    ledger_counts,
    lock_waiters,
    wait_until,
)
from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.dual.run import JUDGE_LOCK_PREFIX
from eval_harness.judges.dual.shards import parse_shard, queries_of_shard, shard_of
from judge_projects import clean_judge_run, judge_project, judged_rows


@pytest.mark.unit
def test_a_query_shard_is_a_pinned_hash_of_its_external_id():
    # sha256("q0")[:8] as a big-endian integer is ...7 mod 8 (python -c, hashlib)
    assert [shard_of(x, 8) for x in ("q0", "q1", "q2", "1", "abc")] == [7, 2, 3, 1, 2]
    assert all(shard_of(f"q{i}", 1) == 0 for i in range(50))


@pytest.mark.unit
def test_shards_partition_the_queries_completely_and_evenly():
    planned = [PlannedQuery(i, f"query-{i}", "text", None, (i,)) for i in range(800)]
    shards = [queries_of_shard(planned, (i, 8)) for i in range(8)]
    ids = [p.query_id for shard in shards for p in shard]
    assert sorted(ids) == list(range(800))  # every query in exactly one shard
    assert all(60 <= len(shard) <= 140 for shard in shards), [len(s) for s in shards]
    # the order or subset of the other queries does not move a query
    assert queries_of_shard(planned[::-1][:100], (3, 8)) == [
        p for p in planned[::-1][:100] if p in shards[3]]
    assert queries_of_shard(planned, None) == planned


@pytest.mark.unit
@pytest.mark.parametrize("text", ["2/2", "-1/2", "a/b", "1", "0/0", ""])
def test_a_bad_shard_is_refused_in_one_sentence(text):
    with pytest.raises(ValueError, match="a shard is i/n with 0 <= i < n"):
        parse_shard(text)
    assert parse_shard("1/4") == (1, 4)


@pytest.mark.slow
def test_two_shard_processes_and_a_duplicate_pay_for_each_pair_once(fresh, tmp_path, fake,
                                                                    server_url):
    """`judge --shard 0/2` and `--shard 1/2` run side by side, and `--shard 0/2` a second time
    at once. Every judgement is asked of the provider exactly once, every reply is cached and
    billed once, and the ground truth equals an undisturbed unsharded run's."""
    project = judge_project(fresh, tmp_path, n_queries=10)
    env = child_env(fresh, **fake_keys(fake))
    fake.hold_replies_after(0)  # every reply waits until both shards have asked

    def shard_of_request(record) -> int:
        text = json.dumps(record.body)
        return next(shard_of(f"q{i}", 2) for i in range(10) if f"question {i} on" in text)

    def asked_by_shards() -> set[int]:
        return {shard_of_request(r) for r in fake.chat_records() if r.held}

    runs = {name: cli("--config", project["config"], "judge", "--json", "--shard", shard,
                      env=env, cwd=tmp_path) for name, shard in (("a", "0/2"), ("b", "1/2"))}
    try:
        # side by side: both shards have requests in flight at the same time
        wait_until(lambda: asked_by_shards() == {0, 1}, what="both shards to ask",
                   processes=list(runs.values()), timeout=90)
        runs["a again"] = cli("--config", project["config"], "judge", "--json", "--shard",
                              "0/2", env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the duplicate to wait for its twin",
                   processes=list(runs.values()), timeout=90)
    finally:
        fake.release_replies()
    outcomes = {name: finish(run, timeout=120) for name, run in runs.items()}
    assert all(code == 0 for code, _, _ in outcomes.values()), outcomes
    summaries = {name: json.loads(out) for name, (_, out, _) in outcomes.items()}
    assert summaries["a"]["shard"] == "0/2" and summaries["b"]["shard"] == "1/2"
    assert summaries["a"]["queries"] + summaries["b"]["queries"] == 10
    assert summaries["a"]["queries"] > 0 and summaries["b"]["queries"] > 0
    pairs = summaries["a"]["pairs"] + summaries["b"]["pairs"]
    # provider requests == distinct judgements (pair x judge); the duplicate paid nothing
    assert fake.chat_requests == 2 * pairs
    assert sorted(s["provider_calls"] for s in summaries.values()) == [
        0, *sorted((2 * summaries["a"]["pairs"], 2 * summaries["b"]["pairs"]))]
    # the duplicate shard waited for its twin and said so; the other shard waited for nobody
    waited = {name for name, (_, _, err) in outcomes.items() if "is in progress; waiting" in err}
    assert waited == {"a again"}
    assert ledger_counts(fresh) == (2 * pairs, 2 * pairs)  # no lost reply, no double bill
    assert judged_rows(fresh) == clean_judge_run(server_url, project, fake)


def _asker(record) -> str:
    """The process that sent a request: each process of the layout test has its own keys."""
    key = record.headers.get("x-api-key") or record.headers.get("authorization", "")
    return key.rsplit("-", 1)[-1]


def _question(record) -> int:
    return int(json.dumps(record.body).split("question ", 1)[1].split(" ", 1)[0])


@pytest.mark.slow
def test_two_shard_layouts_at_once_pay_for_each_judgement_once(fresh, tmp_path, fake):
    """`--shard 0/2` and `1/2` beside `--shard 0/3` and `1/3`: four processes
    with requests in flight at the same time, the layouts' shards overlapping. Every distinct
    request is sent (and paid) once, one cost row per cache row; a process reaching a query
    that another is judging judges its other queries first, says it waits, then answers that
    query from the cache."""
    project = judge_project(fresh, tmp_path, n_queries=12)
    config = tmp_path / "wide.yaml"  # every request of a shard in flight at once
    config.write_text(project["config"].read_text().replace("concurrency: 8",
                                                            "concurrency: 64"))
    layouts = {"0/2": {1, 9, 10, 11}, "1/2": {0, 2, 3, 4, 5, 6, 7, 8},
               "0/3": {0, 5, 11}, "1/3": {1, 3, 6, 7, 8, 9, 10}}  # q0..q11, pinned hashes
    assert all({i for i in range(12) if shard_of(f"q{i}", int(s[-1])) == int(s[0])} == q
               for s, q in layouts.items())
    # the order in which they reach their queries, each holding them when the next comes:
    # q11 is 0/2's when 0/3 comes, q1, q9, q10 when 1/3 comes, and 1/2 finds only q2, q4 free
    order = [("0/2", {1, 9, 10, 11}), ("0/3", {0, 5}), ("1/3", {3, 6, 7, 8}), ("1/2", {2, 4})]
    fake.hold_replies_after(0)  # nothing is answered until every process has asked
    runs = {}
    with fresh.connection(autocommit=True) as gate:
        for shard, _ in order[1:]:  # the processes start together; their shard locks
            gate.execute("SELECT pg_advisory_lock(hashtext(%s))",  # let them in one by one
                         (f"{JUDGE_LOCK_PREFIX}jd#{shard}",))
        try:
            for shard, _ in order:
                name = shard.replace("/", "of")  # each process has its own keys
                keys = {"OPENAI_API_KEY": f"sk-test-layouts-{name}",
                        "ANTHROPIC_API_KEY": f"sk-ant-test-layouts-{name}"}
                runs[shard] = cli("--config", config, "judge", "--json", "--shard", shard,
                                  env=child_env(fresh, **dict(fake_keys(fake), **keys)),
                                  cwd=tmp_path)
            for shard, free in order:
                gate.execute("SELECT pg_advisory_unlock(hashtext(%s))",
                             (f"{JUDGE_LOCK_PREFIX}jd#{shard}",))
                name = shard.replace("/", "of")
                wait_until(lambda free=free, name=name: free <= {
                               _question(r) for r in fake.chat_records() if _asker(r) == name},
                           what=f"shard {shard} to ask", processes=list(runs.values()),
                           timeout=90)
        finally:
            fake.release_replies()
    outcomes = {shard: finish(run, timeout=120) for shard, run in runs.items()}
    assert all(code == 0 for code, _, _ in outcomes.values()), outcomes
    summaries = {shard: json.loads(out) for shard, (_, out, _) in outcomes.items()}
    pairs = summaries["0/2"]["pairs"] + summaries["1/2"]["pairs"]  # every query's pairs
    assert summaries["0/3"]["pairs"] + summaries["1/3"]["pairs"] < pairs  # no 2/3 run

    bodies = [json.dumps(r.body, sort_keys=True) for r in fake.chat_records()]
    paid = [r for r in fake.chat_records() if r.status == 200]
    assert len(paid) == len(bodies) == len(set(bodies)) == 2 * pairs  # each judgement once
    assert ledger_counts(fresh) == (2 * pairs, 2 * pairs)  # one cost row per cached reply
    waited = {shard: s["queries_waited"] for shard, s in summaries.items()}
    assert waited == {"0/2": 0, "0/3": 1, "1/3": 3, "1/2": 6}
    for shard, (_, _, err) in outcomes.items():
        said = f"waiting for another run judging {waited[shard]} queries of dataset 'jd'"
        assert (said in err) == bool(waited[shard]), (shard, err)
    rows = judged_rows(fresh)  # every query written, every judgement scored
    assert len(rows) == 12 and sum(len(docs) for _, docs, *_ in rows) == pairs
    assert all(set(row[7]) == set(row[8]) == {"scored"} for row in rows)


@pytest.fixture
def shard_project(tmp_path, store, conn, monkeypatch):
    from colliding_processes import beir
    from eval_harness.datasets.ingest import ingest_beir

    tag = uuid.uuid4().hex[:8]
    folder = beir(tmp_path / "data", n_docs=20, n_queries=8, tag=tag)
    name = f"shards_{tag}"
    ingest_beir(conn, folder, name=name)
    config = tmp_path / "config.yaml"
    config.write_text(f"""
default_dataset: {name}
datasets:
  {name}: {{path: {folder}}}
hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
history: {{duckdb_path: {tmp_path / 'history.duckdb'}}}
judges: {{shards: 2, hybrid_top_k: 1}}
""")
    monkeypatch.setenv("DATABASE_URL", store.url)
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2", "EVAL_HARNESS_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    return {"config": config, "name": name}


def test_the_shard_asset_is_partitioned_by_judges_shards_and_judges_one_shard(
        shard_project, store, conn):
    from eval_harness.settings import load_settings
    from eval_harness_pipelines.assets.judging import SHARD_ASSET
    from eval_harness_pipelines.definitions import build_defs
    from eval_harness_pipelines.jobs import MAIN_JOB, NIGHTLY_JOB, SHARD_JOB
    from eval_harness_pipelines.resources import default_resources

    settings = load_settings(Path(shard_project["config"]), environ={"DATABASE_URL": store.url})
    defs = build_defs(settings)
    job = defs.resolve_job_def(SHARD_JOB)
    assert job.partitions_def.get_partition_keys() == ["0", "1"]
    for name in (MAIN_JOB, NIGHTLY_JOB):  # a job's assets share one partitioning
        keys = defs.resolve_job_def(name).asset_layer.executable_asset_keys
        assert dg.AssetKey(SHARD_ASSET) not in keys
    graph = defs.resolve_asset_graph()
    # dual_judge_scores (and so agreement and calibration after it) depends on every shard
    assert dg.AssetKey(SHARD_ASSET) in graph.get(dg.AssetKey("dual_judge_scores")).parent_keys
    shard_asset = next(a for a in defs.resolve_all_asset_specs()
                       if a.key == dg.AssetKey(SHARD_ASSET))
    assert shard_asset.partitions_def.get_partition_keys() == ["0", "1"]

    assets_def = next(a for a in defs.assets if dg.AssetKey(SHARD_ASSET) in a.keys)
    # its concurrency pool is named for the providers its judges call (the defaults here)
    assert assets_def.op.pool == "judges_anthropic_openai"
    resources = default_resources(config_path=str(shard_project["config"]),
                                  database_url=store.url)
    result = dg.materialize([assets_def], resources=resources, partition_key="1")
    assert result.success
    metadata = result.get_asset_materialization_events()[0] \
        .step_materialization_data.materialization.metadata
    assert metadata["shard"].value == "1/2"
    written = conn.execute("SELECT external_id FROM ground_truth WHERE dataset = %s AND "
                           "judged_docs IS NOT NULL", (shard_project["name"],)).fetchall()
    assert written and all(shard_of(e, 2) == 1 for (e,) in written)
    assert metadata["queries_written"].value == len(written)
    everything = {e for (e,) in conn.execute("SELECT external_id FROM ground_truth WHERE "
                                              "dataset = %s", (shard_project["name"],))}
    assert {e for (e,) in written} == {e for e in everything if shard_of(e, 2) == 1}
