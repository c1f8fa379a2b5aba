"""The adaptive rate limiter: what the provider's headers and 429s do to the request rate.

Unit tests run the controller and the limiter on a fake clock (FakeTime); the last test sends
real SDK requests to the fake server with a limit far below the client's ceiling.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from eval_harness.judges.client.adaptive import AdaptiveRateLimiter, RateController, RateSignal
from eval_harness.judges.client.providers import provider
from eval_harness.judges.client.rate_headers import parse_reset
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.protocol import Outcome
from eval_harness.settings.judges import RateLimit
from fake_llm_server import FakeLLMServer, FakeTime, judge_settings

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
NONE_LEFT = {"x-ratelimit-remaining-requests": "0"}  # a 429 with this is congestion
NONE_LEFT_SIGNAL = RateSignal(requests_remaining=0)


def _limiter(time_: FakeTime, rpm: float = 3000, tpm: float | None = None, *,
             api: str = "openai", **options):
    return AdaptiveRateLimiter(rpm, tpm, clock=time_.clock, sleep=time_.sleep,
                               wall=lambda: NOW,
                               read_headers=provider(api).read_rate_headers, **options)


# -- reading the headers ------------------------------------------------------------------


@pytest.mark.unit
def test_openai_headers_are_read_with_their_go_style_durations():
    signal = provider("openai").read_rate_headers({
        "X-RateLimit-Limit-Requests": "500", "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "6m0s", "x-ratelimit-limit-tokens": "30000"}, now=NOW)
    assert signal == RateSignal(request_limit=500, requests_remaining=499, requests_reset=360.0,
                                token_limit=30000, retry_after=None)
    assert parse_reset("20ms", now=NOW) == pytest.approx(0.02)
    assert parse_reset("1m30.5s", now=NOW) == pytest.approx(90.5)
    assert parse_reset("1h2m3s", now=NOW) == pytest.approx(3723.0)
    assert parse_reset("2", now=NOW) == 2.0


@pytest.mark.unit
def test_anthropic_headers_are_read_with_their_rfc3339_reset_and_retry_after():
    reset = (NOW + timedelta(seconds=1.5)).isoformat().replace("+00:00", "Z")
    signal = provider("anthropic").read_rate_headers({
        "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-tokens-limit": "40000",
        "retry-after": "3"}, now=NOW)
    assert signal == RateSignal(request_limit=50, requests_remaining=0, requests_reset=1.5,
                                token_limit=40000, retry_after=3.0)


@pytest.mark.unit
@pytest.mark.parametrize("bad", ["abc", "-5", "0", "nan", "inf", "", "1e", "3,000"])
def test_malformed_limits_are_ignored_and_leave_the_rate_alone(bad):
    time_ = FakeTime()
    limiter = _limiter(time_, 3000)
    signal = limiter.observe({"x-ratelimit-limit-requests": bad,
                              "x-ratelimit-remaining-requests": "-1" if bad == "0" else bad,
                              "x-ratelimit-reset-requests": "soon"})
    assert signal.request_limit is None and signal.requests_remaining is None
    assert signal.requests_reset is None
    assert limiter.requests_per_minute == pytest.approx(3000)
    assert limiter.controller.paused_until == -math.inf


@pytest.mark.unit
def test_a_reset_moment_without_a_timezone_or_in_another_form_is_ignored():
    assert parse_reset("2026-11-24T12:00:05", now=NOW) is None  # naive: which zone?
    assert parse_reset("in a bit", now=NOW) is None
    assert parse_reset("5x", now=NOW) is None
    assert parse_reset("2026-11-24T12:00:05Z", now=NOW) == pytest.approx(5.0)


# -- the controller ------------------------------------------------------------------------


@pytest.mark.unit
def test_a_provider_limit_below_the_ceiling_lowers_the_rate_and_one_above_does_not_raise_it():
    time_ = FakeTime()
    limiter = _limiter(time_, 3000)
    limiter.observe({"x-ratelimit-limit-requests": "1000"})
    assert limiter.requests_per_minute == pytest.approx(1000)
    limiter.observe({"x-ratelimit-limit-requests": "2000"})  # the provider raised it
    assert limiter.requests_per_minute == pytest.approx(2000)
    limiter.observe({"x-ratelimit-limit-requests": "10000"})  # above our ceiling
    assert limiter.requests_per_minute == pytest.approx(3000)


@pytest.mark.unit
def test_a_lowered_rate_does_not_send_the_old_rates_burst():
    time_ = FakeTime()

    async def run():
        limiter = _limiter(time_, 600, api="anthropic")  # 10/s, a bucket of 10, empty
        time_.now += 1.0  # idle for a second: the bucket is full
        limiter.observe({"anthropic-ratelimit-requests-limit": "60"})  # 1/s, a bucket of 1
        start = time_.now
        for _ in range(4):
            await limiter.acquire()
        return time_.now - start

    assert asyncio.run(run()) == pytest.approx(3.0)  # one at once, then one a second


@pytest.mark.unit
def test_a_429_pauses_until_its_retry_after_and_halves_the_rate_once_per_congestion():
    time_ = FakeTime()

    async def run():
        limiter = _limiter(time_, 3000)
        sent = time_.now
        time_.now += 0.1
        limiter.observe(NONE_LEFT | {"retry-after": "2"}, outcome="refused", sent_at=sent)
        assert limiter.requests_per_minute == pytest.approx(1500)
        # refusals of requests sent before that cut are the same congestion: no second cut
        limiter.observe(NONE_LEFT | {"retry-after": "2"}, outcome="refused", sent_at=sent)
        assert limiter.requests_per_minute == pytest.approx(1500)
        assert limiter.controller.cuts == 1
        start = time_.now
        await limiter.acquire()
        waited = time_.now - start
        # a request sent after the cut and refused again cuts again
        limiter.observe(NONE_LEFT, outcome="refused", sent_at=time_.now)
        return waited, limiter.requests_per_minute

    waited, rate = asyncio.run(run())
    assert waited == pytest.approx(2.0)
    assert rate == pytest.approx(750)


@pytest.mark.unit
def test_a_retry_after_longer_than_max_pause_pauses_only_max_pause():
    time_ = FakeTime()
    limiter = _limiter(time_, 3000, max_pause=30.0)
    limiter.observe(NONE_LEFT | {"retry-after": "3600"}, outcome="refused", sent_at=time_.now)
    assert limiter.controller.paused_until == pytest.approx(time_.now + 30.0)


@pytest.mark.unit
def test_what_remains_caps_the_next_burst_and_nothing_left_waits_one_request():
    time_ = FakeTime()

    async def run():
        limiter = _limiter(time_, 3000)
        time_.now += 1.0  # idle for a second: a full bucket, 50 requests at once
        limiter.observe({"x-ratelimit-limit-requests": "600",  # 10/s, a bucket of 10
                         "x-ratelimit-remaining-requests": "3",
                         "x-ratelimit-reset-requests": "2s"})
        start = time_.now
        for _ in range(3):
            await limiter.acquire()
        burst = time_.now - start
        limiter.observe({"x-ratelimit-limit-requests": "600",
                         "x-ratelimit-remaining-requests": "0"})
        await limiter.acquire()
        return burst, time_.now - start

    burst, total = asyncio.run(run())
    assert burst == 0.0  # the three that remain go at once ...
    assert total == pytest.approx(0.1)  # ... then one request's worth at 600/min


@pytest.mark.unit
def test_nothing_remaining_without_a_limit_pauses_until_the_reset():
    time_ = FakeTime()
    limiter = _limiter(time_, 3000)
    limiter.observe({"x-ratelimit-remaining-requests": "0",
                     "x-ratelimit-reset-requests": "1.5s"})
    assert limiter.controller.paused_until == pytest.approx(time_.now + 1.5)


@pytest.mark.unit
def test_recovery_is_additive_in_time_and_never_exceeds_the_ceiling():
    controller = RateController(3000, recovery_seconds=20.0)
    controller.observe(NONE_LEFT_SIGNAL, now=1.0, outcome="refused")
    assert controller.rate == pytest.approx(1500)
    rates = []
    for step in range(1, 401):  # a success every 0.1 s for 40 s
        controller.observe(RateSignal(), now=1.0 + step / 10, outcome="success")
        rates.append(controller.rate)
    assert rates[0] == pytest.approx(1515)  # 3000 / 20 s per second: 15 in 0.1 s
    assert all(b >= a for a, b in zip(rates, rates[1:]))
    assert max(rates) == pytest.approx(3000) and max(rates) <= 3000
    assert rates.index(max(rates)) == pytest.approx(99, abs=1)  # half the target in 10 s


@pytest.mark.unit
def test_recovery_does_not_count_idle_time_nor_the_burst_rate():
    controller = RateController(3000, recovery_seconds=20.0)
    controller.observe(NONE_LEFT_SIGNAL, now=0.0, outcome="refused")
    controller.observe(RateSignal(), now=100.0, outcome="success")  # idle: at most 1 s
    assert controller.rate == pytest.approx(1500 + 150)
    for _ in range(1000):  # many successes at the same moment add nothing more
        controller.observe(RateSignal(), now=100.0, outcome="success")
    assert controller.rate == pytest.approx(1650)


@pytest.mark.unit
def test_recovery_stops_at_the_providers_limit_when_it_is_below_the_ceiling():
    controller = RateController(3000)
    limit = RateSignal(request_limit=1000)
    controller.observe(limit, now=1.0, outcome="success")
    controller.observe(replace(limit, requests_remaining=0), now=2.0, outcome="refused",
                       sent_at=2.0)
    assert controller.rate == pytest.approx(500)
    for step in range(500):
        controller.observe(limit, now=3.0 + step, outcome="success")
        assert controller.rate <= 1000
    assert controller.rate == pytest.approx(1000)


@pytest.mark.unit
def test_errors_other_than_429_neither_cut_nor_raise_the_rate():
    controller = RateController(3000)
    controller.observe(NONE_LEFT_SIGNAL, now=1.0, outcome="refused")
    controller.observe(RateSignal(), now=2.0, outcome="error")
    assert controller.rate == pytest.approx(1500) and controller.cuts == 1


@pytest.mark.unit
def test_token_limits_lower_a_configured_token_ceiling_and_impose_none_when_unset():
    time_ = FakeTime()
    limited = _limiter(time_, 3000, 100_000)
    limited.observe({"x-ratelimit-limit-tokens": "30000"})
    assert limited.tokens_per_minute == pytest.approx(30000)
    limited.observe({"x-ratelimit-limit-tokens": "500000"})
    assert limited.tokens_per_minute == pytest.approx(100_000)
    unlimited = _limiter(time_, 3000, None, api="anthropic")
    unlimited.observe({"anthropic-ratelimit-tokens-limit": "30000"})
    assert unlimited.tokens_per_minute is None


# -- through the SDKs, against the fake server ---------------------------------------------


@pytest.mark.parametrize("spec", ["openai:gpt-4o", "anthropic:claude-haiku-4-5"])
def test_the_pipeline_slows_to_the_servers_advertised_limit_with_few_refusals(spec, settings,
                                                                              conn):
    """Ceiling 3,000/min, server 600/min (10/s, a bucket of one second): without adapting,
    the client would send ~50/s and most requests would be refused."""
    n = 40
    with FakeLLMServer(rpm_limit=600, burst_seconds=1.0, rate_limit_headers=True) as fake:
        config = judge_settings(settings, fake, judge1=spec, judge2="local:lexical",
                                concurrency=8,
                                rate_limits={"openai": RateLimit(3000, None),
                                             "anthropic": RateLimit(3000, None)})
        tag = uuid.uuid4().hex

        async def run():
            async with JudgeSession(config, conn) as session:
                results = await asyncio.gather(*(
                    session.judge1.relevance(f"aspirin risk {tag} {i}", "aspirin lowers risk")
                    for i in range(n)))
                return results, session.pipeline.limiter(spec.split(":")[0])

        started = time.monotonic()
        results, limiter = asyncio.run(run())
        elapsed = time.monotonic() - started
        records = fake.chat_records()
    refused = sum(r.fault == "over_limit" for r in records)
    assert all(r.outcome is Outcome.SCORED for r in results)
    assert refused <= 2, f"{refused} of {len(records)} requests refused"
    # at the advertised limit, or a little below it: this server's bucket holds one second,
    # as the client's does, so at the limit its ``remaining`` runs low and the client eases
    assert 0.8 * 600 <= limiter.requests_per_minute <= 600 + 1e-9
    # ~10 from the server's bucket, the other 30 at 10/s: the client went no faster
    assert elapsed >= (n - 10 - 2) / 10.0
