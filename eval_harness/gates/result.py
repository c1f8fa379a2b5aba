"""The result every quality gate returns, rule-based or LLM-judged.

A gate is a pure function of one RAG answer that returns a :class:`GateResult`:

    passed = score is not None and score >= threshold

``score`` is ``None`` only when the gate could not score the answer at all (for an LLM gate: a
judge reply that did not parse after the one retry). An unscored answer never passes, and the
reason is kept in ``details["error"]`` so that reports can tell "unscored" from "scored 0".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class GateResult:
    """Outcome of one gate on one answer.

    ``details`` holds JSON-serialisable evidence (issues, counts, the offending snippets);
    ``latency_ms`` is wall time spent inside the gate and is left out of equality, because two
    runs on the same answer should compare equal.
    """

    gate: str
    score: float | None
    passed: bool
    threshold: float
    details: dict[str, Any] = field(default_factory=dict, hash=False)
    latency_ms: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(
                f"Gate {self.gate!r}: threshold must be in [0, 1], got {self.threshold}.")
        if self.score is None:
            if self.passed:
                raise ValueError(f"Gate {self.gate!r}: an unscored result cannot pass.")
        elif not 0.0 <= self.score <= 1.0:  # also rejects NaN
            raise ValueError(
                f"Gate {self.gate!r}: score must be in [0, 1] or None, got {self.score}.")

    @classmethod
    def unscored(cls, gate: str, threshold: float, reason: str, *, latency_ms: float = 0.0,
                 details: dict[str, Any] | None = None) -> GateResult:
        """A result for an answer the gate could not score: ``score=None``, never passed."""
        return cls(gate=gate, score=None, passed=False, threshold=threshold,
                   details={**(details or {}), "error": reason}, latency_ms=latency_ms)

    @property
    def scored(self) -> bool:
        return self.score is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON reports and storage."""
        return {"gate": self.gate, "score": self.score, "passed": self.passed,
                "threshold": self.threshold, "details": self.details,
                "latency_ms": self.latency_ms}


def check_threshold(gate: str, threshold: float) -> float:
    """Validate a threshold passed to a gate; the error names the gate and the bad value."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0.0 <= threshold <= 1.0:  # the comparison also rejects NaN
        raise ValueError(f"Gate {gate!r}: threshold must be a number in [0, 1], got {threshold!r}.")
    return float(threshold)
