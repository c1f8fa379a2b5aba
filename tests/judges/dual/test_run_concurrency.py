"""Concurrent and killed judge runs: reply cache, cost log, ground_truth judge columns.

Real OS processes against the real store and the fake LLM provider;
tests/support/colliding_processes.py says how two of them are made to collide and why each test
has a database of its own.
"""

from __future__ import annotations

import json
import signal

import pytest

from colliding_processes import (
    child_env,
    cli,
    fake_keys,
    finish,
    held,
    ingest,
    ledger_counts,
    lock_step,
    lock_waiters,
    scalar,
    wait_until,
)
from judge_projects import clean_judge_run, judge_project, judged_rows


@pytest.mark.slow
def test_a_killed_judge_run_finished_by_two_reruns_at_once_pays_for_each_pair_once(
        fresh, tmp_path, fake, server_url):
    """(a) The run is killed after it wrote some queries; (b) then two reruns start together.
    One rerun asks the provider exactly for the judgements without a stored reply, none of
    them for a query already written; the other waits for it and pays for nothing."""
    project = judge_project(fresh, tmp_path, n_queries=10)
    slow = tmp_path / "one-at-a-time.yaml"  # 4 queries in flight: they are written in waves
    slow.write_text(project["config"].read_text().replace("concurrency: 8", "concurrency: 1"))
    fake.latency = 0.02
    env = child_env(fresh, **fake_keys(fake))
    victim = cli("--config", slow, "judge", "--json", env=env, cwd=tmp_path)
    written = "SELECT count(*) FROM ground_truth WHERE judged_docs IS NOT NULL"
    wait_until(lambda: scalar(fresh, written) >= 1, what="a first query to be written",
               processes=[victim], timeout=60)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    with fresh.connection() as conn:
        done = [r[0] for r in conn.execute(
            "SELECT query FROM ground_truth WHERE judged_docs IS NOT NULL")]
    cached, _ = ledger_counts(fresh)
    sent_before = fake.chat_requests
    assert 1 <= len(done) < 10, "the run should have been killed half-way"

    fake.latency = 0.0
    reruns = [cli("--config", project["config"], "judge", "--json", env=env, cwd=tmp_path)
              for _ in range(2)]
    with lock_step(fresh, "ground_truth", reruns):
        pass
    outcomes = [finish(run) for run in reruns]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    summaries = [json.loads(out) for _, out, _ in outcomes]
    pairs = summaries[0]["pairs"]
    assert summaries[1]["pairs"] == pairs >= 2 * 10
    missing = 2 * pairs - cached  # judgements (pair x judge) without a stored reply
    asked = [json.dumps(r.body) for r in fake.chat_records()[sent_before:]]
    assert len(asked) == missing
    assert sorted(s["provider_calls"] for s in summaries) == [0, missing]
    assert [("judge run of dataset 'jd' is in progress; waiting" in err)
            for _, _, err in outcomes].count(True) == 1  # the second one said why it waited
    assert not [q for q in done if any(json.dumps(q)[1:-1] in body for body in asked)]
    # one cache row and one cost row per judgement; the same labels as an undisturbed run
    assert ledger_counts(fresh) == (2 * pairs, 2 * pairs)
    assert judged_rows(fresh) == clean_judge_run(server_url, project, fake)


@pytest.mark.slow
def test_a_query_reingested_while_it_is_judged_does_not_get_scores_for_its_old_text(
        fresh, tmp_path, fake):
    """The judge run plans and judges q0; before it writes, an ingest changes q0's text (and
    clears its scores). The run must not then store the old text's scores on the new query."""
    project = judge_project(fresh, tmp_path, n_queries=3)
    env = child_env(fresh, **fake_keys(fake))
    # Inserting into judge_cache is the run's first write (its replies go before its scores),
    # so holding that table parks the run after judging and before writing anything.
    with held(fresh, "judge_cache", "EXCLUSIVE"):  # reads still pass
        run = cli("--config", project["config"], "judge", "--json", env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the judge run to want to write",
                   processes=[run], timeout=60)
        queries = project["folder"] / "queries.jsonl"
        queries.write_text(queries.read_text().replace("question 0 on", "question 0, reworded, on"))
        changed = finish(ingest(project["folder"], "jd", env=child_env(fresh), cwd=tmp_path))
        assert changed[0] == 0 and "queries 0 new, 1 updated" in changed[1], changed
    code, out, err = finish(run)
    summary = json.loads(out)
    assert code == 1 and summary["changed_meanwhile"] == 1, err  # incomplete: run again
    assert summary["queries_written"] == 2
    with fresh.connection() as conn:
        rows = dict(conn.execute("SELECT external_id, judged_docs IS NOT NULL FROM ground_truth"
                                 ).fetchall())
    assert rows == {"q0": False, "q1": True, "q2": True}
