"""Retests and anchors spend their own budget lines (``judges.retest.budget_usd``,
``judges.anchors.budget_usd``), never ``judges.budget_usd``: a line used up stops its step
with one sentence and the run goes on; a used-up label budget does not starve them (provider
requests counted against the fake LLM server)."""

from __future__ import annotations

from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.settings.judges import AnchorSettings, RetestSettings
from fake_llm_server import judge_settings
from judge_runs import LLM, small_dataset


def _dataset(conn, tmp_path, *, queries: int = 6) -> str:
    return small_dataset(conn, tmp_path, "lines", queries=queries)


def _purposes(conn, run_id) -> dict[str, int]:
    return dict(conn.execute("SELECT purpose, count(*) FROM api_cost_log WHERE run_id = %s "
                             "GROUP BY purpose", (run_id,)).fetchall())


def _spent(conn, run_id, purpose) -> float:
    return conn.execute("SELECT coalesce(sum(estimated_cost), 0) FROM api_cost_log "
                        "WHERE run_id = %s AND purpose = %s", (run_id, purpose)).fetchone()[0]


def test_a_used_up_label_budget_does_not_starve_the_anchors_or_the_retest(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path)
    free = judge_settings(settings, fake, **LLM, budget_usd=None,
                          anchors=AnchorSettings(True, 10, 0))
    first = judge_dataset(conn, free, name)  # pays the labels, freezes 10 anchors
    assert first.anchors_frozen == 10
    fake.reset()
    # nothing left for labels: judges.budget_usd 0; the lines have no limit of their own
    broke = judge_settings(settings, fake, **LLM, budget_usd=0.0,
                           anchors=AnchorSettings(True, 10, 0),
                           retest=RetestSettings(True, 2, 1, 0))
    run = judge_dataset(conn, broke, name)
    assert run.stopped is None and run.budget_lines == []
    retest_pairs = sum(r.pairs for r in run.retest)
    assert [a.pairs for a in run.anchors] == [10, 10]
    # the labels come from the cache; every anchor and retest request is sent and paid
    assert _purposes(conn, run.run_id) == {"anchor": 20, "retest": retest_pairs}
    assert fake.chat_requests == 20 + retest_pairs and run.cache_hits == 2 * run.pairs


def test_a_used_up_anchor_line_stops_re_judging_in_one_sentence_and_the_run_goes_on(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path)
    judge_dataset(conn, judge_settings(settings, fake, **LLM, budget_usd=None,
                                       anchors=AnchorSettings(True, 12, 0)), name,
                  limit=3)  # freezes the anchors from the first 3 queries' pairs
    fake.reset()
    unlimited = judge_settings(settings, fake, **LLM, budget_usd=None,
                               anchors=AnchorSettings(True, 12, 0))
    priced = estimate_judge_run(conn, unlimited, name)
    conn.rollback()
    (anchors,) = priced.budget_lines
    assert (anchors.key, anchors.requests, anchors.budget_usd) == (
        "judges.anchors.budget_usd", 24, None)
    line = round(anchors.max_cost_usd / 3, 4)  # room for about a third of the anchors
    config = judge_settings(settings, fake, **LLM, budget_usd=None,
                            anchors=AnchorSettings(True, 12, 0, budget_usd=line))
    run = judge_dataset(conn, config, name)
    paid = _purposes(conn, run.run_id)
    sent = sum(a.requests for a in run.anchors)
    assert 0 < paid["anchor"] == sent < 24  # stopped part way, at its own line
    assert _spent(conn, run.run_id, "anchor") <= line
    # the run went on: every label not cached from the first run was paid, none stopped
    assert run.stopped is None and paid["label"] == run.billed_calls - sent > 0
    assert run.failed == 0 and run.unscored == 0
    assert fake.chat_requests == paid["anchor"] + paid["label"]
    assert [s.split(":")[0] for s in run.budget_lines] == ["re-judging the anchors stopped"]
    sentence = run.budget_lines[0]
    assert f"judges.anchors.budget_usd of ${line:.4f} is used up" in sentence
    assert "the run went on" in sentence
    assert sentence in run.format()
    # the comparison counts only the anchors re-judged, and is marked cut short
    assert sum(a.pairs for a in run.anchors) == sent and run.anchors[-1].cut_short
    # so a rerun the same day with the line raised measures the judges cut short again
    fake.reset()
    rerun = judge_dataset(conn, unlimited, name)
    assert fake.chat_requests == 12 * sum(a.cut_short for a in run.anchors)
    assert [a.reused_from is None for a in rerun.anchors] == [a.cut_short for a in run.anchors]
    assert [a.pairs for a in rerun.anchors] == [12, 12]


def test_a_used_up_retest_line_stops_the_retest_and_keeps_the_labels(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path)
    config = judge_settings(settings, fake, **LLM, budget_usd=None,
                            retest=RetestSettings(True, 6, 3, 0, budget_usd=0.0))
    run = judge_dataset(conn, config, name)
    assert run.stopped is None and _purposes(conn, run.run_id) == {"label": 2 * run.pairs}
    assert fake.chat_requests == 2 * run.pairs  # not one retest request sent
    assert run.budget_lines == [run.budget_lines[0]] and run.budget_lines[0].startswith(
        "test-retest stopped: its budget line judges.retest.budget_usd of $0.0000 is used up")
    assert all(r.requests == 0 for r in run.retest)
