"""``judge --dry-run``: it plans what a real run judges, sends nothing, writes nothing, and its
"to pay" count is what the real run then pays for (against the fake LLM server)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import replace

import pytest

from beir_factory import ingest_aspirin_dataset
from colliding_processes import beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.client.pricing import PriceTable, estimated_input_tokens
from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.settings.judges import StagedSettings
from eval_harness_pipelines import cli
from fake_llm_server import default_reply, judge_settings
from judge_cli_env import judge_cli_environment
from judge_runs import LLM


@pytest.fixture
def dataset(tmp_path, conn):
    return ingest_aspirin_dataset(conn, tmp_path / "data", "dryrun")


def _store_state(conn, name):
    """Row counts a dry run must leave as they are."""
    return conn.execute("""
        SELECT (SELECT count(*) FROM judge_cache), (SELECT count(*) FROM api_cost_log),
               (SELECT count(*) FROM api_cache_hit_log),
               (SELECT count(*) FROM ground_truth WHERE dataset = %s
                  AND (judged_docs IS NOT NULL OR judge1_score IS NOT NULL
                       OR judge2_score IS NOT NULL OR kappa IS NOT NULL))""",
                        (name,)).fetchone()


def _logged(conn, run_id, provider):
    return conn.execute("SELECT count(*), coalesce(sum(input_tokens), 0), "
                        "coalesce(sum(output_tokens), 0) FROM api_cost_log "
                        "WHERE run_id = %s AND api_name = %s", (run_id, provider)).fetchone()


def test_dry_run_sends_and_writes_nothing_and_predicts_what_the_run_pays(settings, conn,
                                                                          dataset, fake):
    config = judge_settings(settings, fake, **LLM)
    before = _store_state(conn, dataset)
    report = estimate_judge_run(conn, config, dataset)
    conn.rollback()
    assert fake.records == [] and fake.chat_requests == 0  # no provider was contacted
    assert _store_state(conn, dataset) == before
    judge1, judge2 = report.judges
    assert (judge1.spec, judge2.spec) == (LLM["judge1"], LLM["judge2"])
    assert report.queries == 3 and judge1.pairs == judge2.pairs == report.pairs > 3
    assert judge1.cached == judge2.cached == 0  # texts no other test used
    assert judge1.to_pay == judge2.to_pay == report.pairs

    summary = judge_dataset(conn, config, dataset)
    assert summary.complete and summary.pairs == report.pairs
    # every reply parses (default responder): one paid request per first ask
    assert fake.chat_requests == summary.billed_calls == report.to_pay
    assert len(fake.chat_records("openai")) == judge1.to_pay
    assert len(fake.chat_records("anthropic")) == judge2.to_pay
    for estimate, provider in ((judge1, "openai"), (judge2, "anthropic")):
        calls, _, tokens_out = _logged(conn, summary.run_id, provider)
        assert calls == estimate.to_pay
        assert tokens_out <= estimate.output_tokens  # the fake bills 1 token for "0.7"
    # Input tokens: only the fake's Anthropic usage is realistic (characters/4 + 1 per
    # request; its OpenAI usage counts the system prompt twice). The estimate adds 4 tokens of
    # chat framing per message (2 messages): above the logged count, by at most 10 %.
    tokens_in = _logged(conn, summary.run_id, "anthropic")[1]
    assert tokens_in <= judge2.input_tokens <= 1.10 * tokens_in


def test_the_cost_is_the_price_table_on_the_estimate_and_batch_halves_it(settings, conn,
                                                                         dataset, fake):
    config = judge_settings(settings, fake, **LLM)
    live = estimate_judge_run(conn, config, dataset)
    batch = estimate_judge_run(conn, config, dataset, batch=True)
    conn.rollback()
    prices = PriceTable(config.judges.prices)
    for judge in live.judges:
        price = prices.lookup(judge.spec.split(":", 1)[1])
        expected = (judge.input_tokens * price.input + judge.output_tokens * price.output) / 1e6
        assert judge.cost_usd == pytest.approx(expected) and judge.cost_usd > 0
        # typical replies are short: the budget's worst case is well above the estimate
        assert judge.max_cost_usd > judge.cost_usd
    for one, other in zip(live.judges, batch.judges):
        price = prices.lookup(one.spec.split(":", 1)[1])
        assert other.cost_usd == pytest.approx(one.cost_usd * (1 - price.batch_discount))
        assert other.to_pay == one.to_pay
    assert live.by_provider["openai"]["cost_usd"] == pytest.approx(live.judges[0].cost_usd)
    assert live.cost_usd == pytest.approx(sum(j.cost_usd for j in live.judges))
    assert fake.chat_requests == 0 and batch.mode == "batch"


def test_after_a_real_run_every_pair_is_cached_and_free(settings, conn, dataset, fake):
    config = judge_settings(settings, fake, **LLM)
    judge_dataset(conn, config, dataset, limit=2)
    sent = fake.chat_requests
    report = estimate_judge_run(conn, config, dataset)
    conn.rollback()
    assert fake.chat_requests == sent
    limited = estimate_judge_run(conn, config, dataset, limit=2)
    conn.rollback()
    for judge in limited.judges:  # the two judged queries: all cached
        assert judge.cached == judge.pairs and judge.to_pay == 0 and judge.cost_usd == 0
        assert judge.input_tokens == 0
    for judge, done in zip(report.judges, limited.judges):  # the third query is still to pay
        assert judge.cached == done.pairs and judge.to_pay == judge.pairs - done.pairs > 0
    summary = judge_dataset(conn, config, dataset)
    assert fake.chat_requests - sent == report.to_pay == summary.billed_calls


def test_identical_requests_are_paid_once(settings, conn, tmp_path, fake):
    """Two documents with the same text make the same request: the run pays for it once."""
    import uuid

    from beir_factory import write_beir
    from eval_harness.datasets.ingest import ingest_beir

    tag = uuid.uuid4().hex[:8]
    docs = {"a": f"aspirin thins the blood {tag}", "b": f"aspirin thins the blood {tag}",
            "c": f"statins lower cholesterol {tag}"}
    write_beir(tmp_path / "dup", docs, {"q1": f"aspirin blood {tag}"},
               [("q1", "a", 1), ("q1", "b", 1)])
    name = f"dryrun_dup_{tag}"
    ingest_beir(conn, tmp_path / "dup", name=name)
    config = judge_settings(settings, fake, **LLM)
    report = estimate_judge_run(conn, config, name)
    conn.rollback()
    for judge in report.judges:
        assert judge.repeated == 1 and judge.to_pay == judge.pairs - 1
    summary = judge_dataset(conn, config, name)
    assert summary.pairs == report.pairs and fake.chat_requests == report.to_pay


def test_local_judges_cost_nothing(settings, conn, dataset, fake):
    local = replace(judge_settings(settings, None), openai_api_key=None, anthropic_api_key=None)
    report = estimate_judge_run(conn, local, dataset)
    conn.rollback()
    assert [j.spec for j in report.judges] == ["local:lexical", "local:embedding"]
    assert len(report.notices) == 2  # the same fallback a real run says
    for judge in report.judges:
        assert judge.local and judge.pairs == report.pairs > 0
        assert (judge.to_pay, judge.input_tokens, judge.cost_usd, judge.max_cost_usd) == (0, 0,
                                                                                     0, 0)
    assert report.cost_usd == 0 and "local judge: no request, $0" in report.format()
    assert fake.records == []


def test_input_estimate_counts_characters_and_messages(settings, fake):
    from eval_harness.judges.llm import LLMJudge

    judge = LLMJudge("openai:gpt-4o", None, settings.judges, base_url="https://x.test/v1")
    request = judge.relevance_request("q" * 10, "d" * 400)
    chars = len(request.system) + len(request.messages[0].content)
    # ceil(chars / 4) + 4 tokens for each of the two messages (system, user)
    assert estimated_input_tokens(request) == -(-chars // 4) + 8


# ---------------------------------------------------------------------------------------
# Shards and staged judging: the dry run plans what that run does


@pytest.fixture
def twelve(tmp_path, conn):
    """12 queries, 2 expected documents each plus 2 hybrid hits, texts unique to this test."""
    tag = uuid.uuid4().hex[:8]
    folder = beir(tmp_path / "twelve", n_docs=30, n_queries=12, tag=tag)
    name = f"dry12_{tag}"
    ingest_beir(conn, folder, name=name)
    return {"name": name, "folder": folder}


def _twelve_settings(settings, fake, **judges):
    return judge_settings(settings, fake, hybrid_top_k=2, **LLM, **judges)


def test_a_shard_dry_run_plans_exactly_what_the_shard_run_pays(settings, conn, twelve, fake,
                                                               tmp_path, store, monkeypatch,
                                                               capsys):
    config = _twelve_settings(settings, fake)
    whole = estimate_judge_run(conn, config, twelve["name"])
    report = estimate_judge_run(conn, config, twelve["name"], shard=(0, 3))
    conn.rollback()
    assert report.shard == "0/3" and 0 < report.queries < whole.queries
    summary = judge_dataset(conn, config, twelve["name"], shard=(0, 3))
    assert (report.queries, report.pairs) == (summary.queries, summary.pairs)
    assert len(fake.chat_records("openai")) == report.judges[0].to_pay
    assert len(fake.chat_records("anthropic")) == report.judges[1].to_pay
    assert fake.chat_requests == summary.billed_calls == report.to_pay == 2 * report.pairs

    # the command line passes --shard on: the next shard, still all to pay
    path = tmp_path / "shards.yaml"
    path.write_text(f"""
default_dataset: {twelve['name']}
datasets:
  {twelve['name']}: {{path: {twelve['folder']}}}
hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
judges: {{judge1: "{LLM['judge1']}", judge2: "{LLM['judge2']}", hybrid_top_k: 2}}
""")
    judge_cli_environment(monkeypatch, store, fake, tag="dry")
    code = cli.main(["--config", str(path), "judge", "--dry-run", "--json", "--shard", "1/3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    planned = json.loads(out)
    next_shard = estimate_judge_run(conn, config, twelve["name"], shard=(1, 3))
    conn.rollback()
    assert planned["shard"] == "1/3"
    assert (planned["queries"], planned["pairs"], planned["total"]["to_pay"]) == (
        next_shard.queries, next_shard.pairs, 2 * next_shard.pairs)
    assert planned["queries"] < whole.queries


@pytest.mark.parametrize("agree", [True, False])
def test_a_staged_dry_run_states_the_range_the_staged_run_pays_within(settings, conn, twelve,
                                                                      fake, agree):
    """Judge 2's requests depend on kappa as the sample grows: the dry run says at least
    (the first sample) and at most (every query); agreeing judges stop at the first, the
    coin-flipping judge 2 of _disagree never lets the bound clear."""
    if not agree:
        fake.responder = _disagree
    config = _twelve_settings(settings, fake, staged=StagedSettings(
        enabled=True, seed=0, first_queries=3, step_queries=3))
    report = estimate_judge_run(conn, config, twelve["name"])
    conn.rollback()
    judge1, judge2 = report.judges
    assert judge2.sample_queries == (3, 12) and judge2.to_pay == judge1.to_pay == report.pairs
    assert 0 < judge2.at_least.to_pay < judge2.to_pay
    assert report.to_pay_at_least == judge1.to_pay + judge2.at_least.to_pay
    assert f"to pay at least {judge2.at_least.to_pay}, at most {judge2.to_pay}" in \
        report.format()
    # the stop rule the run will read: 12 queries by 3 -> early looks at 3, 6 and 9
    assert report.staged["looks"] == 3 and report.to_dict()["staged"]["looks"] == 3
    assert "lower bound of kappa with alpha 2.5% spent over 3 looks" in report.format()

    summary = judge_dataset(conn, config, twelve["name"])
    paid2 = len(fake.chat_records("anthropic"))
    assert len(fake.chat_records("openai")) == judge1.to_pay
    assert judge2.at_least.to_pay <= paid2 <= judge2.to_pay
    assert paid2 == (judge2.at_least.to_pay if agree else judge2.to_pay)
    assert summary.staging.cleared == agree


def _disagree(api, system, user, body):
    """Judge 2 (anthropic) relevant or not by a hash of the prompt, whatever judge 1 says."""
    if api == "anthropic" and "Relevance score" in user:
        return "1.0" if hashlib.sha256(user.encode()).digest()[0] % 2 else "0.0"
    return default_reply(api, system, user, body)


# ---------------------------------------------------------------------------------------
# The command line


def write_judged(path, dataset):
    path.write_text(f"""
default_dataset: {dataset}
datasets:
  {dataset}:
    path: {path.parent / 'data'}
hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
judges:
  budget_usd: 1.0
  judge1: openai:gpt-4o
  judge2: anthropic:claude-haiku-4-5
""")


pytestmark = pytest.mark.project(config=write_judged, judges_on_fake="dry")  # the tests below


def test_cli_dry_run_json_and_text(project, capsys, conn, fake):
    before = _store_state(conn, project.default_dataset)
    conn.commit()
    code = cli.main(["--config", str(project), "judge", "--dry-run", "--json",
                     "--limit", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["dry_run"] is True and report["queries"] == 2
    assert [j["spec"] for j in report["judges"]] == [
        "openai:gpt-4o", "anthropic:claude-haiku-4-5"]
    assert report["total"]["to_pay"] == 2 * report["pairs"] and report["budget_usd"] == 1.0
    assert set(report["by_provider"]) == {"openai", "anthropic"}
    code = cli.main(["--config", str(project), "judge", "--dry-run", "--batch"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(
        f"dry run of judging dataset '{project.default_dataset}' (batch mode)")
    assert lines[1].startswith("judge1 openai:gpt-4o  pairs ") and "(0 cached)" in lines[1]
    assert "input tokens" in lines[1] and "output tokens" in lines[1] and "~$" in lines[1]
    assert lines[3].startswith("total  to pay ") and "budget $1.00 per run" in lines[3]
    assert "sk-test-dry" not in out + err
    assert fake.records == [] and _store_state(conn, project.default_dataset) == before


def test_cli_dry_run_refuses_retry_unscored(project, capsys, fake):
    code = cli.main(["--config", str(project), "judge", "--dry-run", "--retry-unscored"])
    err = capsys.readouterr()[1]
    assert code == 2 and "--dry-run does not estimate --retry-unscored" in err
    assert fake.records == []
