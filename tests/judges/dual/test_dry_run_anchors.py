"""``judge --dry-run`` with ``judges.anchors`` on: re-judging the frozen anchors is priced on
its own lines, one request per anchor and LLM judge, and nothing before the set is frozen."""

from __future__ import annotations

import uuid
from dataclasses import replace

from colliding_processes import beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.settings.judges import AnchorSettings, RetestSettings
from fake_llm_server import judge_settings
from judge_runs import LLM


def test_dry_run_prices_the_anchor_requests_on_their_own_lines(settings, conn, tmp_path, fake):
    tag = uuid.uuid4().hex[:8]
    name = f"anchorcost_{tag}"
    ingest_beir(conn, beir(tmp_path / name, n_docs=30, n_queries=6, tag=tag), name=name)
    config = judge_settings(settings, fake, **LLM, budget_usd=None,
                            anchors=AnchorSettings(True, 12, 0))
    before = estimate_judge_run(conn, config, name)
    conn.rollback()
    assert [a.requests for a in before.anchors] == [0, 0]
    assert "no anchor set yet" in before.format()
    judge_dataset(conn, config, name)  # freezes 12 anchors
    fake.reset()
    report = estimate_judge_run(conn, config, name)
    conn.rollback()
    without = estimate_judge_run(conn, replace(config, judges=replace(
        config.judges, anchors=AnchorSettings())), name)
    conn.rollback()
    assert fake.chat_requests == 0 and without.anchors == []
    assert [a.requests for a in report.anchors] == [12, 12]
    assert without.to_pay == 0 and report.to_pay == 24  # the labels are cached
    assert report.cost_usd > without.cost_usd
    assert "anchors judge1 openai:gpt-4o  12 anchors past the cache  to pay 12" \
        in report.format()
    assert report.to_dict()["anchors"][0]["requests"] == 12


def test_dry_run_prices_each_budget_line_against_its_own_budget(settings, conn, tmp_path,
                                                                  fake):
    tag = uuid.uuid4().hex[:8]
    name = f"linecost_{tag}"
    ingest_beir(conn, beir(tmp_path / name, n_docs=30, n_queries=6, tag=tag), name=name)
    judge_dataset(conn, judge_settings(settings, fake, **LLM, budget_usd=None,
                                       anchors=AnchorSettings(True, 12, 0)), name)
    fake.reset()
    # the labels are cached: a label budget of 0 fits them whatever the anchors cost
    config = judge_settings(settings, fake, **LLM, budget_usd=0.0,
                            anchors=AnchorSettings(True, 12, 0, budget_usd=0.001),
                            retest=RetestSettings(True, 2, 3, 0))
    report = estimate_judge_run(conn, config, name)
    conn.rollback()
    retest, anchors = report.budget_lines
    assert (retest.key, retest.budget_usd, retest.verdict) == (
        "judges.retest.budget_usd", None, "no limit")
    assert retest.requests == sum(r.requests for r in report.retest) > 0
    assert (anchors.key, anchors.requests, anchors.budget_usd) == (
        "judges.anchors.budget_usd", 24, 0.001)
    assert anchors.cost_usd > 0.001
    assert anchors.verdict == "would stop re-judging the anchors early (the run goes on)"
    text = report.format()
    assert ("budget line judges.anchors.budget_usd (re-judging the anchors): $0.0010; 24 "
            "requests") in text
    assert "budget $0.0000 per run (judges.budget_usd, the labels) fits" in text
    lines = report.to_dict()["budget_lines"]
    assert [line["verdict"] for line in lines] == ["no limit", anchors.verdict]
