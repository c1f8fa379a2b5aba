"""Telling a stray 429 from congestion, easing on a low ``remaining``, and a quota shared with
another client: the controller and limiter on a fake clock, a simulated shared
bucket, and real SDK requests against the fake server under random refusals."""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from datetime import UTC, datetime

import pytest

from eval_harness.judges.client.adaptive import AdaptiveRateLimiter, RateController, RateSignal
from eval_harness.judges.client.providers import provider
from eval_harness.judges.client.retry import RetryPolicy
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.protocol import Outcome
from eval_harness.settings.judges import RateLimit, RetrySettings
from fake_llm_server import FakeLLMServer, FakeTime, judge_settings

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def _limiter(time_: FakeTime, rpm: float = 3000, **options):
    return AdaptiveRateLimiter(rpm, None, clock=time_.clock, sleep=time_.sleep,
                               wall=lambda: NOW,
                               read_headers=provider("openai").read_rate_headers, **options)


def _capacity(remaining: int, limit: int = 3000) -> dict[str, str]:
    return {"x-ratelimit-limit-requests": str(limit),
            "x-ratelimit-remaining-requests": str(remaining)}


@pytest.mark.unit
def test_random_refusals_that_the_headers_contradict_neither_cut_nor_pause():
    """10% of replies refused at random while the provider's bucket shows room: the rate
    stays at the limit (before: every such 429 halved it and paused the provider)."""
    time_ = FakeTime()
    rng = random.Random(3)
    limiter = _limiter(time_, 3000)
    refused = 0
    for _ in range(1500):  # 30 s at 50 responses a second
        sent = time_.now
        time_.now += 0.02
        if rng.random() < 0.10:
            refused += 1
            limiter.observe(_capacity(80) | {"retry-after": "1"}, outcome="refused",
                            sent_at=sent)
        else:
            limiter.observe(_capacity(80), outcome="success", sent_at=sent)
    controller = limiter.controller
    assert limiter.requests_per_minute == pytest.approx(3000) and controller.cuts == 0
    assert controller.paused_until == -math.inf and controller.paused_seconds == 0.0
    assert refused > 100 and controller.stray == refused


@pytest.mark.unit
def test_a_stray_429_pauses_only_its_request_and_a_congestion_pauses_all():
    time_ = FakeTime()

    async def run():
        limiter = _limiter(time_, 3000)
        time_.now += 1.0  # idle for a second: our bucket is full
        limiter.observe(_capacity(100))  # the provider's bucket holds about 100
        limiter.observe(_capacity(60) | {"retry-after": "30"}, outcome="refused",
                        sent_at=time_.now)
        start = time_.now
        await limiter.acquire()  # the others go on at once
        stray_wait = time_.now - start
        limiter.observe(_capacity(0) | {"retry-after": "30"}, outcome="refused",
                        sent_at=time_.now)
        start = time_.now
        await limiter.acquire()  # an empty bucket: everyone waits its Retry-After
        return stray_wait, time_.now - start

    stray_wait, congestion_wait = asyncio.run(run())
    assert stray_wait == 0.0 and congestion_wait == pytest.approx(30.0)
    # the refused request itself waits at least its Retry-After before it is sent again
    assert RetryPolicy(RetrySettings(), random.Random(0)).wait(1, 30.0) == 30.0


@pytest.mark.unit
def test_without_headers_random_refusals_do_not_cut_but_a_real_limit_does():
    """Without ``remaining`` one 429 proves nothing: 10.5% refused at random for a minute
    cuts nothing; a limit at half our rate (half the requests refused) cuts within a second."""
    controller = RateController(3000)
    rng = random.Random(11)
    now = 0.0
    for _ in range(3000):  # 60 s at 50 responses a second
        now += 0.02
        outcome = "refused" if rng.random() < 0.105 else "success"
        controller.observe(RateSignal(retry_after=1.0), now=now, outcome=outcome,
                           sent_at=now - 0.1)
    assert controller.cuts == 0 and controller.rate == pytest.approx(3000)
    limit_from = now
    while controller.cuts == 0 and now < limit_from + 5:
        now += 0.02
        outcome = "refused" if rng.random() < 0.5 else "success"
        controller.observe(RateSignal(retry_after=1.0), now=now, outcome=outcome,
                           sent_at=now - 0.1)
    assert controller.cuts == 1 and now - limit_from < 1.0
    assert controller.rate == pytest.approx(1500) and controller.paused_until == now + 1.0


@pytest.mark.unit
def test_a_wait_no_call_takes_is_no_rate_signal():
    """A 429 asking for longer than calls wait (``beyond_wait``) ends its call; pausing or
    slowing the others for it would not bring the moment nearer."""
    controller = RateController(3000, beyond_wait=120.0)
    for i in range(10):  # in a row, even with an empty bucket
        taken = controller.observe(RateSignal(requests_remaining=0, retry_after=86400.0),
                                   now=1.0 + i / 100, outcome="refused", sent_at=1.0 + i / 100)
        assert taken == "beyond"
    assert controller.cuts == 0 and controller.paused_until == -math.inf
    assert controller.rate == 3000 and controller.beyond == 10


@pytest.mark.unit
def test_a_burst_of_refusals_without_headers_is_one_congestion():
    controller = RateController(3000)
    for i in range(4):  # four in a row: not yet evidence of a limit
        controller.observe(RateSignal(), now=1.0 + i / 100, outcome="refused", sent_at=1.0)
    assert controller.cuts == 0 and controller.rate == 3000
    controller.observe(RateSignal(retry_after=2.0), now=1.05, outcome="refused", sent_at=1.0)
    assert controller.cuts == 1 and controller.paused_until == pytest.approx(3.05)
    for i in range(20):  # the rest of the burst: sent before the cut, the same congestion
        taken = controller.observe(RateSignal(retry_after=2.0), now=1.06 + i / 100,
                                   outcome="refused", sent_at=1.02)
        assert taken == "late"
    assert controller.cuts == 1 and controller.rate == pytest.approx(1500)
    assert controller.paused_seconds == pytest.approx(2.0)


@pytest.mark.unit
def test_a_low_remaining_eases_the_rate_before_any_refusal_at_most_once_a_second():
    controller = RateController(3000)
    controller.observe(RateSignal(request_limit=3000, requests_remaining=100), now=0.0)
    for step in range(1, 31):  # 3 s of successes while the bucket stays at 10 of 100
        controller.observe(RateSignal(request_limit=3000, requests_remaining=10),
                           now=step / 10, sent_at=step / 10 - 0.1)
    assert controller.rate == pytest.approx(3000 * 0.9 ** 3)
    assert controller.eases == 3 and controller.cuts == 0
    eased = controller.rate
    controller.observe(RateSignal(request_limit=3000, requests_remaining=60), now=3.5)
    assert controller.rate > eased  # room again: it climbs back
    daily = RateController(3000)  # a quota counted per day drains by design: no easing
    for step in range(30):
        daily.observe(RateSignal(requests_remaining=100 - 3 * step, requests_reset=3600.0),
                      now=step / 10)
    assert daily.eases == 0 and daily.rate == 3000


def _share_a_quota(*, other_rpm: float, seconds: float = 60.0, limit: float = 3000.0,
                   latency: float = 0.1) -> dict:
    """Our client (controller, a one-second bucket capped by ``remaining``) and another
    client sending ``other_rpm`` evenly, against one provider bucket of two seconds at
    ``limit``; a millisecond time step. Returns what we were served and refused."""
    controller = RateController(limit)
    rate_s, capacity = limit / 60, limit / 60 * 2
    bucket, tokens, other_next, now, dt = capacity, 1.0, 0.0, 0.0, 0.001
    answers: list[tuple[float, float, str, int]] = []  # (due, sent, outcome, remaining)
    served = refused = 0
    served_late = 0  # in the last two thirds: after settling
    while now < seconds:
        bucket = min(capacity, bucket + rate_s * dt)
        ours = controller.rate / 60
        tokens = min(max(1.0, ours), tokens + ours * dt)
        while other_rpm and now >= other_next:
            other_next += 60 / other_rpm
            bucket -= bucket >= 1
        while tokens >= 1 and now >= controller.paused_until:
            tokens -= 1
            if bucket < 1:
                answers.append((now + latency, now, "refused", 0))
                refused += 1
            else:
                bucket -= 1
                answers.append((now + latency, now, "success", int(bucket)))
                served += 1
                served_late += now >= seconds / 3
        while answers and answers[0][0] <= now:
            _, sent, outcome, remaining = answers.pop(0)
            controller.observe(RateSignal(request_limit=limit, requests_remaining=remaining,
                                          retry_after=1.0 if outcome == "refused" else None),
                               now=now, outcome=outcome, sent_at=sent)
            in_flight = sum(1 for a in answers if a[1] <= now)
            tokens = min(tokens, max(0.0, remaining - in_flight))
        now += dt
    return {"served_late_rpm": served_late / (seconds * 2 / 3) * 60, "refused": refused,
            "cuts": controller.cuts, "served": served}


@pytest.mark.unit
def test_sharing_a_quota_settles_at_the_rest_without_a_refusal_storm():
    """Another client takes 1,500 of the key's 3,000/min: ``remaining`` runs low before the
    bucket is empty, so the client eases to the rest instead of paying refusals to find it
    (plain AIMD: a refusal, a cut and a pause every few seconds)."""
    shared = _share_a_quota(other_rpm=1500)
    assert 0.9 * 1500 <= shared["served_late_rpm"] <= 1.1 * 1500
    assert shared["refused"] <= 2 and shared["cuts"] <= 1
    alone = _share_a_quota(other_rpm=0)  # and alone at the limit it keeps the whole limit
    assert alone["served_late_rpm"] >= 0.9 * 3000 and alone["refused"] == 0


# -- through the SDKs, against the fake server ---------------------------------------------


@pytest.mark.parametrize("spec", ["openai:gpt-4o", "anthropic:claude-haiku-4-5"])
def test_random_refusals_with_room_in_the_bucket_keep_the_pace(spec, settings, conn):
    """10% 429 and 5% 503 at random while the server's headers show room: no cut, no pause;
    only the refused requests wait (Retry-After 0.2 s, backoffs from 0.1 s, to stay quick);
    the run counts the refusals."""
    n = 60
    with FakeLLMServer(rpm_limit=6000, rate_limit_headers=True, fault_rate=0.15,
                       fault_kinds=("429", "429", "503"), retry_after=0.2, seed=5) as fake:
        config = judge_settings(settings, fake, judge1=spec, judge2="local:lexical",
                                concurrency=8, retry=RetrySettings(base_delay_seconds=0.1),
                                rate_limits={"openai": RateLimit(6000, None),
                                             "anthropic": RateLimit(6000, None)})
        tag = uuid.uuid4().hex

        async def run():
            async with JudgeSession(config, conn) as session:
                results = await asyncio.gather(*(
                    session.judge1.relevance(f"aspirin risk {tag} {i}", "aspirin lowers risk")
                    for i in range(n)))
                return results, session

        results, session = asyncio.run(run())
        records = fake.chat_records()
    refused = sum(r.status == 429 for r in records)
    controller = session.pipeline.limiter(spec.split(":")[0]).controller
    assert all(r.outcome is Outcome.SCORED for r in results)
    assert refused >= 3 and not any(r.fault == "over_limit" for r in records)
    assert controller.cuts == 0 and controller.paused_seconds == 0.0
    assert controller.rate == pytest.approx(6000)
    assert session.stats.refused == refused and session.stats.backoff_wait_s >= refused * 0.2
