"""Classify provider errors, decide whether and how long to wait, and keep keys out of text.

Classes (both SDKs, by status code and exception type):

==============  ===========================================  =========
kind            what                                         retried
==============  ===========================================  =========
rate_limit      429                                          yes
overloaded      529                                          yes
server_error    500, 502, 503, 504                           yes
timeout         the SDK's request timeout                    yes
connection      connection refused / reset                   yes
client_error    any other 4xx (400, 401, 403, 404, ...)      no
bad_response    a 2xx whose body is not the API's JSON       no
==============  ===========================================  =========

Backoff before retry ``n`` (1-based): ``base * 2**(n-1)`` times a uniform jitter factor in
``[1 - jitter, 1 + jitter]``, and never less than the server's ``Retry-After`` (or
``retry-after-ms``). Attempts are capped at ``1 + max_retries``; a demanded wait longer than
``max_wait_seconds`` ends the call instead of being shortened.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Iterable

import anthropic
import openai

from eval_harness.judges.config import RetrySettings

RETRYABLE_STATUS = {429: "rate_limit", 529: "overloaded", 500: "server_error",
                    502: "server_error", 503: "server_error", 504: "server_error"}
_TIMEOUTS = (anthropic.APITimeoutError, openai.APITimeoutError, TimeoutError)
_CONNECTION = (anthropic.APIConnectionError, openai.APIConnectionError, ConnectionError)
_STATUS = (anthropic.APIStatusError, openai.APIStatusError)


class BadProviderResponse(Exception):
    """A successful HTTP status whose body is not what the API promises (e.g. HTML)."""


@dataclass(frozen=True)
class ErrorInfo:
    kind: str
    retryable: bool
    status_code: int | None
    retry_after: float | None  # seconds the server asked us to wait, if it said
    message: str               # one line, secrets removed


def classify_error(exc: BaseException, *, secrets: Iterable[str | None] = ()) -> ErrorInfo:
    """The class of a provider error (see module docstring); ``message`` is sanitised."""
    message = sanitize(_first_line(exc), secrets)
    if isinstance(exc, _STATUS):
        status = int(exc.status_code)
        kind = RETRYABLE_STATUS.get(status, "client_error" if 400 <= status < 500
                                    else "server_error")
        return ErrorInfo(kind, status in RETRYABLE_STATUS, status,
                         retry_after_seconds(exc.response.headers), message)
    if isinstance(exc, _TIMEOUTS):
        return ErrorInfo("timeout", True, None, None, message)
    if isinstance(exc, _CONNECTION):
        return ErrorInfo("connection", True, None, None, message)
    if isinstance(exc, BadProviderResponse):
        return ErrorInfo("bad_response", False, None, None, message)
    return ErrorInfo("other", False, None, None, f"{type(exc).__name__}: {message}")


def retry_after_seconds(headers) -> float | None:
    """``retry-after-ms`` (milliseconds) or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return max(0.0, (moment - datetime.now(timezone.utc)).total_seconds())


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
