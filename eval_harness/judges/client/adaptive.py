"""A rate limiter that follows what the provider says about its limits, within our ceiling.

The configured ``judges.rate_limits.<provider>`` are a ceiling: the client never sends faster.
Below it, every provider response (success or refusal) moves the request rate:

* **The provider's limit.** Its advertised request limit (``x-ratelimit-limit-requests``, OpenAI;
  ``anthropic-ratelimit-requests-limit``, Anthropic) lower than the ceiling becomes the
  target rate. When the advertised limit changes, the rate jumps to the new target, down or
  up (never above the ceiling): the provider has said what it accepts, so there is nothing to
  probe. The tokens variant lowers a configured tokens-per-minute limit the same way; with no
  configured token limit (``tokens_per_minute: null``) none is imposed.
* **What is left.** ``remaining`` R caps what the client may send at once: its bucket holds
  at most R minus the other requests in flight (sent, not yet answered: the server may not
  have counted them yet) from then on, and refills at the rate. Both providers replenish
  continuously, so R = 0 costs one request's worth of time at our rate, not a wait for
  ``reset``; only when no limit was said does R = 0 pause until ``reset`` (at most
  ``max_pause``). The largest R seen estimates the provider's bucket (scaled when the limit
  changes); R below ``low_remaining`` (15%) of it means someone is draining the bucket faster
  than it refills (another client on the same key, or us): the rate eases by ``ease`` (10%)
  at most once a second, before any refusal, and rises only while R is above that mark
  (ECN's idea: act on the queue filling, not on the loss). Not when ``reset`` is more than a
  minute away: a daily quota drains by design.
* **A 429 (rate limited)** is first classified:

  - *stray*: the headers contradict it (R >= max(1, ``stray_remaining`` (10%) of the
    bucket)): an overloaded replica, a shared proxy, a transient refusal. It is not a rate
    signal: no cut, no pause for the others; only that request waits its ``Retry-After``
    (the retry policy, :mod:`.retry`, never waits less).
  - *congestion* with headers: R is about zero.
  - without a ``remaining`` header one refusal proves nothing, so congestion needs evidence
    among the responses (successes and 429s; other errors are ignored) to requests sent
    after the last cut: ``run`` (5) refusals in a row, or at least ``share`` (35%) refused of
    the last ``window`` (40). With refusals at random at a share p (429s of successes plus
    429s) a run of 5 starts at a response with probability (1-p) p**5, and a window reaches
    14 of 40 with probability P(Binomial(40, p) >= 14): at p = 0.105 (10% 429 and 5% 503
    sent at random) about 1.1e-5 + 3.2e-5 per response, so at 50 responses a second
    (3,000/min) a false congestion every 7-8 minutes (each costs one ``Retry-After`` pause
    and 10 s of climbing back from half the rate: 2.5 s worth of requests, under 1% of the
    time between two); at 500/min one every 75 minutes. A real limit below our rate refuses
    (rate - limit) / rate of the requests on top of the random ones: at 1.5 times the limit
    or more (a third refused) it is found within a window or two, a second or two at these
    rates. Closer to the limit the refusals are retried and the server still serves its
    limit; the price of not taking a stray 429 for a limit is that, without headers, the
    rate saws between about 0.75 and 1.5 times a lowered limit and more of its requests are
    refused (benchmarks/RESULTS.md, "changing-no-headers").

  - *beyond*: a ``Retry-After`` longer than ``beyond_wait`` (the pipeline passes
    ``judges.retry.max_wait_seconds``): that call is given up, and no pace would let the
    others through sooner. Pausing for it (60 s at a time) made a run with 30% of replies
    asking for a day take ten times as long and fail the same calls; it moves nothing.

  A congestion cuts the rate multiplicatively (``decrease``, 0.5) and pauses sending to the
  provider until its ``Retry-After`` (capped at ``max_pause``, 60 s). One congestion cuts
  once: refusals of requests sent before the last cut are the same congestion seen late
  (TCP's "once per round trip"), so a burst of them neither cuts nor pauses again.
* **Successes** raise the rate additively towards the target, in proportion to the time
  they cover: ``target / recovery_seconds`` per second (from half the target back to it in
  ``recovery_seconds / 2``, 10 s by default), counted from the previous success (at most one
  second of it: a long idle time is no evidence the provider would take more). Counting
  successes instead would recover 50 times faster at 3,000/min than at 60/min.

Each provider reads its own headers (its ``read_rate_headers``, given to the limiter as
``read_headers``); malformed values are ignored (:mod:`.rate_headers`). Quota refusals (429
``insufficient_quota``) stop the run elsewhere (:mod:`.runner`) and are not rate signals.

Why AIMD with the headers on top: inspect_ai and promptfoo adapt concurrency to 429s alone
(halve on a refusal, grow back slowly); that finds a limit nobody advertises (a gateway, a vLLM
server) but oscillates around it, pays refusals to learn it and, when refusals come at random,
settles near the square root of the target (every refusal is taken for the limit). The
headers say the limit outright and tell a stray refusal from a full bucket; AIMD with
evidence stays as the fallback.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime

from eval_harness.judges.client.limiter import Clock, RateLimiter, Sleep
from eval_harness.judges.client.rate_headers import RateSignal, read_retry_after

Wall = Callable[[], datetime]
HeaderReader = Callable[..., RateSignal]  # (headers, *, now) -> what they say (a provider's)


class RateController:
    """The request rate (per minute) that the responses so far call for; pure, no clock of
    its own: every observation says when it happened (see the module docstring)."""

    def __init__(self, ceiling: float, *, decrease: float = 0.5,
                 recovery_seconds: float = 20.0, max_pause: float = 60.0,
                 stray_remaining: float = 0.10, low_remaining: float = 0.15,
                 ease: float = 0.9, run: int = 5, share: float = 0.35,
                 window: int = 40, beyond_wait: float = math.inf) -> None:
        if ceiling <= 0 or not 0 < decrease < 1 or recovery_seconds <= 0 or not 0 < ease < 1:
            raise ValueError("an adaptive rate needs a positive ceiling, a decrease and an "
                             "ease in (0, 1) and a positive recovery time")
        self.ceiling = ceiling
        self.decrease, self.ease, self.max_pause = decrease, ease, max_pause
        self.recovery_seconds = recovery_seconds
        self.stray_remaining, self.low_remaining = stray_remaining, low_remaining
        self.run, self.share = run, share
        self.beyond_wait = beyond_wait
        self.floor = min(1.0, ceiling)
        self.rate = ceiling
        self.target = ceiling
        self.provider_limit: float | None = None
        self.bucket: float | None = None  # the largest ``remaining`` seen, scaled to the limit
        self.paused_until = -math.inf
        self.decreased_at = -math.inf
        self.eased_at = -math.inf
        self.succeeded_at = -math.inf
        self._evidence: deque[bool] = deque(maxlen=window)  # refused? since the last cut
        self._refused_in_a_row = 0
        # for reports
        self.cuts = 0          # multiplicative decreases (congestions)
        self.eases = 0         # gentle decreases on a low ``remaining``
        self.stray = 0         # 429s not taken as a rate signal
        self.beyond = 0        # 429s asking for a wait longer than ``beyond_wait``
        self.paused_seconds = 0.0
        self.capped_pauses = 0  # pauses a Retry-After above ``max_pause`` asked for

    def observe(self, signal: RateSignal, *, now: float, outcome: str = "success",
                sent_at: float | None = None) -> str:
        """Take one response into account. ``outcome``: ``success`` (2xx), ``refused`` (429
        rate limited) or ``error`` (anything else: only its limits are read). ``sent_at``:
        when the request was sent (None: as if just now). Returns what the response was
        taken for: ``success``, ``error``, ``stray``, ``congestion``, ``late`` (a refusal of
        a congestion already acted on) or ``beyond`` (a wait longer than ``beyond_wait``)."""
        self._follow_limit(signal.request_limit, now)
        if signal.requests_remaining is not None:
            self.bucket = max(self.bucket or 0.0, signal.requests_remaining)
        if outcome == "refused":
            return self._refused(signal, now, sent_at)
        if (signal.requests_remaining is not None and signal.requests_remaining < 1
                and self.provider_limit is None and signal.requests_reset is not None):
            self._pause(now + signal.requests_reset, now)
        if outcome != "success":
            return "error"
        if not self._sent_before_cut(sent_at):
            self._evidence.append(False)
            self._refused_in_a_row = 0
        if self._running_low(signal):
            if now - max(self.eased_at, self.decreased_at) >= 1.0:
                self.rate = max(self.floor, self.rate * self.ease)
                self.eased_at = now
                self.eases += 1
        else:
            covered = min(1.0, max(0.0, now - max(self.succeeded_at, self.decreased_at)))
            self.rate = min(self.target,
                            self.rate + self.target * covered / self.recovery_seconds)
        self.succeeded_at = now
        return "success"

    def _follow_limit(self, limit: float | None, now: float) -> None:
        if limit is None or limit == self.provider_limit:
            return
        if self.bucket is not None and self.provider_limit is not None:
            self.bucket *= limit / self.provider_limit  # both providers: bucket ~ limit
        self.provider_limit = limit
        self.target = min(self.ceiling, limit)
        if self.target < self.rate:
            self.decreased_at = now
        self.rate = self.target

    def _refused(self, signal: RateSignal, now: float, sent_at: float | None) -> str:
        if signal.retry_after is not None and signal.retry_after > self.beyond_wait:
            self.beyond += 1
            return "beyond"
        if not self._is_congestion(signal.requests_remaining, sent_at):
            self.stray += 1
            return "stray"
        if self._sent_before_cut(sent_at):
            return "late"
        self.rate = max(self.floor, self.rate * self.decrease)
        self.decreased_at = now
        self.cuts += 1
        self._evidence.clear()
        self._refused_in_a_row = 0
        if signal.retry_after is not None:
            self._pause(now + signal.retry_after, now)
        return "congestion"

    def _is_congestion(self, remaining: float | None, sent_at: float | None) -> bool:
        """Whether a 429 says the provider's bucket is empty (see the module docstring)."""
        if remaining is not None:
            return remaining < max(1.0, self.stray_remaining * (self.bucket or 0.0))
        if self._sent_before_cut(sent_at):
            return True  # the same congestion, seen late; nothing to count
        self._evidence.append(True)
        self._refused_in_a_row += 1
        refused = sum(self._evidence)
        return (self._refused_in_a_row >= self.run
                or (len(self._evidence) == self._evidence.maxlen
                    and refused >= self.share * len(self._evidence)))

    def _running_low(self, signal: RateSignal) -> bool:
        """Whether the provider's bucket is nearly drained while it refills within a minute
        (a quota counted over hours or a day, e.g. requests per day, drains by design:
        easing would not make it last, only slow the run)."""
        remaining, reset = signal.requests_remaining, signal.requests_reset
        return (remaining is not None and self.bucket is not None
                and remaining < self.low_remaining * self.bucket
                and (reset is None or reset <= 60.0))

    def _sent_before_cut(self, sent_at: float | None) -> bool:
        return sent_at is not None and sent_at < self.decreased_at

    def _pause(self, until: float, now: float) -> None:
        if until - now > self.max_pause:
            self.capped_pauses += 1
        until = min(until, now + self.max_pause)
        self.paused_seconds += max(0.0, until - max(now, self.paused_until))
        self.paused_until = max(self.paused_until, until)


class AdaptiveRateLimiter(RateLimiter):
    """A :class:`RateLimiter` whose rates follow :class:`RateController` (``observe`` every
    response's headers). ``wall`` gives the current UTC time, for Anthropic's reset moments."""

    def __init__(self, requests_per_minute: float, tokens_per_minute: float | None = None, *,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep,
                 wall: Wall = lambda: datetime.now(UTC),
                 read_headers: HeaderReader = read_retry_after, **controller) -> None:
        super().__init__(requests_per_minute, tokens_per_minute, clock=clock, sleep=sleep)
        self._read_headers = read_headers  # the provider's: each names its headers its way
        self.controller = RateController(requests_per_minute, **controller)
        self._token_ceiling = tokens_per_minute
        self._current_token_rate = tokens_per_minute  # the account's, as the headers last said
        self._wall = wall
        self.refusals = 0
        self.in_flight = 0  # requests inside sending()
        # the part of the account's rate this process sends at: processes sharing one
        # account each take theirs (:mod:`.quota`); the controller keeps the whole rate
        self.share = 1.0

    def set_share(self, share: float) -> None:
        """Send at ``share`` (0 < share <= 1) of the rate the controller allows, from now."""
        if not 0.0 < share <= 1.0:
            raise ValueError("a share of a rate lies in (0, 1]")
        if share != self.share:
            self.share = share
            self._apply_rates(self._current_token_rate)

    def _apply_rates(self, tokens: float | None) -> None:
        requests = self.controller.rate * self.share
        tokens = None if tokens is None else tokens * self.share
        if requests != self.requests_per_minute or tokens != self.tokens_per_minute:
            self.set_rates(requests, tokens)

    @contextmanager
    def sending(self) -> Iterator[None]:
        """Around one request, from sending to its response being observed: the requests in
        flight are what a ``remaining`` header may not count yet."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    def observe(self, headers: Mapping[str, str] | None, *, outcome: str = "success",
                sent_at: float | None = None) -> RateSignal:
        """Adapt to one response (see :meth:`RateController.observe`); returns what it said.
        Called inside :meth:`sending` of the request it answers."""
        signal = self._read_headers(headers, now=self._wall())
        now = self._clock()
        self.refusals += outcome == "refused"
        self.controller.observe(signal, now=now, outcome=outcome, sent_at=sent_at)
        if self._token_ceiling is not None and signal.token_limit is not None:
            self._current_token_rate = min(self._token_ceiling, signal.token_limit)
        self._apply_rates(self._current_token_rate)
        if signal.requests_remaining is not None:
            # what is left is the account's: this process may take its share of it
            self.hold_at_most(signal.requests_remaining * self.share
                              - max(0, self.in_flight - 1))
        if self.controller.paused_until > now:
            self.pause_until(self.controller.paused_until)
        return signal
