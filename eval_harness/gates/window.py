"""What the gates read: one stored answer, and the time window a gate run reads answers from.

Plain values, below everything else of the gates: the answers relation
(:mod:`eval_harness.gates.answers`), its SQL (:mod:`eval_harness.gates.sql`), the gates and the
runner all speak of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any


@dataclass(frozen=True)
class Answer:
    """One stored answer, as the gates read it."""

    id: str
    query: str
    answer: str
    sources: Sequence[Mapping[str, Any]]
    created_at: datetime
    content_hash: str  # of query, answer and sources (sql.content_hash_sql)


@dataclass(frozen=True)
class TimeWindow:
    """Answers with ``start <= created_at < end``; ``end`` None means no upper bound."""

    start: datetime
    end: datetime | None = None
    partition: str | None = None  # "YYYY-MM-DD" when the window is one daily partition

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or (self.end is not None and self.end.tzinfo is None):
            raise ValueError("A time window needs timezone-aware timestamps.")

    @classmethod
    def day(cls, day: date | str) -> TimeWindow:
        """The UTC day ``day`` (a date or ``YYYY-MM-DD``), as a daily partition."""
        if isinstance(day, str):
            try:
                day = date.fromisoformat(day)
            except ValueError:
                raise ValueError(f"'{day}' is not a date YYYY-MM-DD.") from None
        start = datetime.combine(day, time(0), tzinfo=timezone.utc)
        return cls(start, start + timedelta(days=1), partition=day.isoformat())

    @classmethod
    def since(cls, start: datetime) -> TimeWindow:
        """Every answer created at or after ``start`` (timezone-aware)."""
        return cls(start)

    def describe(self) -> str:
        if self.partition:
            return f"partition {self.partition} (UTC)"
        return f"answers since {self.start.isoformat()}"

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "start": self.start.isoformat(),
                "end": self.end.isoformat() if self.end else None}
