"""A rate limiter that follows what the provider says about its limits, within our ceiling.

The configured ``judges.rate_limits.<provider>`` are a ceiling: the client never sends faster.
Below it, every provider response (success or refusal) moves the request rate:

* **The provider's limit.** ``x-ratelimit-limit-requests`` (OpenAI) or
  ``anthropic-ratelimit-requests-limit`` (Anthropic) lower than the ceiling becomes the
  target rate. When the advertised limit changes, the rate jumps to the new target, down or
  up (never above the ceiling): the provider has said what it accepts, so there is nothing to
  probe. The tokens variant (``x-ratelimit-limit-tokens``, ``anthropic-ratelimit-tokens-limit``)
  lowers a configured tokens-per-minute limit the same way; with no configured token limit
  (``tokens_per_minute: null``) none is imposed.
* **What is left.** ``remaining`` R caps what the client may send at once: its bucket holds
  at most R minus the other requests in flight (sent, not yet answered: the server may not
  have counted them yet) from then on, and refills at the rate. Without it, a lowered limit
  would still see the client's stored burst sent into a provider bucket that the old rate
  already drained. Both providers replenish continuously (token buckets), so R = 0 costs one
  request's worth of time at our rate, not a wait for ``reset``; only when no limit was
  said does R = 0 pause until ``reset`` (at most ``max_pause``).
* **A 429 (rate limited).** Sending pauses until its ``Retry-After`` (capped at
  ``max_pause`` seconds) and the rate is cut multiplicatively (``decrease``, 0.5). One
  refusal cuts once: refusals of requests sent before the last cut are the same congestion
  seen late (TCP's "once per round trip"), so a burst of them does not collapse the rate.
* **Successes** raise the rate additively towards the target, in proportion to the time
  they cover: ``target / recovery_seconds`` per second (from half the target back to it in
  ``recovery_seconds / 2``, 10 s by default), counted from the previous success (at most one
  second of it: a long idle time is no evidence the provider would take more). Counting
  successes instead would recover 50 times faster at 3,000/min than at 60/min.

Values that do not parse (not a number, negative, a limit of 0, a date that is not RFC 3339)
are ignored: a proxy's odd header never stops a run. Quota refusals (429
``insufficient_quota``) stop the run elsewhere (:mod:`.runner`) and are not rate signals.

Why AIMD with the headers on top: inspect_ai and promptfoo adapt concurrency to 429s alone
(halve on a refusal, grow back slowly); that finds a limit nobody advertises (a gateway, a vLLM
server) but oscillates around it and pays refusals to learn it. The headers say the limit
outright, so the rate moves to it before the first refusal; AIMD stays as the fallback.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterator, Mapping

from eval_harness.judges.limiter import Clock, RateLimiter, Sleep
from eval_harness.judges.retry import retry_after_seconds

Wall = Callable[[], datetime]
_PREFIXES = (("x-ratelimit-{}-requests", "x-ratelimit-{}-tokens"),                 # OpenAI
             ("anthropic-ratelimit-requests-{}", "anthropic-ratelimit-tokens-{}"))  # Anthropic
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@dataclass(frozen=True)
class RateSignal:
    """What one response says about the provider's limits (None: not said, or malformed)."""

    request_limit: float | None = None     # requests per minute
    requests_remaining: float | None = None
    requests_reset: float | None = None    # seconds until fully replenished
    token_limit: float | None = None       # tokens per minute
    retry_after: float | None = None       # seconds


def parse_reset(value: str | None, *, now: datetime) -> float | None:
    """Seconds until a reset given as OpenAI does (``"1s"``, ``"6m0s"``, ``"20ms"``, a bare
    number of seconds) or as Anthropic does (an RFC 3339 moment); None if malformed."""
    if not value or not (text := value.strip()):
        return None
    try:
        return _non_negative(float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, (moment - now).total_seconds())


def _non_negative(value: float) -> float | None:
    return value if math.isfinite(value) and value >= 0 else None


def _number(value: str | None, *, positive: bool = False) -> float | None:
    try:
        number = _non_negative(float(value)) if value is not None else None
    except ValueError:
        return None
    return None if number is None or (positive and number == 0) else number


def read_rate_headers(headers: Mapping[str, str] | None, *, now: datetime | None = None
                      ) -> RateSignal:
    """The rate signal in a response's headers (either wire format; OpenAI's if both)."""
    if not headers:
        return RateSignal()
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    now = now or datetime.now(timezone.utc)
    for requests, tokens in _PREFIXES:
        if any(requests.format(w) in lowered or tokens.format(w) in lowered
               for w in ("limit", "remaining")):
            break
    else:
        requests, tokens = _PREFIXES[0]
    return RateSignal(
        request_limit=_number(lowered.get(requests.format("limit")), positive=True),
        requests_remaining=_number(lowered.get(requests.format("remaining"))),
        requests_reset=parse_reset(lowered.get(requests.format("reset")), now=now),
        token_limit=_number(lowered.get(tokens.format("limit")), positive=True),
        retry_after=retry_after_seconds(lowered))


class RateController:
    """The request rate (per minute) that the responses so far call for; pure, no clock of
    its own: every observation says when it happened (see the module docstring)."""

    def __init__(self, ceiling: float, *, decrease: float = 0.5,
                 recovery_seconds: float = 20.0, max_pause: float = 60.0) -> None:
        if ceiling <= 0 or not 0 < decrease < 1 or recovery_seconds <= 0:
            raise ValueError("an adaptive rate needs a positive ceiling, a decrease in (0, 1) "
                             "and a positive recovery time")
        self.ceiling = ceiling
        self.decrease, self.max_pause = decrease, max_pause
        self.recovery_seconds = recovery_seconds
        self.floor = min(1.0, ceiling)
        self.rate = ceiling
        self.target = ceiling
        self.provider_limit: float | None = None
        self.paused_until = -math.inf
        self.decreased_at = -math.inf
        self.succeeded_at = -math.inf
        self.cuts = 0  # multiplicative decreases, for reports

    def observe(self, signal: RateSignal, *, now: float, outcome: str = "success",
                sent_at: float | None = None) -> None:
        """Take one response into account. ``outcome``: ``success`` (2xx), ``refused`` (429
        rate limited) or ``error`` (anything else: only its limits are read). ``sent_at``:
        when the refused request was sent (None: as if just now)."""
        limit = signal.request_limit
        if limit is not None and limit != self.provider_limit:
            self.provider_limit = limit
            self.target = min(self.ceiling, limit)
            if self.target < self.rate:
                self.decreased_at = now
            self.rate = self.target
        if outcome == "refused":
            if signal.retry_after is not None:
                self._pause(now + signal.retry_after, now)
            if sent_at is None or sent_at >= self.decreased_at:
                self.rate = max(self.floor, self.rate * self.decrease)
                self.decreased_at = now
                self.cuts += 1
            return
        if (signal.requests_remaining is not None and signal.requests_remaining < 1
                and self.provider_limit is None and signal.requests_reset is not None):
            self._pause(now + signal.requests_reset, now)
        if outcome == "success":
            covered = min(1.0, max(0.0, now - max(self.succeeded_at, self.decreased_at)))
            self.rate = min(self.target,
                            self.rate + self.target * covered / self.recovery_seconds)
            self.succeeded_at = now

    def _pause(self, until: float, now: float) -> None:
        self.paused_until = max(self.paused_until, min(until, now + self.max_pause))


class AdaptiveRateLimiter(RateLimiter):
    """A :class:`RateLimiter` whose rates follow :class:`RateController` (``observe`` every
    response's headers). ``wall`` gives the current UTC time, for Anthropic's reset moments."""

    def __init__(self, requests_per_minute: float, tokens_per_minute: float | None = None, *,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep,
                 wall: Wall = lambda: datetime.now(timezone.utc), **controller) -> None:
        super().__init__(requests_per_minute, tokens_per_minute, clock=clock, sleep=sleep)
        self.controller = RateController(requests_per_minute, **controller)
        self._token_ceiling = tokens_per_minute
        self._wall = wall
        self.refusals = 0
        self.in_flight = 0  # requests inside sending()

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
        signal = read_rate_headers(headers, now=self._wall())
        now = self._clock()
        self.refusals += outcome == "refused"
        self.controller.observe(signal, now=now, outcome=outcome, sent_at=sent_at)
        tokens = self.tokens_per_minute
        if self._token_ceiling is not None and signal.token_limit is not None:
            tokens = min(self._token_ceiling, signal.token_limit)
        if (self.controller.rate != self.requests_per_minute
                or tokens != self.tokens_per_minute):
            self.set_rates(self.controller.rate, tokens)
        if signal.requests_remaining is not None:
            self.hold_at_most(signal.requests_remaining - max(0, self.in_flight - 1))
        if self.controller.paused_until > now:
            self.pause_until(self.controller.paused_until)
        return signal
