"""Fallback notices belong to a run, not to the process: two sessions in one
process (tests, Dagster's in-process executor) each say theirs, once per run; sessions of one
run share a FallbackNotices and say it once between them."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from eval_harness.judges.client import session as session_module
from eval_harness.judges.client.session import FallbackNotices, JudgeSession, resolve_judge_specs
from paths import REPO

NOTICE = "OPENAI_API_KEY is not set"


@pytest.fixture
def keyless(settings):
    """Paid judges configured, no keys: both fall back to local judges."""
    return replace(settings, openai_api_key=None, anthropic_api_key=None,
                   judges=replace(settings.judges, judge1="openai:gpt-4o",
                                  judge2="anthropic:claude-haiku-4-5"))


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "eval_harness.judges" and r.levelno == logging.WARNING]


def test_two_sessions_in_one_process_each_say_their_notices_once(keyless, conn, caplog):
    before = set(session_module._announced)
    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        first = JudgeSession(keyless, conn)
        first_said = _warnings(caplog)
        second = JudgeSession(keyless, conn)
    assert (first.judge1.spec, first.judge2.spec) == ("local:lexical", "local:embedding")
    assert len(first.notices) == 2 and second.notices == first.notices
    assert sorted(first_said) == sorted(first.notices)  # each notice once in the first run
    assert sorted(_warnings(caplog)) == sorted(first.notices * 2)  # and once in the second
    assert first.fallback_notices.said == second.fallback_notices.said == set(first.notices)
    assert session_module._announced == before  # sessions keep no process-wide record


def test_sessions_of_one_run_share_their_notices(keyless, conn, caplog):
    run_notices = FallbackNotices()
    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        for _ in range(3):  # e.g. one session per gate and batch of a gate run
            JudgeSession(keyless, conn, run_id="one-run", notices=run_notices)
    assert sum(NOTICE in m for m in _warnings(caplog)) == 1
    assert len(_warnings(caplog)) == 2


def test_a_session_does_not_silence_the_next_run_after_a_quiet_resolve(keyless, conn, caplog,
                                                                       monkeypatch):
    # The doctor resolves the judges with the logger disabled; before, that used up the
    # process-wide "said" record and the next run in the process said nothing.
    monkeypatch.setattr(session_module, "_announced", set())
    logger = logging.getLogger("eval_harness.judges")
    monkeypatch.setattr(logger, "disabled", True)
    resolve_judge_specs(keyless)
    monkeypatch.setattr(logger, "disabled", False)
    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        JudgeSession(keyless, conn)
    assert sum(NOTICE in m for m in _warnings(caplog)) == 1


def test_a_given_notifier_decides_where_notices_go(keyless, caplog):
    quiet = logging.getLogger("test.quiet")
    quiet.propagate = False
    notices = FallbackNotices(quiet)
    with caplog.at_level(logging.WARNING):
        _, _, said = resolve_judge_specs(keyless, notices=notices)
    assert notices.said == set(said) and len(said) == 2
    assert not any(NOTICE in r.getMessage() for r in caplog.records)


def test_a_keyless_gate_run_says_each_notice_once(keyless, fresh, caplog, monkeypatch):
    """The judged gates of one build share one record: grounding and answer_reward, their
    version strings and every session they open say each fallback notice once."""
    from eval_harness.gates.answers import import_answers
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.gates.window import TimeWindow

    sample = REPO / "datasets/answers/sample_answers.jsonl"
    relation = keyless.quality_gates.answers_relation
    with fresh.connection() as conn:
        import_answers(conn, sample, relation=relation)
    keyless = replace(keyless, database_url=fresh.url)
    monkeypatch.setattr(session_module, "_announced", set())
    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        gates = configured_gates(keyless)
        assert {"grounding", "answer_reward"} <= {gate.name for gate in gates}
        run = run_quality_gates(fresh, TimeWindow.day("2025-03-05"), gates, relation=relation)
    assert run.summaries[0].answers == 10  # the judged gates really ran, in sessions
    said = [m for m in _warnings(caplog) if NOTICE in m]
    assert len(said) == 1, said


def test_one_command_says_each_notice_once_across_its_runs(keyless, conn, caplog):
    """A command is many runs (`run.sh` is 17 of them): inside the command
    scope the second run's sessions stay quiet; outside it each run says its own."""
    from eval_harness.judges.client.notice_scope import said_once_per_command

    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        with said_once_per_command():
            for _ in range(3):  # three runs, each with its own FallbackNotices
                JudgeSession(keyless, conn)
        inside = len(_warnings(caplog))
        JudgeSession(keyless, conn)  # a later run outside any command says its own again
    assert inside == 2  # judge1's and judge2's notice, once each
    assert len(_warnings(caplog)) == 4


@pytest.mark.slow
def test_the_gate_command_prints_each_notice_once(fresh, tmp_path):
    """Counted in the real command's output (a process of its own, as a person runs it):
    `eval-harness gate --partition` with the judged gates on and no API keys printed each
    notice 6 times."""
    import os
    import subprocess
    import sys

    sample = REPO / "datasets/answers/sample_answers.jsonl"
    config = tmp_path / "config.yaml"
    config.write_text(f"""
quality_gates:
  partition_start: 2025-01-01
  gates:
    grounding: {{enabled: true}}
    answer_reward: {{enabled: true}}
judges: {{judge1: openai:gpt-4o, judge2: anthropic:claude-haiku-4-5}}
dagster: {{home: {tmp_path / 'dagster'}}}
""", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DAGSTER_HOME", "EVAL_HARNESS_CONFIG", "OPENAI_API_KEY",
                        "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2")}
    env["DATABASE_URL"] = fresh.url
    from eval_harness.gates.answers import import_answers

    with fresh.connection() as conn:
        import_answers(conn, sample, relation="answers")
    command = [str(Path(sys.executable).with_name("eval-harness")), "--config", str(config)]
    done = subprocess.run([*command, "gate", "--partition", "2025-03-05"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    assert "grounding" in done.stdout and "answer_reward" in done.stdout  # the judged gates ran
    assert done.stderr.count("OPENAI_API_KEY is not set, so local:lexical judges") == 1, \
        done.stderr
