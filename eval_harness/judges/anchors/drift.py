"""The drift check: each judge re-judging the frozen anchors compared with its frozen self,
and the rule the ``judge_drift`` asset check applies to those comparisons.

A comparison (:func:`compare_judge`) counts only the anchors scored both when frozen and now:
the label flip rate with its Wilson interval, the mean paired score shift (now - frozen) with
its Student t interval (:mod:`eval_harness.metrics.drift`), and the share of anchors with a
human verdict whose label now matches it. Each run stores its comparisons in
``judge_anchor_runs`` (:func:`stored_comparisons` reads them back).

A judge drifts (:func:`drift_reasons`) when the lower bound of its flip rate exceeds
``judges.drift.max_flip_rate``, or its agreement with the human verdicts on anchors is below
``judges.drift.min_human_agreement`` (only when some anchor has a verdict).
:func:`drift_check` is the check's whole verdict on a run's comparisons: passed or not, the
sentence it shows, and its figures; ``judges.drift.blocking: false`` makes a failure a
warning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import psycopg

from eval_harness.judges.anchors import sql
from eval_harness.metrics.drift import drift_alarm, paired_shift
from eval_harness.metrics.proportions import wilson_interval
from eval_harness.settings.judges import DriftSettings


@dataclass(frozen=True)
class AnchorComparison:
    """One judge re-judging the anchors in one run, against the frozen values."""

    judge: int
    spec: str
    prompt_version: str | None
    frozen_spec: str
    frozen_prompt_version: str | None
    pairs: int                       # anchors scored both when frozen and now
    flips: int
    flip_rate: float | None
    flip_low: float | None
    flip_high: float | None
    score_shift: float | None        # mean of (now - frozen)
    shift_low: float | None
    shift_high: float | None
    human_pairs: int                 # anchors with a human verdict, scored now
    human_agreement: float | None    # share of them whose label now matches the verdict
    requests: int = 0
    cost_usd: float = 0.0
    reused_from: str | None = None   # the run that measured it today (None: this run did)
    cut_short: bool = False          # its budget line stopped the re-judging part way

    @property
    def changed(self) -> bool:
        """The judge in config is not the one the anchors were frozen with."""
        return (self.spec, self.prompt_version) != (self.frozen_spec, self.frozen_prompt_version)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": self.changed}

    def line(self) -> str:
        """``judge 1 changed openai:gpt-4o -> openai:gpt-4.1: flips 12% [8%, 17%] of the
        anchors' labels, scores +0.05 [+0.02, +0.08] ...``"""
        if self.changed:
            old = _judge_name(self.frozen_spec, self.frozen_prompt_version,
                              self.prompt_version != self.frozen_prompt_version)
            new = _judge_name(self.spec, self.prompt_version,
                              self.prompt_version != self.frozen_prompt_version)
            head = f"judge {self.judge} changed {old} -> {new}"
        else:
            head = f"judge {self.judge} ({self.spec}) on the anchors"
        if self.reused_from:
            head += f" (measured today by run {self.reused_from})"
        if self.flip_rate is None:
            return f"{head}: no anchor scored both when frozen and now"
        pct = lambda v: f"{100 * v:.0f}%"  # noqa: E731
        sig = lambda v: f"{v:+.2f}"  # noqa: E731
        shift = (f"scores {sig(self.score_shift)}" + ("" if self.shift_low is None else
                 f" [{sig(self.shift_low)}, {sig(self.shift_high)}]"))
        human = ("" if self.human_agreement is None else
                 f"; agrees with people on {pct(self.human_agreement)} of "
                 f"{self.human_pairs} anchors")
        return (f"{head}: flips {pct(self.flip_rate)} [{pct(self.flip_low)}, "
                f"{pct(self.flip_high)}] of the anchors' labels, {shift} ({self.pairs} "
                f"anchors){human}")


def _judge_name(spec: str, version: str | None, with_version: bool) -> str:
    return f"{spec} (prompt {version})" if with_version else spec


def drift_reasons(comparison: AnchorComparison, drift: DriftSettings) -> list[str]:
    """Why ``comparison`` fails the drift check ([] when it passes): the flip rate's lower
    bound above ``judges.drift.max_flip_rate``, or the agreement with human verdicts on
    anchors below ``judges.drift.min_human_agreement`` (only when some anchor has one)."""
    reasons = []
    if comparison.pairs and drift_alarm(comparison.flips, comparison.pairs,
                                        max_flip_rate=drift.max_flip_rate,
                                        confidence=drift.confidence):
        reasons.append(f"judge {comparison.judge} ({comparison.spec}) flips "
                       f"{comparison.flips} of {comparison.pairs} anchor labels: lower bound "
                       f"{comparison.flip_low:.3f} > judges.drift.max_flip_rate "
                       f"{drift.max_flip_rate:.3f}")
    if comparison.human_agreement is not None and \
            comparison.human_agreement < drift.min_human_agreement:
        reasons.append(f"judge {comparison.judge} ({comparison.spec}) agrees with the human "
                       f"verdicts on {comparison.human_agreement:.0%} of "
                       f"{comparison.human_pairs} anchors < judges.drift.min_human_agreement "
                       f"{drift.min_human_agreement:.0%}")
    return reasons


def compare_judge(judge: int, frozen: Sequence[tuple[float | None, bool | None]],
                  now: Sequence[float | None], *, spec: str, prompt_version: str | None,
                  frozen_spec: str, frozen_prompt_version: str | None, threshold: float,
                  confidence: float = 0.95, requests: int = 0,
                  cost_usd: float = 0.0) -> AnchorComparison:
    """Compare ``now`` (today's scores, None where unscored) with ``frozen`` (``(score, human
    label or None)`` per anchor, same order); only anchors scored both times count."""
    both = [(f, h, n) for (f, h), n in zip(frozen, now) if f is not None and n is not None]
    then = np.array([f for f, _, _ in both], dtype=float)
    today = np.array([n for _, _, n in both], dtype=float)
    flips = int(np.sum((then > threshold) != (today > threshold)))
    rate = low = high = shift = s_low = s_high = None
    if both:
        rate = flips / len(both)
        low, high = wilson_interval(flips, len(both), confidence=confidence)
        shift, s_low, s_high = paired_shift(then, today, confidence=confidence)
    humans = [(h, n > threshold) for _, h, n in both if h is not None]
    agreement = (sum(h == label for h, label in humans) / len(humans)) if humans else None
    return AnchorComparison(judge, spec, prompt_version, frozen_spec, frozen_prompt_version,
                            len(both), flips, rate, low, high, shift, s_low, s_high,
                            len(humans), agreement, requests, cost_usd)


@dataclass(frozen=True)
class DriftCheck:
    """The ``judge_drift`` check's verdict on one run's comparisons with the anchors."""

    passed: bool
    blocking: bool                  # judges.drift.blocking: a failure blocks downstream
    description: str
    reasons: tuple[str, ...]        # why it failed, one sentence per judge and rule
    figures: dict[str, Any]         # the worst judge's flip rate and bound, the thresholds
    per_judge: dict[str, Any]       # judge<N>_<figure> of every comparison


def drift_check(comparisons: Sequence[AnchorComparison], drift: DriftSettings, *,
                dataset: str) -> DriftCheck:
    """The drift check on ``comparisons`` (one run's, one per judge; none when anchors are
    off or the run froze the set): failed when any judge drifts (:func:`drift_reasons`),
    with the figures of the judge whose flip rate's lower bound is highest."""
    reasons = [reason for c in comparisons for reason in drift_reasons(c, drift)]
    if not comparisons:
        description = (f"no anchor comparison stored for dataset '{dataset}' (judges.anchors "
                       "off, or the run that froze the anchor set was the first)")
    elif reasons:
        description = "; ".join(reasons) + (
            ". Compare the judges' specs and prompt versions with those the anchors were "
            "frozen with, review the flipped anchors, then re-freeze or roll the judge back.")
    else:
        description = "; ".join(c.line() for c in comparisons)
    worst = max(comparisons, key=lambda c: c.flip_low or 0.0, default=None)
    figures = {"flip_rate": None if worst is None else worst.flip_rate,
               "flip_lower_bound": None if worst is None else worst.flip_low,
               "max_flip_rate": drift.max_flip_rate,
               "min_human_agreement": drift.min_human_agreement}
    per_judge = {f"judge{c.judge}_{name}": getattr(c, name) for c in comparisons
                 for name in ("flip_rate", "flip_low", "score_shift", "human_agreement",
                              "changed")}
    return DriftCheck(not reasons, drift.blocking, description, tuple(reasons), figures,
                      per_judge)


def stored_comparisons(conn: psycopg.Connection, dataset: str, *,
                       run_id: str | None = None) -> list[AnchorComparison]:
    """The newest (or ``run_id``'s) comparisons with the anchors of ``dataset``."""
    return [comparison_from_row(dict(zip(sql.RUN_COLUMNS, row)))
            for row in sql.anchor_runs(conn, dataset, run_id=run_id)]


def comparison_from_row(values: Mapping[str, Any]) -> AnchorComparison:
    """A comparison from a ``judge_anchor_runs`` row (keys: ``sql.RUN_COLUMNS``)."""
    values = {**values, "spec": values["judge_spec"]}
    return AnchorComparison(**{k: values[k] for k in AnchorComparison.__dataclass_fields__})
