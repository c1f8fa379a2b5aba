"""Sources of an answer, as the rule-based gates take them: ``count`` numbered documents."""

from __future__ import annotations


def sources(count: int) -> list[dict[str, str]]:
    return [{"id": f"doc-{n}", "text": f"text of source {n}"} for n in range(1, count + 1)]
