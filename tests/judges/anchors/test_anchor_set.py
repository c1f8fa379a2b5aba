"""The anchor set against the fake LLM server: frozen once, re-judged past the cache before a
run's labels, a drifting judge caught, a changed judge compared with the old one on the
anchors first, and nothing outside the anchors paid twice (provider requests counted)."""

from __future__ import annotations

import pytest

from eval_harness.judges.anchors.anchor_set import choose_anchors
from eval_harness.judges.anchors.drift import drift_reasons, stored_comparisons
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.settings.judges import AnchorSettings, DriftSettings
from fake_llm_judges import DriftingJudge, JudgeBehaviours
from fake_llm_server import judge_settings
from judge_runs import LLM, small_dataset


def _dataset(conn, tmp_path, *, queries: int) -> str:
    return small_dataset(conn, tmp_path, "anchors", queries=queries, n_docs=60)


def _config(settings, fake, *, pairs=100, **judges):
    judges = {**LLM, **judges}
    return judge_settings(settings, fake, budget_usd=None, **judges,
                          anchors=AnchorSettings(True, pairs, 0))


def _purposes(conn, run_id):
    return [row[0] for row in conn.execute(
        "SELECT purpose FROM api_cost_log WHERE run_id = %s ORDER BY id", (run_id,))]


@pytest.mark.slow
def test_a_drifting_judge_is_caught_on_100_anchors_and_only_the_anchors_are_paid(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path, queries=24)
    config = _config(settings, fake)
    first = judge_dataset(conn, config, name)
    assert first.anchors == [] and first.anchors_frozen == 100
    assert fake.chat_requests == 2 * first.pairs  # freezing costs nothing: the run's scores
    assert "anchor set frozen: 100 pairs" in first.format()

    # the provider changes judge 1 under the same name: 15% of labels flip, scores shift
    fake.reset()
    drifting = JudgeBehaviours({"gpt-4o": DriftingJudge(0, 0.15, score_shift=0.02)})
    fake.responder = drifting
    second = judge_dataset(conn, config, name)
    judge1, judge2 = second.anchors
    assert fake.chat_requests == judge1.requests + judge2.requests == 200
    assert _purposes(conn, second.run_id) == ["anchor"] * 200  # the labels came from the cache
    assert second.billed_calls == 200 and second.cache_hits == 2 * second.pairs
    assert not judge1.changed and judge1.pairs == 100
    assert judge1.flips == drifting.flips["gpt-4o"] > 5 and judge1.flip_low > 0.05
    assert judge1.shift_low <= judge1.score_shift <= judge1.shift_high < 0  # flips dominate
    assert judge2.flips == 0 and judge2.score_shift == 0.0
    drift = DriftSettings()
    assert drift_reasons(judge1, drift) and drift_reasons(judge2, drift) == []
    assert "judge 1 (openai:gpt-4o) on the anchors: flips" in second.format()
    assert stored_comparisons(conn, name) == [judge1, judge2]


def test_a_changed_judge_is_compared_on_the_anchors_before_its_labels(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path, queries=6)
    judge_dataset(conn, _config(settings, fake, pairs=20), name)
    fake.reset()
    fake.responder = JudgeBehaviours({"gpt-4o-mini": DriftingJudge(0, 0.3)})
    changed = _config(settings, fake, pairs=20, judge1="openai:gpt-4o-mini")
    run = judge_dataset(conn, changed, name)
    judge1, judge2 = run.anchors
    assert judge1.changed and not judge2.changed
    assert (judge1.frozen_spec, judge1.spec) == ("openai:gpt-4o", "openai:gpt-4o-mini")
    purposes = _purposes(conn, run.run_id)
    # every anchor request comes before the first label of the new judge
    assert purposes[:40] == ["anchor"] * 40 and set(purposes[40:]) == {"label"}
    # judge 2's labels are cached; the new judge 1 pays each pair once: its replies on the
    # 20 anchors were its first, so they are cached and its labels there cost nothing more
    assert len(purposes) == 40 + run.pairs - 20 == fake.chat_requests
    line = judge1.line()
    assert line.startswith("judge 1 changed openai:gpt-4o -> openai:gpt-4o-mini: flips ")
    assert "of the anchors' labels, scores " in line and line in run.format()


@pytest.mark.unit
def test_choose_anchors_is_seeded_and_order_free():
    pairs = [(f"q{i}", d) for i in range(20) for d in range(5)]
    chosen = choose_anchors(pairs, size=10, seed=3)
    reversed_pairs = pairs[::-1]
    assert sorted(reversed_pairs[i] for i in choose_anchors(reversed_pairs, size=10, seed=3)) \
        == sorted(pairs[i] for i in chosen)
    assert len(chosen) == 10 and choose_anchors(pairs, size=10, seed=4) != chosen
    assert choose_anchors(pairs[:4], size=10, seed=0) == [0, 1, 2, 3]
