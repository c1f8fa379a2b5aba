"""One line of ``eval-harness doctor``: a status, the check's name and what it found.

Kept apart so the doctor's store, dataset and judge checks (``doctor``,
``doctor_datasets``, ``doctor_judges``) all build the same lines without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval_harness.escaping.visible import visible

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"


@dataclass(frozen=True)
class Check:
    status: str   # ok | warn | FAIL | skip
    name: str
    detail: str

    def line(self) -> str:
        """The check's one line: whatever its detail quotes (a dataset or relation name, a
        server's error) stays on it, control characters shown as escapes."""
        return f"{self.status:<5} {self.name:<12} {visible(self.detail)}"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
