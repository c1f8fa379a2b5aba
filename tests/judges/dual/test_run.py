"""Dual-judge ground truth on a real store: local judges, LLM judges on the fake server,
reruns, failures, budget, the seed's tool, batch mode, the CLI and the Dagster asset."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace

import dagster as dg
import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.dual.run import judge_dataset, judge_dataset_async, store_dual_judge_scores
from eval_harness.judges.dual.scores import pair_kappa
from eval_harness_pipelines import cli
from eval_harness_pipelines.assets.judging import dual_judge_scores
from eval_harness_pipelines.resources import default_resources
from fake_llm_server import FakeTime, judge_settings
from fake_llm_server import default_reply as _default_responder
from judge_corpus import DOCS, LLM, QRELS, QUERIES


@pytest.fixture
def dataset(tmp_path, conn):
    """A fresh dataset whose texts no other test used (so the reply cache starts empty)."""
    tag = uuid.uuid4().hex[:8]
    docs = {k: f"{v} {tag}" for k, v in DOCS.items()}
    vectors = np.eye(len(docs), 8, dtype=np.float32) + 0.05
    queries = {k: f"{v} {tag}" for k, v in QUERIES.items()}
    write_beir(tmp_path / "data", docs, queries, QRELS, doc_vectors=vectors,
               query_vectors=vectors[[0, 1, 4]])
    name = f"judge_{tag}"
    ingest_beir(conn, tmp_path / "data", name=name)
    return {"name": name, "folder": tmp_path / "data", "tag": tag}


def _ground_truth(conn, name):
    return conn.execute("""
        SELECT id, external_id, expected_docs, judged_docs, judge1_score, judge2_score,
               judge1_model, judge2_model, kappa, judge1_status, judge2_status,
               judge_prompt_versions, judge_run_id
        FROM ground_truth WHERE dataset = %s ORDER BY id""", (name,)).fetchall()


def _cost_rows(conn, run_id):
    return conn.execute("SELECT count(*), coalesce(sum(estimated_cost), 0), "
                        "count(*) FILTER (WHERE batch) FROM api_cost_log WHERE run_id = %s",
                        (run_id,)).fetchone()


def test_local_judges_fill_the_ground_truth_columns(settings, conn, dataset):
    local = replace(settings, openai_api_key=None, anthropic_api_key=None)
    summary = judge_dataset(conn, local, dataset["name"])
    assert (summary.judge1, summary.judge2) == ("local:lexical", "local:embedding")
    assert len(summary.notices) == 2 and summary.complete
    assert summary.queries == summary.queries_written == 3
    rows = _ground_truth(conn, dataset["name"])
    assert summary.pairs == sum(len(r[3]) for r in rows) == summary.scored / 2
    for (_, _, expected, judged, s1, s2, m1, m2, kappa, st1, st2, versions, run_id) in rows:
        assert judged[:len(expected)] == expected and len(set(judged)) == len(judged)
        assert len(judged) <= len(expected) + 5
        assert len(s1) == len(s2) == len(judged) and all(0.0 <= s <= 1.0 for s in s1 + s2)
        assert (m1, m2) == ("local:lexical", "local:embedding")
        assert st1 == st2 == ["scored"] * len(judged) and versions == ["local-v3", "local-v3"]
        assert kappa == pytest.approx(pair_kappa(s1, s2, threshold=0.5))
        assert run_id == summary.run_id
    assert summary.cost_usd == 0 and summary.provider_calls == 0
    assert _cost_rows(conn, summary.run_id)[0] == 0  # local judges bill nothing


def test_llm_judges_rerun_costs_nothing_and_writes_the_same_rows(settings, conn, dataset,
                                                                 fake):
    config = judge_settings(settings, fake, **LLM)
    first = judge_dataset(conn, config, dataset["name"])
    assert first.complete and first.provider_calls == 2 * first.pairs == first.billed_calls
    assert conn.execute("SELECT count(*) FROM api_cost_log WHERE run_id = %s AND query_id IS "
                        "NULL", (first.run_id,)).fetchone()[0] == 0  # each row names its query
    assert _cost_rows(conn, first.run_id)[0] == first.billed_calls
    assert _cost_rows(conn, first.run_id)[1] == pytest.approx(first.cost_usd)
    before = [r[:12] for r in _ground_truth(conn, dataset["name"])]
    sent = fake.chat_requests
    second = judge_dataset(conn, config, dataset["name"])
    assert fake.chat_requests == sent and second.provider_calls == 0
    assert second.cache_hits == 2 * second.pairs and second.cost_usd == 0
    assert _cost_rows(conn, second.run_id)[0] == 0
    after = [r[:12] for r in _ground_truth(conn, dataset["name"])]
    assert after == before and len(after) == 3  # the same rows, not new ones
    assert before[0][6:8] == ("openai:gpt-4o", "anthropic:claude-haiku-4-5")
    assert before[0][11] == ["relevance-v1", "relevance-v1"]


def test_unscored_and_failed_pairs_are_null_counted_and_the_run_goes_on(settings, conn,
                                                                         dataset, fake):
    coffee, memory = DOCS["d6"], DOCS["d8"]
    fake.responder = lambda api, system, user, body: (
        "hard to say" if api == "openai" and coffee in user else _default_responder(
            api, system, user, body))
    fake.fault_rule = lambda api, user: "503" if api == "anthropic" and memory in user else None
    config = judge_settings(settings, fake, **LLM)
    time_ = FakeTime()
    summary = asyncio.run(judge_dataset_async(conn, config, dataset["name"],
                                              session_options=time_.options()))
    rows = {r[1]: r for r in _ground_truth(conn, dataset["name"])}
    doc_text = dict(conn.execute("SELECT id, content FROM l2_insights WHERE dataset = %s",
                                 (dataset["name"],)).fetchall())
    unscored = failed = 0
    for row in rows.values():
        for doc_id, s1, s2, st1, st2 in zip(row[3], row[4], row[5], row[9], row[10]):
            if coffee in doc_text[doc_id]:
                assert (s1, st1) == (None, "unscored")
                unscored += 1
            else:
                assert st1 == "scored" and s1 is not None
            if memory in doc_text[doc_id]:
                assert (s2, st2) == (None, "failed")
                failed += 1
            else:
                assert st2 == "scored" and s2 is not None
    assert unscored >= 1 and failed >= 1
    assert (summary.unscored, summary.failed) == (unscored, failed)
    assert summary.queries_written == 3 and not summary.complete  # written, but with failures
    assert summary.retries == 4 * failed and len(time_.waits) == 4 * failed


def test_both_judges_are_called_in_parallel(settings, conn, dataset, fake):
    # Parallelism is read off the server (requests of both judges in flight at once), not
    # off a wall clock: a timed assertion fails on a loaded machine whatever the code does.
    fake.latency = 0.2
    config = judge_settings(settings, fake, **LLM)
    summary = judge_dataset(conn, config, dataset["name"], limit=1)
    assert summary.complete and fake.chat_requests == 2 * summary.pairs >= 8
    assert fake.max_in_flight >= 2
    records = fake.chat_records()
    overlapping = {(a.api, b.api) for a in records for b in records
                   if a is not b and a.api != b.api and abs(a.at - b.at) < 0.2}
    assert overlapping  # an anthropic and an openai request were on their way together


def test_the_budget_stops_the_run_and_keeps_what_was_done(settings, conn, dataset, fake):
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical",
                            concurrency=1)
    probe = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical")
    worst = PriceTable(probe.judges.prices).worst_case(
        __import__("eval_harness.judges.llm", fromlist=["LLMJudge"]).LLMJudge(
            "openai:gpt-4o", None, probe.judges).relevance_request("q" * 40, "d" * 40))
    config = replace(config, judges=replace(config.judges, budget_usd=4 * worst))
    summary = judge_dataset(conn, config, dataset["name"])
    assert summary.stopped == "budget" and not summary.complete
    assert summary.queries_written < summary.queries
    assert 0 < summary.cost_usd <= 4 * worst
    assert _cost_rows(conn, summary.run_id)[0] == summary.billed_calls > 0
    written = [r for r in _ground_truth(conn, dataset["name"]) if r[12] == summary.run_id]
    assert len(written) == summary.queries_written


def test_store_dual_judge_scores_has_the_seed_tool_semantics(settings, conn, dataset, fake):
    config = judge_settings(settings, fake, **LLM)
    query_id, query = conn.execute("SELECT id, query FROM ground_truth WHERE dataset = %s "
                                   "ORDER BY id LIMIT 1", (dataset["name"],)).fetchone()
    docs = [{"id": i, "content": c} for i, c in conn.execute(
        "SELECT id, content FROM l2_insights WHERE dataset = %s ORDER BY id LIMIT 5",
        (dataset["name"],))]
    result = store_dual_judge_scores(query_id, query, docs, conn=conn, settings=config)
    assert len(result["judge1_scores"]) == len(result["judge2_scores"]) == 5
    assert all(0.0 <= s <= 1.0 for s in result["judge1_scores"] + result["judge2_scores"])
    assert -1.0 <= result["kappa"] <= 1.0
    row = conn.execute("SELECT judged_docs, judge1_score, kappa FROM ground_truth WHERE id = %s",
                       (query_id,)).fetchone()
    assert row[0] == [d["id"] for d in docs] and row[1] == result["judge1_scores"]
    assert row[2] == pytest.approx(result["kappa"])
    with pytest.raises(LookupError, match="does not exist"):
        store_dual_judge_scores(10 ** 9, query, docs, conn=conn, settings=config)
    with pytest.raises(ValueError, match="docs\\[1\\]"):
        store_dual_judge_scores(query_id, query, [{"id": "x"}], conn=conn, settings=config)


@pytest.mark.unit
def test_pair_kappa_binarizes_strictly_above_the_threshold():
    # the seed's example: [0.8, 0.6, 0.3, 0.9, 0.4] vs [0.7, 0.6, 0.2, 0.8, 0.4] agree fully
    assert pair_kappa([0.8, 0.6, 0.3, 0.9, 0.4], [0.7, 0.6, 0.2, 0.8, 0.4], threshold=0.5) == 1.0
    # 0.5 is not relevant, 0.51 is: labels [0, 1] vs [1, 1] -> P_o 0.5, P_e 0.5, kappa 0
    assert pair_kappa([0.5, 0.51], [0.51, 0.9], threshold=0.5) == pytest.approx(0.0)
    assert pair_kappa([None, 0.7], [0.2, None], threshold=0.5) is None  # nothing scored by both


@pytest.mark.parametrize("batch_errors", [0, 1])
def test_batch_round_trip_through_both_batch_apis(settings, conn, dataset, fake, batch_errors):
    fake.batch_errors = batch_errors
    config = judge_settings(settings, fake, **LLM)
    time_ = FakeTime()
    summary = asyncio.run(judge_dataset_async(conn, config, dataset["name"], batch=True,
                                              session_options=time_.options()))
    report = summary.batch
    assert summary.complete and summary.mode == "batch"
    assert report.batches == 2 and report.submitted == 2 * summary.pairs
    assert report.errored == 2 * batch_errors and report.succeeded == report.submitted - \
        report.errored
    assert time_.waits == [config.judges.batch.poll_interval_seconds]  # one poll, then ended
    # the judges then read every batch reply from the cache; errored ones went live
    assert summary.provider_calls == report.errored == len(fake.chat_records())
    assert summary.cache_hits == report.succeeded
    count, cost, in_batch = _cost_rows(conn, summary.run_id)
    assert count == summary.billed_calls == report.succeeded + report.errored
    assert in_batch == report.succeeded
    assert cost == pytest.approx(summary.cost_usd)
    prices = PriceTable(config.judges.prices)
    for model, tokens_in, tokens_out, estimated in conn.execute(
            "SELECT model, input_tokens, output_tokens, estimated_cost FROM api_cost_log "
            "WHERE run_id = %s AND batch", (summary.run_id,)):
        price = prices.lookup(model)
        full = (tokens_in * price.input + tokens_out * price.output) / 1e6
        assert estimated == pytest.approx(full * 0.5)  # the batch discount
    uploads = [r for r in fake.records if r.api == "files"]
    assert len(uploads) == 1 and uploads[0].body["purpose"] == "batch"


# ---------------------------------------------------------------------------------------
# The command line and the asset


def write_judged(path, dataset):
    path.write_text(f"""
default_dataset: {dataset['name']}
datasets:
  {dataset['name']}:
    path: {dataset['folder']}
hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
judges:
  budget_usd: 1.0
  rate_limits:
    openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
    anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
""")


pytestmark = pytest.mark.project(config=write_judged)  # the tests below


def test_cli_judge_prints_a_json_summary_offline(project, capsys):
    code = cli.main(["--config", str(project), "judge", "--dataset", project.default_dataset,
                     "--limit", "2", "--json"])
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert code == 0, err
    assert summary["queries"] == summary["queries_written"] == 2
    for key in ("pairs", "scored", "unscored", "failed", "provider_calls", "cache_hits",
                "retries", "input_tokens", "output_tokens", "cost_usd", "pooled_kappa"):
        assert key in summary
    assert summary["judge1"] == "local:lexical" and summary["failed"] == 0
    assert any("OPENAI_API_KEY is not set" in n for n in summary["notices"])


def test_cli_judge_with_llm_judges_and_a_text_summary(project, capsys, fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cli-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-cli-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
    code = cli.main(["--config", str(project), "judge"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "judge1 openai:gpt-4o, judge2 anthropic:claude-haiku-4-5" in out
    assert "pooled kappa" in out and "cache hits 0" in out and "cost $" in out
    assert "sk-test-cli" not in out + err
    code, out = cli.main(["--config", str(project), "judge"]), capsys.readouterr()[0]
    assert code == 0 and "provider calls 0" in out and "cost $0.0000" in out


def test_cli_judge_unknown_dataset_is_one_sentence(project, capsys):
    code = cli.main(["--config", str(project), "judge", "--dataset", "nope"])
    err = capsys.readouterr()[1]
    last = err.strip().splitlines()[-1]
    assert code == 2 and "Traceback" not in err
    assert last.startswith("eval-harness: error: Dataset 'nope' is not in the store")


def test_asset_materializes_with_the_summary_in_its_metadata(project, store):
    resources = default_resources(config_path=str(project), database_url=store.url)
    result = dg.materialize([dual_judge_scores], resources=resources, run_config={
        "ops": {"dual_judge_scores": {"config": {"limit": 2}}}})
    assert result.success
    metadata = result.get_asset_materialization_events()[0] \
        .step_materialization_data.materialization.metadata
    assert metadata["queries_written"].value == 2 and metadata["failed"].value == 0
    assert metadata["judge1"].value == "local:lexical" and "pooled_kappa" in metadata
    assert metadata["run_id"].value == result.run_id


@pytest.mark.unit
def test_definitions_include_the_judging_asset():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert "dual_judge_scores" in keys
    assert defs.resolve_job_def("judging_job") is not None
    main = defs.resolve_job_def(MAIN_JOB)
    assert dg.AssetKey("dual_judge_scores") not in main.asset_layer.executable_asset_keys
