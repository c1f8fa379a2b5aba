"""What a provider's response headers say about its rate limits, in either wire format.

OpenAI sends ``x-ratelimit-limit-requests`` / ``-remaining-requests`` / ``-reset-requests``
(the reset a Go-style duration, ``"6m0s"``, ``"20ms"``) and the same for tokens; Anthropic
sends ``anthropic-ratelimit-requests-limit`` / ``-remaining`` / ``-reset`` (the reset an RFC
3339 moment) and the same for tokens. Both send ``retry-after`` on a 429. Values that do not
parse (not a number, negative, a limit of 0, a date that is not RFC 3339) are read as not said:
a proxy's odd header never stops a run. :mod:`.adaptive` acts on what is read here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping

from eval_harness.judges.client.retry import retry_after_seconds

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
