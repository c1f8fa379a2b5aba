"""Client-side rate limiting per provider: requests per minute and tokens per minute.

Two token buckets refilled continuously at ``limit / 60`` per second, each holding at most one
second's worth. Both start empty: the first request waits one request's worth of time (0.25 s
at 240 requests/min, 1.2 s at 50/min), so counted from the start no window ever holds more
than the limits allow (at 240/min: 4 requests in the first second, 240 in the first minute;
at 50/min: 0 in the first second, 50 in the first minute). A bucket that started full would
add its second's worth on top of the refill (8 requests in the first second at 240/min, 244
in the first minute). Later, a client that sent less than the limit for a while may send up
to one second's worth at once, never more. A request needing more tokens than the bucket
holds waits for a full bucket and leaves it in debt (later requests wait the debt off).
Tokens are estimated before the call (see :meth:`ChatRequest.estimated_input_tokens` plus
max tokens) and the unused part is given back when the real usage is known.

Waiters are served first come, first served. ``clock`` and ``sleep`` are injectable so tests
run on a fake clock.

The rates can be changed while requests wait (:meth:`RateLimiter.set_rates`; a lowered rate
also shrinks what the buckets hold, so no burst of the old rate is sent at the new one) and
sending can be paused until a moment (:meth:`RateLimiter.pause_until`) or held to a number
of requests at once (:meth:`RateLimiter.hold_at_most`): the adaptive
limiter (:mod:`eval_harness.judges.client.adaptive`) does both from what the provider says.

Why not aiolimiter (1.x): its ``AsyncLimiter(max_rate, time_period)`` is one leaky bucket
whose capacity is a whole period's rate; it refuses an ``acquire(amount)`` above that, serves
waiters smallest amount first, gives nothing back and reads the event loop's clock. We need
two buckets taken together (requests and tokens), bursts of one second (a one-second bucket
at Anthropic's default 50 requests per minute holds less than one request: every acquire
would be refused), a request larger than the bucket going into debt, first come first
served, unused tokens given back and a fake clock for exact tests: it would end up wrapping
this class's logic rather than replacing it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
# A wait shorter than this is the float rounding of a refill, not a wait: sleeping it could
# leave a clock unmoved (a fake one, or a coarse one) and ask again for ever.
NO_WAIT_SECONDS = 1e-9


class RateLimiter:
    def __init__(self, requests_per_minute: float, tokens_per_minute: float | None = None, *,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        if requests_per_minute <= 0 or (tokens_per_minute is not None and tokens_per_minute <= 0):
            raise ValueError("rate limits must be positive")
        self._clock, self._sleep = clock, sleep
        self._request_rate = requests_per_minute / 60.0
        self._request_capacity = max(1.0, self._request_rate)
        self._token_rate = None if tokens_per_minute is None else tokens_per_minute / 60.0
        self._token_capacity = 0.0 if self._token_rate is None else max(1.0, self._token_rate)
        # empty at the start: a full bucket would let a second's worth go on top of the
        # refill, above the limit in the first second and the first minute
        self._requests = 0.0
        self._tokens = 0.0
        self._updated = clock()
        self._paused_until = 0.0
        self._lock = asyncio.Lock()

    @property
    def requests_per_minute(self) -> float:
        return self._request_rate * 60.0

    @property
    def tokens_per_minute(self) -> float | None:
        return None if self._token_rate is None else self._token_rate * 60.0

    def set_rates(self, requests_per_minute: float,
                  tokens_per_minute: float | None = None) -> None:
        """Send at these rates from now on (``tokens_per_minute`` None: tokens unlimited)."""
        if requests_per_minute <= 0 or (tokens_per_minute is not None and tokens_per_minute <= 0):
            raise ValueError("rate limits must be positive")
        self._refill()  # what accrued so far accrued at the old rates
        self._request_rate = requests_per_minute / 60.0
        self._request_capacity = max(1.0, self._request_rate)
        self._requests = min(self._requests, self._request_capacity)
        if tokens_per_minute is None:
            self._token_rate, self._token_capacity, self._tokens = None, 0.0, 0.0
        else:
            had_tokens = self._token_rate is not None
            self._token_rate = tokens_per_minute / 60.0
            self._token_capacity = max(1.0, self._token_rate)
            # a newly imposed token limit starts empty, as every bucket does
            self._tokens = min(self._tokens, self._token_capacity) if had_tokens else 0.0

    def hold_at_most(self, requests: float) -> None:
        """Let at most ``requests`` go at once from now (the server said that many remain);
        later ones wait for the refill as usual."""
        self._refill()
        self._requests = min(self._requests, max(0.0, requests))

    def pause_until(self, moment: float) -> None:
        """Send nothing before ``moment`` (on this limiter's clock); an earlier pause that
        ends later is kept."""
        self._paused_until = max(self._paused_until, moment)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        self._requests = min(self._request_capacity, self._requests + elapsed * self._request_rate)
        if self._token_rate is not None:
            self._tokens = min(self._token_capacity, self._tokens + elapsed * self._token_rate)

    def _wait_needed(self, tokens: int) -> float:
        wait = max(0.0, self._paused_until - self._clock())
        if self._requests < 1.0:
            wait = max(wait, (1.0 - self._requests) / self._request_rate)
        if self._token_rate is not None:
            needed = min(float(tokens), self._token_capacity)
            if self._tokens < needed:
                wait = max(wait, (needed - self._tokens) / self._token_rate)
        return wait

    async def acquire(self, tokens: int = 0) -> float:
        """Wait until one request of ``tokens`` estimated tokens may be sent; returns the wait."""
        waited = 0.0
        async with self._lock:
            while True:
                self._refill()
                wait = self._wait_needed(tokens)
                if wait <= NO_WAIT_SECONDS:
                    self._requests -= 1.0
                    if self._token_rate is not None:
                        self._tokens -= tokens
                    return waited
                await self._sleep(wait)
                waited += wait

    def refund(self, tokens: int) -> None:
        """Give back tokens that were estimated but not used."""
        if self._token_rate is not None and tokens > 0:
            self._refill()
            self._tokens = min(self._token_capacity, self._tokens + tokens)
