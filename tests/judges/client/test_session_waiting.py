"""A slow run explains itself: the judge summary counts the requests a provider refused and
the time spent waiting, and a server that asks to wait far longer than calls wait
is said once, with the figure. Real SDKs against the fake server, fake time."""

from __future__ import annotations

import asyncio
import logging
import uuid

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.client.retry import WaitAsked, wait_asked_notice
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.dual.run import judge_dataset_async
from fake_llm_server import FakeTime, Fault, judge_settings

DAY = "the openai server asked to wait 86400 s (1 day) before retrying"


@pytest.fixture
def dataset(tmp_path, conn):
    """Two queries, two documents each, with texts no other test used (empty cache)."""
    tag = uuid.uuid4().hex[:8]
    docs = {"d1": f"aspirin lowers heart attack risk {tag}", "d2": f"statins {tag}",
            "d3": f"sleep improves memory {tag}", "d4": f"coffee and liver {tag}"}
    queries = {"q1": f"aspirin heart attack {tag}", "q2": f"memory sleep {tag}"}
    vectors = np.eye(4, 8, dtype=np.float32) + 0.05
    write_beir(tmp_path / "data", docs, queries,
               [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d3", 1), ("q2", "d4", 0)],
               doc_vectors=vectors, query_vectors=vectors[[0, 2]])
    name = f"waiting_{tag}"
    ingest_beir(conn, tmp_path / "data", name=name)
    return name


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "eval_harness.judges" and r.levelno == logging.WARNING]


def test_the_summary_counts_refused_requests_and_the_time_spent_waiting(settings, conn,
                                                                        dataset, fake):
    fake.enqueue(Fault("429", retry_after=2), Fault("429", retry_after=2))
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical")
    summary = asyncio.run(judge_dataset_async(conn, config, dataset,
                                              session_options=FakeTime().options()))
    assert summary.complete and summary.refused == 2
    assert summary.backoff_wait_s == pytest.approx(4.0)  # each waited its Retry-After
    assert ("2 requests refused by the provider (rate limit), 4 s waiting (rate limiter 0 s, "
            "retry backoffs 4 s, summed over calls in flight)") in summary.format()
    assert summary.to_dict()["refused"] == 2 and summary.metadata()["waiting_s"] == 4.0


def test_a_server_asking_to_wait_a_day_is_said_once_with_the_figure(settings, conn, fake,
                                                                    caplog):
    """Five calls refused with Retry-After 86400 in a row: each is given up at once (a call
    waits at most 120 s) and the others go on at the same pace (before: every one of them
    paused the provider for 60 s, and nothing said why)."""
    fake.enqueue(*[Fault("429", retry_after=86400)] * 5)
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical")
    time_ = FakeTime()
    tag = uuid.uuid4().hex

    async def run():
        async with JudgeSession(config, conn, **time_.options()) as session:
            for i in range(8):  # one after the other: the refusals are in a row
                await session.judge1.relevance(f"aspirin {tag} {i}", "aspirin lowers risk")
        return session

    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        session = asyncio.run(run())
    assert time_.waits == [] and session.stats.failed_calls == 5
    controller = session.pipeline.limiter("openai").controller
    assert controller.cuts == 0 and controller.paused_seconds == 0.0
    said = [m for m in _warnings(caplog) if "asked to wait" in m]
    assert said == [f"{DAY}; calls wait at most 120 s (judges.retry.max_wait_seconds), so 5 "
                    "calls were given up: run again later"]


@pytest.mark.unit
def test_the_wait_notice_says_when_sending_was_paused_at_a_time():
    asked = WaitAsked(longest_s=7200.0, calls_given_up=1)
    assert wait_asked_notice("anthropic", asked, max_wait_s=120.0, paused_s=60.0) == (
        "the anthropic server asked to wait 7200 s (2 h) before retrying; calls wait at most "
        "120 s (judges.retry.max_wait_seconds), so 1 call was given up: run again later; "
        "sending to it paused 60 s at a time")


def test_the_dual_judge_summary_says_the_wait_and_the_log_does_not_repeat_it(settings, conn,
                                                                             dataset, fake,
                                                                             caplog):
    fake.enqueue(Fault("429", retry_after=86400))
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical")
    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        summary = asyncio.run(judge_dataset_async(conn, config, dataset,
                                                  session_options=FakeTime().options()))
    assert summary.failed == 1
    notice = (f"{DAY}; calls wait at most 120 s (judges.retry.max_wait_seconds), so 1 call "
              "was given up: run again later")
    assert summary.wait_notices == (notice,) and notice in summary.format().splitlines()
    assert summary.to_dict()["wait_notices"] == [notice]
    assert not [m for m in _warnings(caplog) if "asked to wait" in m]
