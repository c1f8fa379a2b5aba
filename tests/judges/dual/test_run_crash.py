"""A judge run that dies or stops waiting loses nothing it paid for, and its rerun pays for
nothing twice: paid replies are written through, submitted batches are registered and resumed.

Real store, real SDKs against the fake server (tests/support/fake_llm_server.py); the killed
runs are separate OS processes ended with SIGKILL at a known point. Everything is counted at the
fake server (chat requests, batch creations, polls) and in the store (cost and cache rows).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.client.ledger import BatchedRequest, BatchReply, JudgeLedger
from eval_harness.judges.dual.run import judge_dataset, judge_dataset_async
from eval_harness.judges.protocol import Completion, Usage
from eval_harness.settings.judges import BatchSettings
from fake_llm_server import FakeTime, judge_settings
from judge_corpus import DOCS, LLM, QRELS, QUERIES  # the corpus of dual/test_run.py
from paths import REPO

# A judge run in its own process (the one that gets killed); arguments as one JSON object.
CHILD = """
    import json, sys
    from types import SimpleNamespace
    from eval_harness.settings.judges import BatchSettings
    from eval_harness.judges.dual.run import judge_dataset
    from eval_harness.settings import load_settings
    from eval_harness.store import StoreLocation
    from fake_llm_server import judge_settings

    a = json.loads(sys.argv[1])
    base = load_settings(a["config"], environ={"DATABASE_URL": a["url"],
                                               "DAGSTER_HOME": a["dagster_home"]})
    server = SimpleNamespace(openai_base_url=a["openai"], anthropic_base_url=a["anthropic"])
    settings = judge_settings(base, server, judge1=a["judge1"], judge2=a["judge2"],
                              concurrency=4, batch=BatchSettings(a["poll"], a["max_wait"]))
    with StoreLocation(a["url"]).connection() as conn:
        summary = judge_dataset(conn, settings, a["dataset"], batch=a["batch"],
                                run_id=a["run_id"])
    print(json.dumps(summary.to_dict()))
"""


@pytest.fixture
def dataset(tmp_path, conn):
    """A fresh dataset whose texts no other test used (so the reply cache starts empty)."""
    tag = uuid.uuid4().hex[:8]
    docs = {k: f"{v} {tag}" for k, v in DOCS.items()}
    vectors = np.eye(len(docs), 8, dtype=np.float32) + 0.05
    write_beir(tmp_path / "data", docs, {k: f"{v} {tag}" for k, v in QUERIES.items()}, QRELS,
               doc_vectors=vectors, query_vectors=vectors[[0, 1, 4]])
    name = f"crash_{tag}"
    ingest_beir(conn, tmp_path / "data", name=name)
    return name


@pytest.fixture
def watch(store):
    """An autocommit connection for looking at the store while another process writes."""
    with store.connection(autocommit=True) as connection:
        yield connection


def _run_id() -> str:
    return uuid.uuid4().hex[:12]


def _spawn(store, fake, tmp_path, dataset: str, run_id: str, *, batch: bool = False,
           poll: float = 0.05, max_wait: float = 120.0) -> subprocess.Popen:
    args = {"config": str(REPO / "config.yaml"), "url": store.url,
            "dagster_home": str(tmp_path / "dagster"), "openai": fake.openai_base_url,
            "anthropic": fake.anthropic_base_url, "dataset": dataset, "run_id": run_id,
            "batch": batch, "poll": poll, "max_wait": max_wait, **LLM}
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")
           and k not in ("DATABASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests' / 'support'}", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD), json.dumps(args)],
                            env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _wait_until(condition, what: str, process: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the run ended (exit {process.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    process.communicate()


def _scalar(conn, query: str, params=()):
    return conn.execute(query, params).fetchone()[0]


def _costs(conn, dataset: str) -> tuple[int, int]:
    """(cost rows, batch cost rows) of the dataset's queries."""
    return conn.execute("SELECT count(*), count(*) FILTER (WHERE c.batch) FROM api_cost_log c "
                        "JOIN ground_truth g ON g.id = c.query_id WHERE g.dataset = %s",
                        (dataset,)).fetchone()


def _cache_rows(conn, run_ids) -> int:
    return _scalar(conn, "SELECT count(*) FROM judge_cache WHERE run_id = ANY(%s)",
                   (list(run_ids),))


def _batches(conn, run_id: str) -> list[tuple[str, str, str, list[str]]]:
    """(provider, batch id, status, keys) of the batches a run submitted."""
    return conn.execute("SELECT provider, batch_id, status, keys FROM judge_batches "
                        "WHERE run_id = %s ORDER BY provider", (run_id,)).fetchall()


def _batch_run(conn, config, dataset: str, time_: FakeTime, run_id: str | None = None):
    return asyncio.run(judge_dataset_async(conn, config, dataset, batch=True, run_id=run_id,
                                           session_options=time_.options()))


# ---------------------------------------------------------------------------------------
# Live runs: every paid reply is durable before the next one


@pytest.mark.slow
def test_a_killed_live_run_keeps_every_reply_it_received_and_the_rerun_asks_only_the_rest(
        settings, conn, watch, store, fake, dataset, tmp_path):
    received = 5  # fewer than any query's judgements: no query is written before the kill
    fake.hold_replies_after(received)
    victim_id = _run_id()
    victim = _spawn(store, fake, tmp_path, dataset, victim_id)
    cost_rows = "SELECT count(*) FROM api_cost_log WHERE run_id = %s"
    _wait_until(lambda: _scalar(watch, cost_rows, (victim_id,)) >= received
                and any(r.held for r in fake.chat_records()),
                f"{received} replies to be stored while more requests wait", victim)
    _kill(victim)
    answered = {json.dumps(r.body, sort_keys=True) for r in fake.chat_records() if not r.held}
    assert len(answered) == received
    # written through: every delivered reply has its cost row and cache row, nothing more
    assert _scalar(watch, cost_rows, (victim_id,)) == received
    assert _cache_rows(watch, [victim_id]) == received
    assert _scalar(watch, "SELECT count(*) FROM ground_truth WHERE dataset = %s AND "
                   "judged_docs IS NOT NULL", (dataset,)) == 0
    fake.release_replies()
    sent_before = fake.chat_requests

    config = judge_settings(settings, fake, **LLM)
    rerun = judge_dataset(conn, config, dataset, run_id=_run_id())
    total = 2 * rerun.pairs
    asked = [json.dumps(r.body, sort_keys=True) for r in fake.chat_records()[sent_before:]]
    assert rerun.complete and total >= 2 * 3 * 5
    assert len(asked) == rerun.provider_calls == total - received
    assert not answered & set(asked)  # no reply the killed run received was bought again
    assert rerun.cache_hits == received
    # one cost row and one cache row per distinct paid request
    assert _costs(conn, dataset) == (total, 0)
    assert _cache_rows(conn, [victim_id, rerun.run_id]) == total


def test_a_paid_reply_is_visible_to_other_connections_before_record_call_returns(conn, watch):
    from eval_harness.judges.protocol import ChatRequest, Message

    run_id = _run_id()
    ledger = JudgeLedger(conn, run_id=run_id)
    request = ChatRequest("openai", "gpt-4o", "relevance", "v", "system",
                          (Message("user", f"q {run_id}"),), 0.0, 100)
    ledger.record_call(request, Completion("0.5", Usage(10, 2)), cost=0.0001)
    assert _scalar(watch, "SELECT count(*) FROM api_cost_log WHERE run_id = %s", (run_id,)) == 1
    assert _cache_rows(watch, [run_id]) == 1
    ledger.flush()  # nothing was left buffered: no second row
    assert _scalar(watch, "SELECT count(*) FROM api_cost_log WHERE run_id = %s", (run_id,)) == 1


# ---------------------------------------------------------------------------------------
# Batch runs: a submitted batch is registered, resumed, and stored once


def test_a_batch_that_outlives_max_wait_is_resumed_not_resubmitted(settings, conn, fake,
                                                                   dataset):
    fake.batch_polls = 10 ** 6  # the batches stay in progress until end_batches()
    config = judge_settings(settings, fake, **LLM,
                            batch=BatchSettings(poll_interval_seconds=30, max_wait_seconds=60))
    time_ = FakeTime()
    first = _batch_run(conn, config, dataset, time_)
    total = 2 * first.pairs
    report = first.batch
    assert (report.batches, report.submitted, report.unfinished) == (2, total, total)
    assert time_.waits == [30, 30]  # polled at 0, 30 and 60 s, then stopped waiting
    # nothing was made live: the provider bills the running batches anyway
    assert fake.chat_requests == 0 and first.failed == total and not first.complete
    assert _costs(conn, dataset) == (0, 0)
    registered = _batches(conn, first.run_id)
    assert [r[2] for r in registered] == ["submitted", "submitted"]
    assert sorted(r[1] for r in registered) == sorted(report.pending_batch_ids)
    for _, batch_id, _, keys in registered:  # the register holds exactly what was submitted
        assert sorted(keys) == sorted(fake.batch_custom_ids(batch_id))
    assert "wait in provider batches still running" in first.format()

    second = _batch_run(conn, config, dataset, FakeTime())  # still running: resumed again
    assert (second.batch.batches, second.batch.resumed_batches) == (0, 2)
    assert second.batch.unfinished == total and len(fake.batch_submissions()) == 2

    fake.end_batches()
    polls_before = {r[1]: len(fake.batch_polls_of(r[1])) for r in registered}
    third = _batch_run(conn, config, dataset, FakeTime())
    report = third.batch
    assert third.complete and fake.chat_requests == 0
    assert len(fake.batch_submissions()) == 2  # no batch was submitted again
    assert (report.batches, report.resumed_batches, report.resumed) == (0, 2, total)
    assert report.succeeded == total and third.cache_hits == total
    for batch_id, before in polls_before.items():  # the same batch ids were polled
        assert len(fake.batch_polls_of(batch_id)) > before
    # stored once: one batch cost row and one cache row per request
    assert _costs(conn, dataset) == (total, total)
    assert _cache_rows(conn, [third.run_id]) == total
    assert [r[2] for r in _batches(conn, first.run_id)] == ["ended", "ended"]
    assert third.cost_usd == pytest.approx(report.cost_usd) and third.cost_usd > 0

    again = _batch_run(conn, config, dataset, FakeTime())
    assert again.complete and again.batch.batches == again.batch.resumed_batches == 0
    assert _costs(conn, dataset) == (total, total)


def test_a_killed_batch_run_is_resumed_by_the_next_one(settings, conn, watch, store, fake,
                                                       dataset, tmp_path):
    fake.batch_polls = 10 ** 6
    victim_id = _run_id()
    victim = _spawn(store, fake, tmp_path, dataset, victim_id, batch=True)
    registered = "SELECT count(*) FROM judge_batches WHERE run_id = %s"
    _wait_until(lambda: _scalar(watch, registered, (victim_id,)) == 2,
                "both batches to be registered", victim)
    _kill(victim)
    ids = sorted(r[1] for r in _batches(watch, victim_id))
    assert len(fake.batch_submissions()) == 2

    fake.end_batches()
    config = judge_settings(settings, fake, **LLM)
    rerun = _batch_run(conn, config, dataset, FakeTime())
    total = 2 * rerun.pairs
    assert rerun.complete and fake.chat_requests == 0
    assert len(fake.batch_submissions()) == 2  # the victim's two, nothing new
    assert (rerun.batch.batches, rerun.batch.resumed_batches) == (0, 2)
    assert all(len(fake.batch_polls_of(batch_id)) >= 2 for batch_id in ids)
    assert _costs(conn, dataset) == (total, total)
    assert _cache_rows(conn, [victim_id, rerun.run_id]) == total
    assert [r[2] for r in _batches(conn, victim_id)] == ["ended", "ended"]


def test_a_batch_the_provider_no_longer_knows_is_abandoned_and_resubmitted_once(
        settings, conn, fake, dataset):
    fake.batch_polls = 10 ** 6
    config = judge_settings(settings, fake, **LLM,
                            batch=BatchSettings(poll_interval_seconds=30, max_wait_seconds=30))
    first = _batch_run(conn, config, dataset, FakeTime())
    lost = {batch_id: sorted(fake.batch_custom_ids(batch_id))
            for batch_id in first.batch.pending_batch_ids}
    assert len(lost) == 2
    fake.forget_batches()  # their ids now get a 404
    fake.batch_polls = 1

    second = _batch_run(conn, config, dataset, FakeTime())
    total = 2 * second.pairs
    report = second.batch
    assert second.complete and fake.chat_requests == 0
    assert (report.abandoned_batches, report.batches, report.submitted) == (2, 2, total)
    submissions = fake.batch_submissions()
    assert len(submissions) == 4  # the lost two and one new batch per provider
    new_ids = [r[1] for r in _batches(conn, second.run_id)]
    assert sorted(k for ids in lost.values() for k in ids) == sorted(
        k for batch_id in new_ids for k in fake.batch_custom_ids(batch_id))
    assert [r[2] for r in _batches(conn, first.run_id)] == ["abandoned", "abandoned"]
    assert [r[2] for r in _batches(conn, second.run_id)] == ["ended", "ended"]
    assert _costs(conn, dataset) == (total, total)
    assert _cache_rows(conn, [second.run_id]) == total

    third = _batch_run(conn, config, dataset, FakeTime())
    assert third.complete and len(fake.batch_submissions()) == 4
    assert third.batch.abandoned_batches == 0 and _costs(conn, dataset) == (total, total)


def test_a_batch_collected_by_two_runs_is_stored_once(store, conn, watch):
    """Two runs that both poll the same batch to its end: the one that marks it ended stores
    its results; the other stores nothing (it finds the replies in the cache)."""
    batch_id, key = f"msgbatch_{_run_id()}", uuid.uuid4().hex + uuid.uuid4().hex
    request = BatchedRequest("claude-haiku-4-5", "relevance", "relevance-v1")
    reply = BatchReply(key, request, Completion("0.7", Usage(40, 2)), 0.00003)
    with store.connection() as other:
        first, second = JudgeLedger(conn, run_id=_run_id()), JudgeLedger(other, run_id=_run_id())
        first.register_batch("anthropic", batch_id, {key: request})
        assert [b.batch_id for b in second.open_batches("anthropic", [key])] == [batch_id]
        assert first.record_batch_results("anthropic", batch_id, [reply])
        assert not second.record_batch_results("anthropic", batch_id, [reply])
        assert second.open_batches("anthropic", [key]) == []
    assert _scalar(watch, "SELECT count(*) FROM api_cost_log WHERE run_id = ANY(%s)",
                   ([first.run_id, second.run_id],)) == 1
    assert _scalar(watch, "SELECT count(*) FROM judge_cache WHERE key = %s", (key,)) == 1
    assert _scalar(watch, "SELECT status FROM judge_batches WHERE batch_id = %s",
                   (batch_id,)) == "ended"
