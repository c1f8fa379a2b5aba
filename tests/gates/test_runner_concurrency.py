"""Concurrent and killed quality-gate runs and answer imports.

Gate runs write gate_results, evaluation_log, episode_memory and regeneration_queue; answer
imports merge by id. Real OS processes against the real store and the fake LLM provider;
tests/support/colliding_processes.py says how two of them are made to collide and why each
test has a database of its own.
"""

from __future__ import annotations

import json
import signal
import textwrap
from datetime import UTC
from pathlib import Path

import pytest

from colliding_processes import (
    child_env,
    cli,
    fake_keys,
    finish,
    held,
    ledger_counts,
    lock_step,
    lock_waiters,
    python,
    scalar,
    wait_until,
)
from eval_harness.store import migrate
from scratch_databases import scratch_database

# ---------------------------------------------------------------------------------------
# Quality gates: gate_results, evaluation_log, episode_memory, regeneration_queue

GATE_DAY = "2025-01-15"
POOR = "POOR-ANSWER"
GATES = ("format_compliance", "citation_coverage", "grounding", "answer_reward")


@pytest.fixture
def gate_fake(fake):
    """The fake provider, judging answers marked POOR poorly (a reflexion and a queue entry)."""
    from fake_llm_server import poor_verdicts_for

    fake.responder = poor_verdicts_for(POOR)
    return fake


def gate_project(location, tmp_path: Path, n_answers: int, n_poor: int) -> dict:
    """``n_answers`` answers on GATE_DAY (the first ``n_poor`` poor ones) and a config with the
    two rule gates and the two LLM gates, judge 1 on the fake provider."""
    from psycopg.types.json import Jsonb

    tag = tmp_path.name[-12:]
    with location.connection() as conn:
        for i in range(n_answers):
            text = f"{POOR} Bananas are yellow" if i < n_poor else "Aspirin lowers heart risk"
            conn.execute("INSERT INTO answers (id, query, answer, sources, created_at) "
                         "VALUES (%s, %s, %s, %s, %s)",
                         (f"a{i:02d}", f"Does aspirin help, case {i}? {tag}",
                          f"{text} in case {i} {tag} [1].",
                          Jsonb([{"id": "d1", "text": f"Aspirin reduces heart risk. {tag}"}]),
                          f"{GATE_DAY}T{8 + i % 10:02d}:00:00Z"))
        conn.commit()
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent("""
        judges:
          judge1: openai:gpt-4o
          judge2: local:lexical
          budget_usd: 5.0
          rate_limits:
            openai: {requests_per_minute: 100000, tokens_per_minute: null}
            anthropic: {requests_per_minute: 100000, tokens_per_minute: null}
        quality_gates:
          partition_start: 2024-01-01
          gates:
            format_compliance: {enabled: true}
            citation_coverage: {enabled: true}
            grounding: {enabled: true, threshold: 0.8, min_pass_rate: 0.5}
            answer_reward: {enabled: true, threshold: 0.3, blocking: false}
    """))
    return {"config": config, "answers": n_answers, "poor": n_poor,
            "requests": 2 * n_answers + n_poor}  # grounding + evaluation each, reflexion if poor


def gate_rows(location) -> dict[str, list]:
    with location.connection() as conn:
        return {
            "results": conn.execute("SELECT answer_id, gate, score, passed, gate_version "
                                    "FROM gate_results ORDER BY 1, 2").fetchall(),
            "evaluation_log": conn.execute("SELECT answer_id, reward FROM evaluation_log "
                                           "ORDER BY 1").fetchall(),
            "episode_memory": conn.execute("SELECT answer_id, problem, lesson FROM "
                                           "episode_memory ORDER BY 1").fetchall(),
            "regeneration_queue": conn.execute("SELECT answer_id, reward, improvement_hint "
                                               "FROM regeneration_queue ORDER BY 1").fetchall()}


def clean_gate_run(server_url, source, project, fake) -> dict[str, list]:
    """The gate tables after one undisturbed run (in this process) over the answers of
    ``source``, in a database of its own."""
    from datetime import datetime

    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.gates.window import TimeWindow
    from eval_harness.settings import load_settings

    with source.connection() as conn:
        answers = conn.execute("SELECT id, query, answer, sources, created_at FROM answers"
                               ).fetchall()
    with scratch_database(server_url, "eh_clean") as clean:
        with clean.connection() as conn:
            migrate(conn)
            with conn.cursor() as cursor:
                cursor.executemany("INSERT INTO answers VALUES (%s, %s, %s, %s, %s)",
                                   [(*row[:3], json.dumps(row[3]), row[4]) for row in answers])
            conn.commit()
        settings = load_settings(project["config"],
                                 environ={"DATABASE_URL": clean.url, **fake_keys(fake)})
        since = datetime.fromisoformat(GATE_DAY).replace(tzinfo=UTC)
        run_quality_gates(clean, TimeWindow.since(since), configured_gates(settings))
        return gate_rows(clean)


GATE_RUN = """
    import os, sys
    from datetime import datetime, timezone
    from eval_harness.gates.window import TimeWindow
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.settings import load_settings
    from eval_harness.store import StoreLocation

    settings = load_settings(sys.argv[1])
    since = datetime.fromisoformat(sys.argv[2]).replace(tzinfo=timezone.utc)
    run_quality_gates(StoreLocation(os.environ["DATABASE_URL"]), TimeWindow.since(since),
                      configured_gates(settings), batch_size=int(sys.argv[3]))
"""


@pytest.mark.slow
def test_a_killed_gate_run_finished_by_two_reruns_at_once_evaluates_each_answer_once(
        fresh, tmp_path, gate_fake, server_url):
    """(a) The run (batches of 2 answers) is killed after its first batches; (b) then two gate
    commands for the same day start together. Finished batches are kept whole; one rerun
    evaluates the rest, asking only for judgements without a stored reply; the other waits and
    evaluates nothing. One result, one log row, one reflexion and one queue entry per answer."""
    project = gate_project(fresh, tmp_path, n_answers=8, n_poor=3)
    gate_fake.latency = 0.1
    env = child_env(fresh, **fake_keys(gate_fake))
    victim = python(GATE_RUN, project["config"], GATE_DAY, "2", env=env, cwd=tmp_path)
    stored = "SELECT count(DISTINCT answer_id) FROM gate_results"
    wait_until(lambda: scalar(fresh, stored) >= 2, what="a first batch of results",
               processes=[victim], timeout=60)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    kept = scalar(fresh, stored)
    cached = ledger_counts(fresh)[0]
    sent_before = gate_fake.chat_requests
    assert 2 <= kept < 8, "the run should have been killed half-way"
    # a batch is stored with its log rows in one transaction: nothing half-written
    assert scalar(fresh, "SELECT count(*) FROM gate_results") == kept * len(GATES)
    assert scalar(fresh, "SELECT count(*) FROM evaluation_log") == kept

    gate_fake.latency = 0.0
    reruns = [cli("--config", project["config"], "gate", "--since", GATE_DAY, "--json",
                  env=env, cwd=tmp_path) for _ in range(2)]
    with lock_step(fresh, "answers", reruns):
        pass
    outcomes = [finish(run) for run in reruns]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    reports = [json.loads(out) for _, out, _ in outcomes]
    evaluated = sorted(tuple(c["evaluated_now"] for c in r["checks"]) for r in reports)
    assert evaluated == [(0,) * len(GATES), (8 - kept,) * len(GATES)]
    assert [("quality-gate run of answers since" in err and "waiting" in err)
            for _, _, err in outcomes].count(True) == 1
    # what this run evaluated, and the time it spent on it, differ; every other figure agrees
    same = [[{**c, "evaluated_now": 0, "seconds": 0.0} for c in r["checks"]] for r in reports]
    assert same[0] == same[1]
    assert gate_fake.chat_requests - sent_before == project["requests"] - cached
    rows = gate_rows(fresh)
    assert len(rows["results"]) == 8 * len(GATES)
    assert len(rows["evaluation_log"]) == 8
    assert [r[0] for r in rows["episode_memory"]] == ["a00", "a01", "a02"]
    assert [r[0] for r in rows["regeneration_queue"]] == ["a00", "a01", "a02"]
    assert rows == clean_gate_run(server_url, fresh, project, gate_fake)


def test_overlapping_gate_windows_at_once_keep_one_result_and_one_log_row_per_answer(
        fresh, tmp_path, gate_fake):
    """``--since`` the day before and ``--since`` the day cover the same answers but are other
    windows, so they do not wait for each other: both judge the answers, and the first result
    stored for an answer is the one kept, with its log, reflexion and queue rows only."""
    project = gate_project(fresh, tmp_path, n_answers=6, n_poor=2)
    env = child_env(fresh, **fake_keys(gate_fake))
    runs = [python(GATE_RUN, project["config"], since, "1000", env=env, cwd=tmp_path)
            for since in ("2025-01-14", GATE_DAY)]
    with lock_step(fresh, "answers", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    rows = gate_rows(fresh)
    assert len(rows["results"]) == 6 * len(GATES)
    assert len(rows["evaluation_log"]) == 6
    assert [r[0] for r in rows["episode_memory"]] == ["a00", "a01"]
    assert [r[0] for r in rows["regeneration_queue"]] == ["a00", "a01"]
    with fresh.connection() as conn:  # each answer's log row comes from the run kept for it
        assert conn.execute("""
            SELECT count(*) FROM gate_results r JOIN evaluation_log e
              ON e.answer_id = r.answer_id AND e.run_id = r.run_id
            WHERE r.gate = 'answer_reward'""").fetchone()[0] == 6


# ---------------------------------------------------------------------------------------
# Answers import: one transaction, merged by id under an advisory lock on the relation

IMPORT_ANSWERS = """
    import os, sys
    from eval_harness.gates.answers import import_answers
    from eval_harness.store import StoreLocation
    with StoreLocation(os.environ["DATABASE_URL"]).connection() as conn:
        print(import_answers(conn, sys.argv[1]))
"""


def answers_file(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"imp-{i}", "query": f"question {i}", "answer": f"Answer {i} [1].",
        "sources": [{"id": "s1", "text": "a source"}],
        "created_at": "2025-02-01T10:00:00Z"}) + "\n" for i in range(n)))
    return path


def test_two_imports_of_the_same_answers_at_once_store_each_answer_once(fresh, tmp_path):
    path = answers_file(tmp_path / "answers.jsonl", 50)
    env = child_env(fresh)
    runs = [python(IMPORT_ANSWERS, path, env=env, cwd=tmp_path) for _ in range(2)]
    with lock_step(fresh, "answers", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert sorted(out.strip() for _, out, _ in outcomes) == [
        "0 new, 0 updated, 50 unchanged", "50 new, 0 updated, 0 unchanged"]
    assert scalar(fresh, "SELECT count(*) FROM answers") == 50


def test_an_import_killed_mid_transaction_leaves_nothing_and_the_rerun_imports_once(
        fresh, tmp_path):
    path = answers_file(tmp_path / "answers.jsonl", 50)
    env = child_env(fresh)
    with held(fresh, "answers"):  # the answers are staged; the merge waits: it dies there
        victim = python(IMPORT_ANSWERS, path, env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the import to reach the answers",
                   processes=[victim])
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
    rerun = finish(python(IMPORT_ANSWERS, path, env=env, cwd=tmp_path))
    assert rerun[0] == 0 and rerun[1].strip() == "50 new, 0 updated, 0 unchanged", rerun
    assert scalar(fresh, "SELECT count(*) FROM answers") == 50
