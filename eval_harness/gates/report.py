"""Per-gate summaries of a window of answers, the gate verdict, and their text and JSON forms.

The rule, for each gate over every answer of the window (stored results included, not only
those evaluated by this run):

- an answer passes when its current result has a score and ``score >= threshold``;
- an answer without a score counts as NOT passing: the gate could not score it (a judge that
  failed, a row the gate could not read) or it has no current result. Such answers are also
  counted separately as ``unscored``;
- ``pass_rate = passed answers / answers``, with a Wilson 95% interval;
- the check passes when ``answers > 0`` and ``pass_rate >= min_pass_rate``. A window without
  answers fails: there is no evidence that the answers are good (a broken view, or an import
  into the wrong day, must not turn CI green);
- the gate verdict fails when any blocking check fails; failing non-blocking checks warn.

Figures are reported on the scale each gate is configured in: answer_reward's threshold and
mean on the judge's reward scale -1..+1 (config.yaml's ``threshold: 0.30``), though its stored
scores are on 0..1 like every gate's (see :func:`eval_harness.gates.registry.configured_scale`).

:class:`GateReport` is the one object every output is built from: the table and the JSON of
``eval-harness gate``, JUnit XML and the Markdown summary, the checks' metadata.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from eval_harness.escaping.visible import visible
from eval_harness.gates.gate import ANSWER_REWARD
from eval_harness.gates.window import TimeWindow
from eval_harness.metrics.proportions import wilson_interval

WORST_LISTED = 10     # worst answer ids shown per gate
FAILING_LISTED = 100  # failing answer ids listed per gate; failing_count is always complete


@dataclass(frozen=True)
class GateSummary:
    """The figures of one gate over one window; ``passed`` is the check's verdict.

    ``threshold`` and ``mean_score`` are on the gate's configured scale (:attr:`scale`).
    """

    gate: str
    threshold: float             # as configured: answer_reward's on the reward scale -1..1
    min_pass_rate: float
    blocking: bool
    answers: int                 # answers in the window
    passed_answers: int          # of those, scored and at or above the threshold
    unscored: int                # no score (unscored, or no current result)
    evaluated_now: int           # answers this run evaluated (0 on a rerun without changes)
    mean_score: float | None     # over scored answers, on the scale of threshold; None: none
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    worst_answer_ids: tuple[str, ...] = ()      # lowest scores first, unscored before all
    failing_answer_ids: tuple[str, ...] = ()    # at most FAILING_LISTED, worst first
    failing_count: int = 0
    pass_rate_interval: tuple[float, float] | None = field(default=None)
    seconds: float = 0.0         # time this run spent scoring (sum over the answers it scored)
    decided_by: str = ""         # "rules, no judge", "judge 1 openai:gpt-4o", ... (Gate)

    def __post_init__(self) -> None:
        if self.pass_rate_interval is None and self.answers > 0:
            object.__setattr__(self, "pass_rate_interval",
                               wilson_interval(self.passed_answers, self.answers))

    @property
    def pass_rate(self) -> float | None:
        return self.passed_answers / self.answers if self.answers else None

    @property
    def passed(self) -> bool:
        return self.answers > 0 and self.passed_answers / self.answers >= self.min_pass_rate

    @property
    def severity(self) -> str:
        return "ERROR" if self.blocking else "WARN"

    @property
    def measure(self) -> str:
        """What ``threshold`` and ``mean_score`` measure: "reward" or "score"."""
        return "reward" if self.gate == ANSWER_REWARD else "score"

    @property
    def scale(self) -> str:
        """The range of ``threshold`` and ``mean_score``, e.g. "reward -1..1"."""
        return "reward -1..1" if self.measure == "reward" else "score 0..1"

    @property
    def verdict(self) -> str:
        """One sentence for the check's description and the table."""
        if self.answers == 0:
            return "no answers in the window: nothing shows the answers are good"
        comparison = ">=" if self.passed else "<"
        return (f"{self.passed_answers} of {self.answers} answers reach {self.measure} "
                f"{self.threshold:g} (pass rate {self.pass_rate:.3f} {comparison} "
                f"{self.min_pass_rate:g})")

    @property
    def decision(self) -> str:
        """The verdict and who decided it, for an output's one line per gate, e.g. "... (pass
        rate 0.300 < 0.9); decided by judge 1 local:lexical, the offline stand-in (...)"."""
        return f"{self.verdict}; decided by {self.decided_by}" if self.decided_by \
            else self.verdict

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["worst_answer_ids"] = list(self.worst_answer_ids)
        data["failing_answer_ids"] = list(self.failing_answer_ids)
        data["pass_rate_interval"] = (list(self.pass_rate_interval)
                                      if self.pass_rate_interval else None)
        data.update(pass_rate=self.pass_rate, passed=self.passed, severity=self.severity,
                    scale=self.scale)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateSummary:
        names = set(cls.__dataclass_fields__)
        values = {key: value for key, value in data.items() if key in names}
        for key in ("worst_answer_ids", "failing_answer_ids"):
            values[key] = tuple(values.get(key) or ())
        if values.get("pass_rate_interval") is not None:
            values["pass_rate_interval"] = tuple(values["pass_rate_interval"])
        return cls(**values)


@dataclass(frozen=True)
class AnswersElsewhere:
    """The answers of the whole relation, when a window has none: how many, first and last
    UTC day (None when there are none at all)."""

    answers: int
    first_day: date | None
    last_day: date | None

    def sentence(self, window: TimeWindow) -> str:
        """E.g. ``no answers in the window 2026-12-01 (UTC); 40 answers exist from 2025-03-01
        to 2025-03-07: gate --since 2025-03-01``."""
        where = (f"{window.partition} (UTC)" if window.partition
                 else f"since {window.start.isoformat()}")
        lead = f"no answers in the window {where}"
        if not self.answers or self.first_day is None:
            return (f"{lead}; the answers relation holds none at all: import them "
                    "(`eval-harness answers import FILE`) or map yours (quality_gates.answers)")
        days = (f"on {self.first_day}" if self.first_day == self.last_day
                else f"from {self.first_day} to {self.last_day}")
        return (f"{lead}; {self.answers:,} answer{'s' if self.answers != 1 else ''} exist "
                f"{days} (UTC): gate --since {self.first_day}")


@dataclass(frozen=True)
class GateReport:
    """Every enabled gate's summary for one window: the input of every output format."""

    window: TimeWindow
    summaries: tuple[GateSummary, ...]
    run_id: str | None = None
    elsewhere: AnswersElsewhere | None = None  # set when the window has no answer

    @property
    def empty_window_note(self) -> str | None:
        """Where the answers are, when the window holds none (None otherwise)."""
        return None if self.elsewhere is None else self.elsewhere.sentence(self.window)

    @property
    def passed(self) -> bool:
        """True when every blocking check passes (warnings do not fail the verdict)."""
        return all(s.passed for s in self.summaries if s.blocking)

    @property
    def failed_blocking(self) -> list[str]:
        return [s.gate for s in self.summaries if s.blocking and not s.passed]

    @property
    def warnings(self) -> list[str]:
        return [s.gate for s in self.summaries if not s.blocking and not s.passed]

    def to_dict(self) -> dict[str, Any]:
        data = {"window": self.window.to_dict(), "run_id": self.run_id, "passed": self.passed,
                "failed_blocking": self.failed_blocking, "warnings": self.warnings,
                "checks": [s.to_dict() for s in self.summaries]}
        if self.elsewhere is not None:
            data["no_answers"] = self.empty_window_note
            data["answers_elsewhere"] = {
                "answers": self.elsewhere.answers,
                "first_day": self.elsewhere.first_day and self.elsewhere.first_day.isoformat(),
                "last_day": self.elsewhere.last_day and self.elsewhere.last_day.isoformat()}
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


def _figure(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_gate_table(report: GateReport) -> str:
    """The human-readable verdict: one row per gate, then the failing answers (each id on
    the line as :func:`~eval_harness.escaping.visible.visible` shows it)."""
    header = (f"{'gate':<18} {'status':<6} {'blocking':<8} {'threshold':>9} {'pass rate':>9} "
              f"{'95% CI':>15} {'min':>5} {'answers':>7} {'unscored':>8} {'new':>5} "
              f"{'mean':>6} {'p50 ms':>7} {'p95 ms':>7}")
    lines = [f"quality gates: {report.window.describe()}", header + "  decided by"]
    for s in report.summaries:
        status = "PASS" if s.passed else ("FAIL" if s.blocking else "WARN")
        interval = (f"[{s.pass_rate_interval[0]:.3f}, {s.pass_rate_interval[1]:.3f}]"
                    if s.pass_rate_interval else "-")
        lines.append(
            f"{s.gate:<18} {status:<6} {'yes' if s.blocking else 'no':<8} "
            f"{s.threshold:>9g} {_figure(s.pass_rate):>9} {interval:>15} "
            f"{s.min_pass_rate:>5.2f} {s.answers:>7} {s.unscored:>8} {s.evaluated_now:>5} "
            f"{_figure(s.mean_score):>6} {_figure(s.latency_p50_ms, 2):>7} "
            f"{_figure(s.latency_p95_ms, 2):>7}  {s.decided_by or '-'}")
    for s in report.summaries:
        if s.answers == 0:
            if not report.empty_window_note:  # said once below, with where the answers are
                lines.append(f"{s.gate}: {s.verdict}")
        elif s.failing_count:
            shown = ", ".join(visible(i) for i in s.failing_answer_ids[:WORST_LISTED])
            more = s.failing_count - min(len(s.failing_answer_ids), WORST_LISTED)
            lines.append(f"{s.gate}: {s.failing_count} failing answer(s): {shown}"
                         + (f" and {more} more (--json lists up to {FAILING_LISTED})"
                            if more > 0 else ""))
    if report.empty_window_note:
        lines.append(report.empty_window_note)
    rewards = [s.gate for s in report.summaries if s.measure == "reward"]
    if rewards:  # its threshold and mean are not on the 0..1 scale of the other rows
        lines.append(f"{', '.join(rewards)}: threshold and mean on the reward scale -1..1")
    if report.passed:
        tail = "verdict: PASS"
        if report.warnings:
            tail += f" (warnings: {', '.join(report.warnings)})"
    else:
        tail = f"verdict: FAIL (blocking: {', '.join(report.failed_blocking)})"
    lines.append(tail)
    return "\n".join(lines)
