"""How the report writes its figures as text: a missing or non-finite value is "n/a", never a
made-up number; times are UTC."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any


def num(value: Any, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals; "n/a" for None, text, NaN and infinities."""
    if value is None or isinstance(value, str):
        return "n/a"
    value = float(value)
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def usd(value: Any) -> str:
    return num(value, 4)


def count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def interval(low: float | None, high: float | None) -> str:
    return "n/a" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def when(moment: datetime | None) -> str:
    return "n/a" if moment is None else f"{utc(moment):%Y-%m-%d %H:%M}"


def utc(moment: Any) -> datetime:
    """A timestamp (datetime or pandas Timestamp, naive meaning UTC) as an aware UTC datetime."""
    if hasattr(moment, "to_pydatetime"):
        moment = moment.to_pydatetime()
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def shorten(text: str | None, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"
