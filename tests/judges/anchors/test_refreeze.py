"""`judge --refreeze-anchors` against the fake LLM server: it says what it drops, does not
re-judge the old set, replaces it with one frozen from the current judges and re-scored past
the cache (paid as anchors, so a provider's changed model is frozen as it answers today, not
as the cache remembers it), keeps the old set when the run stops first, and refuses with one
sentence when anchors are off."""

from __future__ import annotations

import json

from eval_harness.judges.anchors.refreeze import frozen_judges
from eval_harness.judges.anchors.sql import frozen_anchors
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.settings.judges import AnchorSettings
from eval_harness_pipelines import cli
from fake_llm_judges import DriftingJudge, JudgeBehaviours
from fake_llm_server import judge_settings
from judge_cli_env import judge_cli_environment
from judge_runs import LLM, small_dataset


def _dataset(conn, tmp_path, *, queries: int = 6) -> str:
    return small_dataset(conn, tmp_path, "refreeze", queries=queries)


def _config(settings, fake, **judges):
    return judge_settings(settings, fake, **{"budget_usd": None, **LLM, **judges},
                          anchors=AnchorSettings(True, 20, 0))


def _purposes(conn, run_id):
    return dict(conn.execute("SELECT purpose, count(*) FROM api_cost_log WHERE run_id = %s "
                             "GROUP BY purpose", (run_id,)).fetchall())


def test_refreezing_freezes_what_a_changed_provider_answers_today(settings, conn, tmp_path,
                                                                   fake):
    name = _dataset(conn, tmp_path)
    config = _config(settings, fake)
    judge_dataset(conn, config, name)
    old = frozen_judges(conn, name)
    labels_then = {(r[0], r[4], r[5]): r[9] for r in frozen_anchors(conn, name)}
    assert [(f.judge, f.spec, f.pairs) for f in old] == [(1, "openai:gpt-4o", 20),
                                                          (2, "anthropic:claude-haiku-4-5", 20)]

    # the provider changes judge 1 under the same name; people review it and keep it
    fake.reset()
    changed_model = JudgeBehaviours({"gpt-4o": DriftingJudge(0, 0.4)})
    fake.responder = changed_model
    run = judge_dataset(conn, config, name, refreeze_anchors=True)
    assert run.anchors is None  # the old set is not re-judged: it is about to go
    assert run.refrozen.dropped == old and run.refrozen.frozen == run.anchors_frozen == 20
    assert run.refrozen.requests == fake.chat_requests == 40  # 20 anchors x 2 LLM judges
    assert _purposes(conn, run.run_id) == {"anchor": 40}  # the labels came from the cache
    assert "anchor set re-frozen: dropped 20 pairs frozen " in run.format()
    labels_now = {(r[0], r[4], r[5]): r[9] for r in frozen_anchors(conn, name)}
    assert labels_now.keys() == labels_then.keys()  # the same seed draws the same pairs
    changed = {key[0] for key in labels_now if labels_now[key] != labels_then[key]}
    assert changed == {1}  # judge 1's labels as the changed model gives them, judge 2's kept

    # the next night compares with what the changed judge answered when re-frozen: no flip
    fake.reset()
    fake.responder = changed_model  # the provider's model as it now is
    night = judge_dataset(conn, config, name)
    assert [(a.judge, a.flips, a.pairs) for a in night.anchors] == [(1, 0, 20), (2, 0, 20)]


def test_a_run_stopped_before_freezing_keeps_the_old_set(settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path, queries=4)
    judge_dataset(conn, _config(settings, fake), name)
    before = frozen_anchors(conn, name)
    fake.reset()  # a new judge 1 is asked afresh; the budget ends the run before it freezes
    stopped = judge_dataset(conn, _config(settings, fake, judge1="openai:gpt-4o-mini",
                                          budget_usd=1e-5, concurrency=1), name,
                            refreeze_anchors=True)
    assert stopped.stopped == "budget" and stopped.refrozen is None
    assert frozen_anchors(conn, name) == before


def test_cli_says_what_it_drops_and_refuses_when_anchors_are_off(
        settings, conn, tmp_path, fake, store, monkeypatch, capsys):
    name = _dataset(conn, tmp_path, queries=3)
    conn.commit()
    config = tmp_path / "config.yaml"
    body = f"""
default_dataset: {name}
datasets:
  {name}:
    path: {tmp_path / name}
judges:
  budget_usd: 1.0
  judge1: openai:gpt-4o
  judge2: anthropic:claude-haiku-4-5
  rate_limits:
    openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
    anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
"""
    config.write_text(body)
    judge_cli_environment(monkeypatch, store, fake, tag="refreeze")
    assert cli.main(["--config", str(config), "judge", "--refreeze-anchors"]) == 2
    err = capsys.readouterr()[1]
    assert err.count("\n") == 1 and "--refreeze-anchors needs the anchor set switched on" in err
    assert fake.chat_requests == 0

    config.write_text(body + "  anchors: {pairs: 5, seed: 0}\n")
    assert cli.main(["--config", str(config), "judge"]) == 0
    capsys.readouterr()
    frozen = frozen_anchors(conn, name)
    assert cli.main(["--config", str(config), "judge", "--refreeze-anchors", "--dry-run"]) == 0
    assert "this run would drop the anchor set" in capsys.readouterr()[1]
    assert frozen_anchors(conn, name) == frozen  # a dry run drops nothing
    fake.reset()
    assert cli.main(["--config", str(config), "judge", "--refreeze-anchors", "--json"]) == 0
    out, err = capsys.readouterr()
    assert (f"this run drops the anchor set of '{name}' (5 pairs frozen " in err
            and "with judge 1 openai:gpt-4o" in err and "freezes 5 pairs anew" in err)
    refrozen = json.loads(out)["refrozen"]
    assert refrozen["frozen"] == 5 and refrozen["requests"] == 10 == fake.chat_requests
    assert [d["spec"] for d in refrozen["dropped"]] == ["openai:gpt-4o",
                                                        "anthropic:claude-haiku-4-5"]
