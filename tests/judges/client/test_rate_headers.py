"""What a provider's rate-limit headers say (eval_harness.judges.client.rate_headers): each
reset format, retry-after in its three spellings, and every malformed value read as not said,
so a proxy's odd header never stops a run. Pure: headers in, numbers out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from eval_harness.judges.client.rate_headers import (
    RateSignal,
    parse_reset,
    read_rate_signal,
    read_retry_after,
    retry_after_seconds,
)

pytestmark = pytest.mark.unit

NOW = datetime(2025, 5, 6, 10, 0, 0, tzinfo=UTC)
OPENAI = {"requests": "x-ratelimit-{}-requests", "tokens": "x-ratelimit-{}-tokens"}


@pytest.mark.parametrize("value, seconds", [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5),  # Go durations
    ("2.5", 2.5), ("0", 0.0),                                            # bare seconds
    ("2025-05-06T10:00:30Z", 30.0), ("2025-05-06T12:00:30+02:00", 30.0),  # RFC 3339
    ("2025-05-06T09:59:00Z", 0.0),                                       # past: now
])
def test_a_reset_in_each_format_is_seconds_from_now(value, seconds):
    assert parse_reset(value, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [None, "", "  ", "-1", "nan", "inf", "soon", "1x", "6m0",
                                   "2025-05-06T10:00:30"])  # the last: a moment without a zone
def test_a_malformed_reset_is_not_said(value):
    assert parse_reset(value, now=NOW) is None


def test_retry_after_in_milliseconds_seconds_or_an_http_date():
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    later = datetime.now(UTC) + timedelta(seconds=120)
    assert retry_after_seconds({"retry-after": format_datetime(later, usegmt=True)}) \
        == pytest.approx(120, abs=2)
    assert retry_after_seconds({"retry-after": "tomorrow"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None


def test_openais_headers_read_case_insensitively():
    signal = read_rate_signal({"X-RateLimit-Limit-Requests": "500",
                               "x-ratelimit-remaining-requests": "499",
                               "x-ratelimit-reset-requests": "120ms",
                               "x-ratelimit-limit-tokens": "30000", "Retry-After": "2"},
                              now=NOW, **OPENAI)
    assert signal == RateSignal(request_limit=500.0, requests_remaining=499.0,
                                requests_reset=pytest.approx(0.12), token_limit=30000.0,
                                retry_after=2.0)


def test_a_limit_of_zero_or_a_value_that_is_no_number_is_not_said():
    signal = read_rate_signal({"x-ratelimit-limit-requests": "0",
                               "x-ratelimit-remaining-requests": "0",
                               "x-ratelimit-limit-tokens": "lots"}, now=NOW, **OPENAI)
    # a limit of 0 is no limit a run could keep to; nothing remaining is a real reading
    assert signal == RateSignal(requests_remaining=0.0)
    assert read_rate_signal({}, now=NOW, **OPENAI) == RateSignal()
    assert read_rate_signal(None, **OPENAI) == RateSignal()


def test_read_retry_after_reads_nothing_else():
    headers = {"x-ratelimit-limit-requests": "500", "Retry-After": "7"}
    assert read_retry_after(headers) == RateSignal(retry_after=7.0)
    assert read_retry_after(None) == RateSignal()
