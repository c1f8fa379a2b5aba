"""What a provider's response headers say about its rate limits: the part every format shares.

Each provider reads its own header names (see ``read_rate_headers`` of
:mod:`eval_harness.judges.client.providers.openai` and ``.anthropic``) with
:func:`read_rate_signal`: a limit, what remains and when it resets, for requests and for
tokens, and the ``retry-after`` every provider sends on a 429. A reset may be a Go-style
duration (``"6m0s"``, ``"20ms"``), a number of seconds or an RFC 3339 moment. Values that do
not parse (not a number, negative, a limit of 0, a date that is not RFC 3339) are read as not
said: a proxy's odd header never stops a run. :mod:`.adaptive` acts on what is read here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@dataclass(frozen=True)
class RateSignal:
    """What one response says about the provider's limits (None: not said, or malformed)."""

    request_limit: float | None = None     # requests per minute
    requests_remaining: float | None = None
    requests_reset: float | None = None    # seconds until fully replenished
    token_limit: float | None = None       # tokens per minute
    retry_after: float | None = None       # seconds


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
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


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


def read_rate_signal(headers: Mapping[str, str] | None, *, requests: str, tokens: str,
                     now: datetime | None = None) -> RateSignal:
    """The rate signal in ``headers`` whose names are ``requests`` / ``tokens`` with ``{}``
    standing for ``limit``, ``remaining`` and ``reset`` (e.g. ``x-ratelimit-{}-requests``);
    header names are matched case-insensitively."""
    if not headers:
        return RateSignal()
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    now = now or datetime.now(UTC)
    return RateSignal(
        request_limit=_number(lowered.get(requests.format("limit")), positive=True),
        requests_remaining=_number(lowered.get(requests.format("remaining"))),
        requests_reset=parse_reset(lowered.get(requests.format("reset")), now=now),
        token_limit=_number(lowered.get(tokens.format("limit")), positive=True),
        retry_after=retry_after_seconds(lowered))


def read_retry_after(headers: Mapping[str, str] | None, *,
                     now: datetime | None = None) -> RateSignal:
    """Only the ``retry-after`` of ``headers``: the reading of a limiter not told the
    provider's header names."""
    if not headers:
        return RateSignal()
    return RateSignal(retry_after=retry_after_seconds({str(k).lower(): str(v)
                                                       for k, v in headers.items()}))
