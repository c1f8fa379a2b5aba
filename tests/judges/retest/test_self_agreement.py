"""Test-retest of the judges against the fake LLM server's noisy judge: the flip rate it
measures, what it pays for (provider requests counted), what it stores, the dry run's line
and ``judge --retest`` on the command line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.judges.retest.self_agreement import retest_sample, stored_retests
from eval_harness.settings.judges import RetestSettings
from eval_harness_pipelines import cli
from fake_llm_judges import JudgeBehaviours, NoisyJudge
from fake_llm_server import default_reply, judge_settings
from judge_cli_env import judge_cli_environment
from judge_runs import LLM, small_dataset


def _dataset(conn, tmp_path, *, queries: int = 12, tag: str | None = None) -> str:
    return small_dataset(conn, tmp_path, "retest", queries=queries, tag=tag)


def _config(settings, fake, *, queries=12, repeats=3, seed=0, **judges):
    return judge_settings(settings, fake, **LLM, budget_usd=None, **judges,
                          retest=RetestSettings(True, queries, repeats, seed))


def _requests_by_purpose(conn, run_id):
    return dict(conn.execute("SELECT purpose, count(*) FROM api_cost_log WHERE run_id = %s "
                             "GROUP BY purpose", (run_id,)).fetchall())


@pytest.mark.slow
def test_noisy_judge_flip_rate_is_measured_within_its_interval(settings, conn, tmp_path, fake):
    """Judge 1 flips a retest label with probability p = 0.2, judge 2 is stable. In each of
    three seeded repetitions (a fresh dataset, a fresh noise seed) the measured flip rate's
    interval holds the run's own realised flip share, and covers p in most of them (the
    datasets' texts are fixed per seed, so the draws are the same on every run)."""
    p, covered = 0.2, 0
    for seed in range(3):
        fake.responder = JudgeBehaviours({"gpt-4o": NoisyJudge(p, seed=seed)})
        # a fixed tag per seed: the noise is drawn from the texts, so the run is reproducible
        name = _dataset(conn, tmp_path / str(seed), queries=10, tag=f"noisy{seed}")
        summary = judge_dataset(conn, _config(settings, fake, queries=10, seed=seed), name)
        judge1, judge2 = summary.retest
        figures = judge1.agreement
        assert judge1.pairs == summary.pairs and judge1.queries == 10
        assert figures.flip_interval.low <= figures.flip_rate <= figures.flip_interval.high
        assert 0.05 < figures.flip_rate < 0.4
        covered += figures.flip_interval.low <= p <= figures.flip_interval.high
        assert figures.alpha_labels < 1.0 and figures.unstable_share > figures.flip_rate
        # the stable judge: flip rate 0, alpha 1 on its scores and labels
        stable = judge2.agreement
        assert stable.flip_rate == 0.0 and stable.unstable_share == 0.0
        assert stable.alpha_scores == 1.0 and stable.alpha_labels == 1.0
        assert "judge 1 (openai:gpt-4o) flips" in summary.format()
    assert covered >= 2


def test_nothing_outside_the_retest_is_paid_twice(settings, conn, tmp_path, fake):
    noisy = JudgeBehaviours({"gpt-4o": NoisyJudge(0.5), "claude-haiku-4-5": NoisyJudge(0.5)})
    fake.responder = noisy
    name = _dataset(conn, tmp_path, queries=6)
    plain = judge_settings(settings, fake, **LLM, budget_usd=None)
    first = judge_dataset(conn, plain, name)
    assert fake.chat_requests == 2 * first.pairs
    cache = conn.execute("SELECT key, reply FROM judge_cache WHERE run_id = %s",
                         (first.run_id,)).fetchall()

    fake.reset()
    fake.responder = noisy
    again = judge_dataset(conn, plain, name)  # judge without --retest: the cache answers all
    assert fake.chat_requests == 0 and again.billed_calls == 0

    retested = judge_dataset(conn, _config(settings, fake, queries=4, repeats=2), name)
    sample_pairs = retested.retest[0].pairs
    assert sample_pairs == retested.retest[1].pairs > 4
    assert fake.chat_requests == 2 * 2 * sample_pairs  # only the retests: 2 judges x 2 repeats
    assert _requests_by_purpose(conn, retested.run_id) == {"retest": 2 * 2 * sample_pairs}
    assert sum(r.requests for r in retested.retest) == fake.chat_requests
    # the cached replies the labels came from are untouched by the (noisy) retests
    assert conn.execute("SELECT key, reply FROM judge_cache WHERE key = ANY(%s)",
                        ([k for k, _ in cache],)).fetchall() == cache
    assert noisy.flips["gpt-4o"] > 0

    stored = stored_retests(conn, name, threshold=settings.agreement.relevance_threshold)
    assert [(s.judge, s.spec, s.pairs, s.repeats) for s in stored] == [
        (1, LLM["judge1"], sample_pairs, 2), (2, LLM["judge2"], sample_pairs, 2)]
    assert stored[0].agreement.flip_rate == retested.retest[0].agreement.flip_rate
    rows = conn.execute("SELECT count(*), count(*) FILTER (WHERE repeat = 0), "
                        "count(DISTINCT prompt_version) FROM judge_retests WHERE run_id = %s",
                        (retested.run_id,)).fetchone()
    assert rows == (2 * 3 * sample_pairs, 2 * sample_pairs, 1)
    # the agreement report shows the newest test-retest, per judge
    result = dataset_agreement(conn, name, settings.agreement)
    assert [r.judge for r in result.retest] == [1, 2]
    markdown = format_agreement_markdown(result)
    assert "## Each judge against itself (test-retest)" in markdown
    assert "- judge 1 (openai:gpt-4o) flips " in markdown and "of pairs unstable" in markdown


@pytest.mark.unit
def test_retest_sample_is_seeded_and_order_free():
    from eval_harness.judges.dual.plan import PlannedQuery

    planned = [PlannedQuery(i, f"q{i}", f"text {i}", None, (1,)) for i in range(30)]
    first = retest_sample(planned, queries=5, seed=3)
    assert [p.query_id for p in retest_sample(planned[::-1], queries=5, seed=3)] == \
        [p.query_id for p in first]
    assert len(first) == 5 and retest_sample(planned, queries=5, seed=4) != first
    assert retest_sample(planned[:3], queries=5, seed=0) == planned[:3]


def test_dry_run_prices_the_retest_requests_on_their_own_line(settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path, queries=6)
    config = _config(settings, fake, queries=4, repeats=2)
    report = estimate_judge_run(conn, config, name)
    conn.rollback()
    without = estimate_judge_run(conn, replace(config, judges=replace(
        config.judges, retest=RetestSettings())), name)
    conn.rollback()
    assert fake.chat_requests == 0 and without.retest == []
    retest1, retest2 = report.retest
    assert retest1.requests == retest2.requests == 2 * retest1.pairs
    assert report.to_pay == without.to_pay + 4 * retest1.pairs
    assert report.cost_usd > without.cost_usd
    lines = report.format().splitlines()
    assert any(line.startswith("retest judge1 openai:gpt-4o  4 queries") for line in lines)
    assert json.loads(json.dumps(report.to_dict()))["retest"][0]["requests"] == retest1.requests

    summary = judge_dataset(conn, config, name)  # the real run pays what the dry run said
    assert fake.chat_requests == report.to_pay
    assert _requests_by_purpose(conn, summary.run_id)["retest"] == 4 * retest1.pairs


def test_cli_retest_switches_it_on_for_one_run(settings, conn, tmp_path, fake, store,
                                               monkeypatch, capsys):
    name = _dataset(conn, tmp_path, queries=3)
    conn.commit()
    config = tmp_path / "config.yaml"
    config.write_text(f"""
default_dataset: {name}
datasets:
  {name}:
    path: {tmp_path / name}
judges:
  budget_usd: 1.0
  judge1: openai:gpt-4o
  judge2: anthropic:claude-haiku-4-5
  retest: {{enabled: false, queries: 2, repeats: 1}}
  rate_limits:
    openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
    anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
""")
    judge_cli_environment(monkeypatch, store, fake, tag="retest")
    assert cli.main(["--config", str(config), "judge", "--json"]) == 0
    assert json.loads(capsys.readouterr()[0])["retest"] is None
    fake.reset()
    assert cli.main(["--config", str(config), "judge", "--retest"]) == 0
    out = capsys.readouterr()[0]
    assert "judge 1 (openai:gpt-4o) flips 0.0% [" in out and "2 queries" in out
    assert fake.chat_requests > 0  # the retests, past the cache


@pytest.mark.unit
def test_the_fake_drifting_judge_flips_its_share_after_the_given_requests():
    """The fake provider's drifting judge (the drift check's test double): the base answers up
    to ``after_requests``, then a fixed share of flipped labels and shifted scores."""
    from eval_harness.judges.prompts import relevance_prompt
    from fake_llm_judges import DriftingJudge, flipped

    drifting = JudgeBehaviours({"gpt-4o": DriftingJudge(after_requests=200, flip_share=0.15,
                                                        score_shift=0.05, seed=1)})
    prompts = [relevance_prompt(f"aspirin heart {i}", f"aspirin lowers heart risk {i}")
               for i in range(200)]

    def ask(prompt):
        base = default_reply("openai", prompt.system, prompt.user, {})
        return float(base), float(drifting("openai", prompt.system, prompt.user,
                                           {"model": "gpt-4o"}))

    before = [ask(p) for p in prompts]
    assert all(base == pytest.approx(got) for base, got in before)
    after = [ask(p) for p in prompts]
    flips = sum((base > 0.5) != (got > 0.5) for base, got in after)
    assert 0.08 * 200 < flips < 0.22 * 200 and drifting.flips["gpt-4o"] == flips
    assert [ask(p)[1] for p in prompts] == [got for _, got in after]  # the same share, again
    unflipped = [(base, got) for base, got in after if (base > 0.5) == (got > 0.5)]
    assert all(got == pytest.approx(min(1.0, base + 0.05)) for base, got in unflipped)
    assert flipped(0.8, 0.5) == pytest.approx(0.2) and flipped(0.5, 0.5) == 0.6
    # another model is not touched
    assert drifting("openai", prompts[0].system, prompts[0].user, {"model": "other"}) == \
        default_reply("openai", prompts[0].system, prompts[0].user, {})
