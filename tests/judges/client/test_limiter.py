"""The rate limiter's ceiling, counted from the start.

Requests are acquired back to back on a fake clock (FakeTime), as a run with calls queued at
the limiter asks for them, and the moments they are let through are counted: in the first
second, in the first minute, and in every window of a second and of a minute that starts at
one of them. A bucket that started full let 8 requests through in the first second against
4/s and 245 in the first minute against 240.
"""

from __future__ import annotations

import asyncio
import bisect
import math

import pytest

from eval_harness.judges.client.limiter import RateLimiter
from fake_llm_client import FakeTime

pytestmark = pytest.mark.unit

EPS = 1e-6  # seconds: the fake clock adds up float waits


def _sent_at(requests_per_minute: float, seconds: float, *, tokens_per_minute=None,
             tokens: int = 0) -> tuple[float, list[float]]:
    """(start, the moments requests were let through during ``seconds`` of demand)."""
    time_ = FakeTime()
    start = time_.now

    async def run() -> list[float]:
        limiter = RateLimiter(requests_per_minute, tokens_per_minute,
                              clock=time_.clock, sleep=time_.sleep)
        moments = []
        while time_.now - start < seconds:
            await limiter.acquire(tokens)
            moments.append(time_.now)
        return moments

    return start, asyncio.run(run())


def _in_window(moments: list[float], begin: float, length: float, *, closed: bool) -> int:
    """Sends from ``begin`` to ``begin + length`` (``moments`` ascending), that end included
    when ``closed``."""
    end = begin + length + (EPS if closed else -EPS)
    return bisect.bisect_right(moments, end) - bisect.bisect_left(moments, begin - EPS)


@pytest.mark.parametrize("rpm, first_second, first_minute",
                         [(240, 4, 240), (50, 0, 50)], ids=["240-per-min", "50-per-min"])
def test_no_more_than_the_limit_goes_in_the_first_second_and_minute(rpm, first_second,
                                                                    first_minute):
    start, moments = _sent_at(rpm, 120)
    # counted as the issue counts them: from the start to 1 s and 60 s later, both included
    assert _in_window(moments, start, 1.0, closed=True) == first_second
    assert _in_window(moments, start, 60.0, closed=True) == first_minute
    assert moments[0] - start == pytest.approx(60.0 / rpm)  # the first waits one request


@pytest.mark.parametrize("rpm", [240, 50, 500], ids=lambda rpm: f"{rpm}-per-min")
def test_no_window_of_a_second_or_a_minute_holds_more_than_the_limit(rpm):
    start, moments = _sent_at(rpm, 180)
    # whole requests: 50/min lets one through in some seconds, 500/min nine (8.3 a second)
    per_second = math.ceil(rpm / 60)
    # a window starting at a send leaves out its end: a steady pace of r a second has a
    # send at both ends of every such second (r + 1 with the end included), at any limit
    for begin in [start, *moments]:
        assert _in_window(moments, begin, 1.0, closed=False) <= per_second
        assert _in_window(moments, begin, 60.0, closed=False) <= rpm


def test_the_token_limit_also_holds_from_the_start():
    """600 tokens/min (10 a second) in requests of 5: two a second, from the first second."""
    start, moments = _sent_at(1e6, 120, tokens_per_minute=600, tokens=5)
    assert _in_window(moments, start, 1.0, closed=True) * 5 <= 10
    assert _in_window(moments, start, 60.0, closed=True) * 5 <= 600
