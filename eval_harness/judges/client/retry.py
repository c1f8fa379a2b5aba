"""Classify provider errors, decide whether and how long to wait, and keep keys out of text.

Each provider classifies its own SDK's errors into one
:class:`~eval_harness.judges.client.providers.base.RetryDecision` (its ``classify``, by status
code, error code and exception type); what no provider claims is classified here (a plain
timeout or connection error, a bad response, a bug). The classes:

==============  ===========================================  =========
kind            what                                         retried
==============  ===========================================  =========
quota           the account has no quota or credit left      no, and the run stops
auth            401, 403: the key is rejected or lacks the   no, and the run stops
                permission
rate_limit      429                                          yes
overloaded      529                                          yes
server_error    500, 502, 503, 504                           yes
timeout         the SDK's request timeout                    yes
connection      connection refused / reset                   yes
client_error    any other 4xx (400, 404, 422, ...)           no
bad_response    a 2xx whose body is not the API's JSON       no
==============  ===========================================  =========

``quota`` is checked first, because providers send it with the status of a rate limit:
OpenAI's 429 ``insufficient_quota`` (also ``billing_hard_limit_reached``,
``billing_not_active``), Anthropic's 402 / ``billing_error``, its 429 spend limits
(``enforced_spend_limit_reached``, ``contract_spend_limit_reached``) and its 400 "credit
balance is too low" (recognised by its wording, the only sign older API versions give).
Waiting cannot fix any of them, so the pipeline stops the run (see
:class:`~eval_harness.judges.client.stops.QuotaExhausted`) instead of failing every later call the
same way. ``auth`` stops the run for the same reason (see
:class:`~eval_harness.judges.client.stops.AuthenticationRejected`): every later call would be
refused with the same key.

Backoff before retry ``n`` (1-based): ``base * 2**(n-1)`` times a uniform jitter factor in
``[1 - jitter, 1 + jitter]``, and never less than the server's ``Retry-After`` (or
``retry-after-ms``). Attempts are capped at ``1 + max_retries``; a demanded wait longer than
``max_wait_seconds`` ends the call instead of being shortened. So a call's total time is
capped too: at most ``max_retries`` waits of at most ``max_wait_seconds`` each, plus
``1 + max_retries`` requests of at most ``judges.timeout_seconds`` each (defaults: 4 waits
of 1, 2, 4, 8 s unless the server asks for more, at most 120 s each; 5 requests of 60 s).

Why not tenacity: the loop is the smallest part of this policy. The classification, the
Retry-After floor, our +-20 % jitter (tenacity's are full or additive), giving up when the
server asks for more than ``max_wait_seconds``, an ``api_retry_log`` row per retry, taking
the rate limiter and a concurrency slot again on every attempt, and stopping the run on
``quota`` would all be our callbacks around ``AsyncRetrying``; it would replace about fifteen
lines of loop in :mod:`.runner` with a dependency, its ``RetryError`` wrapping and a clock of
its own (``stop_after_delay`` reads ``time.monotonic``, not our injected clock).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from eval_harness.judges.client.providers import provider as provider_named
from eval_harness.judges.client.providers.base import BadProviderResponse
from eval_harness.settings.judges import RetrySettings

if TYPE_CHECKING:
    from eval_harness.judges.client.providers.base import Provider


@dataclass(frozen=True)
class ErrorInfo:
    """How one call's error ended up: the provider's decision and the sanitised message."""

    kind: str
    retryable: bool
    status_code: int | None
    retry_after: float | None  # seconds the server asked us to wait, if it said
    message: str               # one line, secrets removed
    code: str | None = None    # the provider's error code, where it matters (kind "quota")


def classify_error(exc: BaseException, provider: "Provider | str",
                   *, secrets: Iterable[str | None] = ()) -> ErrorInfo:
    """The class of an error of ``provider`` (see module docstring); ``message`` is
    sanitised."""
    message = sanitize(_first_line(exc), secrets)
    if isinstance(provider, str):
        provider = provider_named(provider)
    decision = provider.classify(exc)
    if decision is not None:
        return ErrorInfo(decision.kind, decision.retry, decision.status_code,
                         decision.retry_after, message, decision.code)
    if isinstance(exc, TimeoutError):
        return ErrorInfo("timeout", True, None, None, message)
    if isinstance(exc, ConnectionError):
        return ErrorInfo("connection", True, None, None, message)
    if isinstance(exc, BadProviderResponse):
        return ErrorInfo("bad_response", False, None, None, message)
    return ErrorInfo("other", False, None, None, f"{type(exc).__name__}: {message}")


class RetryPolicy:
    """How long to wait before retry ``n``; ``rng`` is injectable for exact tests."""

    def __init__(self, settings: RetrySettings, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._rng = rng or random.Random()

    @property
    def max_retries(self) -> int:
        return self.settings.max_retries

    def backoff(self, retry_number: int) -> float:
        base = self.settings.base_delay_seconds * 2 ** (retry_number - 1)
        jitter = self.settings.jitter
        return base * self._rng.uniform(1.0 - jitter, 1.0 + jitter)

    def wait(self, retry_number: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry ``retry_number``, or None: give up (the server asks
        for longer than ``max_wait_seconds``)."""
        wait = max(self.backoff(retry_number), retry_after or 0.0)
        return None if wait > self.settings.max_wait_seconds else wait

    def asks_too_long(self, retry_after: float | None) -> bool:
        """Whether a server's ``Retry-After`` is beyond what a call waits."""
        return retry_after is not None and retry_after > self.settings.max_wait_seconds


@dataclass
class WaitAsked:
    """Calls to one provider that ended because its server asked to wait too long."""

    longest_s: float = 0.0   # the longest Retry-After asked
    calls_given_up: int = 0


def wait_asked_notice(provider: str, asked: WaitAsked, *, max_wait_s: float,
                      paused_s: float | None = None) -> str:
    """The one sentence a run says about ``provider``'s server asking for waits beyond
    ``max_wait_s``; ``paused_s``: sending to it was paused that long at a time (the cap of a
    provider-wide pause), if it was."""
    calls = "1 call was" if asked.calls_given_up == 1 else f"{asked.calls_given_up} calls were"
    text = (f"the {provider} server asked to wait {asked.longest_s:g} s "
            f"({human_duration(asked.longest_s)}) before retrying; calls wait at most "
            f"{max_wait_s:g} s (judges.retry.max_wait_seconds), so {calls} given up: run "
            "again later")
    if paused_s is not None:
        text += f"; sending to it paused {paused_s:g} s at a time"
    return text


def human_duration(seconds: float) -> str:
    """``seconds`` in the largest whole unit that fits: "1 day", "2 h", "5 min", "30 s"."""
    for unit, size in (("day", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            amount = f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"
            return f"{amount} {unit}" + ("s" if unit == "day" and amount != "1" else "")
    return f"{seconds:g} s"


_PATTERNS = (
    (re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"), r"\1***"),
    (re.compile(r"(?i)(x-api-key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"), r"\1***"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), "sk-***"),
)


def sanitize(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every given secret and anything shaped like a key replaced by ***."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:300]
