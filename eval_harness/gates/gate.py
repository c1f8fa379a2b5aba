"""What a quality gate is, whichever kind: its name, threshold, severity, version and batch
evaluator, and the scales its scores and thresholds are on.

A :class:`Gate` names a gate, carries its configured threshold, minimum pass rate and
severity, a ``version`` and a batch evaluator. The runner streams answers in batches and hands
each gate the answers whose stored result for that gate is stale.

``version`` is everything the score depends on besides the answer itself: the rule
parameters of a rule-based gate; the provider, model, prompt version and source truncation of
an LLM gate. A stored result with another version is stale and evaluated again. Change the
version string whenever a gate's scoring changes.

The gates themselves are built by :mod:`eval_harness.gates.registry` (the rule-based ones
there, the two LLM gates in :mod:`eval_harness.gates.llm_gates`, which supply a
:class:`JudgedGate`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Protocol

from eval_harness.gates import citation_coverage, format_compliance
from eval_harness.gates.result import GateResult
from eval_harness.gates.window import Answer
from eval_harness.settings import GateSettings

FORMAT_COMPLIANCE = format_compliance.GATE_NAME
CITATION_COVERAGE = citation_coverage.GATE_NAME
GROUNDING = "grounding"
ANSWER_REWARD = "answer_reward"
GATE_NAMES = (FORMAT_COMPLIANCE, CITATION_COVERAGE, GROUNDING, ANSWER_REWARD)
RULES_DECIDE = "rules, no judge"  # what decides a rule-based gate, in its output lines

GATE_DESCRIPTIONS = {
    FORMAT_COMPLIANCE: "Markdown format: no empty heading, list item or link, citations "
                       "numbered 1..k, no unclosed code fence (score 1 - 0.1 per issue type).",
    CITATION_COVERAGE: "Share of claim sentences that cite a source, halved when any citation "
                       "points to a source that does not exist.",
    GROUNDING: "Share of the answer's claims that the cited sources support (LLM judge).",
    ANSWER_REWARD: "Judge's reward for relevance, accuracy and completeness (LLM judge).",
}


@dataclass(frozen=True)
class GateRun:
    """What an evaluator may know about the run besides the answers (e.g. for cost logs)."""

    run_id: str


class BatchEvaluator(Protocol):
    def __call__(self, answers: Sequence[Answer], run: GateRun) -> Sequence[GateResult]:
        """One result per answer, in the same order. Should not raise: a judge that fails
        on an answer returns ``GateResult.unscored`` for it with the error."""


class ResultRecorder(Protocol):
    def __call__(self, conn: Any, answers: Sequence[Answer], results: Sequence[GateResult],
                 run: GateRun) -> None:
        """Write a gate's side effects (evaluation_log, reflexions, regeneration queue) in the
        transaction that stores the batch's results."""


@dataclass(frozen=True)
class Gate:
    """One enabled quality gate, ready to run."""

    name: str
    threshold: float        # an answer passes when its score (0..1) reaches it
    min_pass_rate: float    # the check passes when the pass rate reaches it
    blocking: bool          # ERROR severity (the gate command exits 1) or WARN
    version: str
    evaluate_batch: BatchEvaluator
    record: ResultRecorder | None = None
    needs_judge: bool = False
    # A pure per-answer function, when the gate has one: the runner then calls the rule gates
    # answer by answer, one after the other, so they share the parse of each answer.
    score_one: Callable[[Answer], GateResult] | None = None
    # who decides it, as every output line says: the rules, or the judge (JudgedGate)
    decided_by: str = RULES_DECIDE


@dataclass(frozen=True)
class JudgedGate:
    """What the judge layer supplies for an LLM gate: its version and its evaluator.

    The evaluator receives answers whose sources it must cut to
    ``QualityGateSettings.grounding_source_chars`` itself (the cut belongs in ``version``).
    Its results' ``passed`` is re-derived by the runner from the score and the configured
    threshold, so a judged gate passes answers by the same rule as the others.
    """

    version: str
    evaluate_batch: BatchEvaluator
    record: ResultRecorder | None = None
    decided_by: str = "judge 1"  # e.g. "judge 1 openai:gpt-4o" (llm_gates.gate_judge_line)


def reward_to_score(reward: float) -> float:
    """The judge's reward (-1..+1) on the gates' score scale (0..1): ``(reward + 1) / 2``."""
    if not -1.0 <= reward <= 1.0:
        raise ValueError(f"A reward must lie in [-1, 1], got {reward!r}.")
    return (reward + 1.0) / 2.0


def score_threshold(name: str, gate: GateSettings) -> float:
    """The configured threshold on the score scale (answer_reward's is on the reward scale)."""
    return reward_to_score(gate.threshold) if name == ANSWER_REWARD else gate.threshold


def configured_scale(name: str, score: float | None) -> float | None:
    """A score (0..1) of gate ``name`` on the scale its threshold is configured in.

    answer_reward's is the judge's reward, ``2 * score - 1`` (the inverse of
    :func:`reward_to_score`, rounded to 12 places so 0.65 reads 0.3 again); the other gates'
    scale is the score's own. What reports show, so that they match config.yaml.
    """
    if score is None or name != ANSWER_REWARD:
        return score
    return round(2.0 * score - 1.0, 12)


def score_safely(name: str, threshold: float, score_one: Callable[[Answer], GateResult],
                 answer: Answer) -> GateResult:
    """``score_one(answer)``; an exception becomes an unscored result carrying the error."""
    started = perf_counter()
    try:
        return score_one(answer)
    except Exception as exc:  # a bad row must not stop the run; it is reported
        return GateResult.unscored(name, threshold, f"{type(exc).__name__}: {exc}",
                                   latency_ms=(perf_counter() - started) * 1000.0)


def per_answer(name: str, threshold: float,
               score_one: Callable[[Answer], GateResult]) -> BatchEvaluator:
    """A batch evaluator from a pure per-answer gate function.

    An exception on one answer becomes an unscored result for that answer with the error in
    its details; the other answers of the batch are unaffected.
    """
    def evaluate(answers: Sequence[Answer], run: GateRun) -> list[GateResult]:
        return [score_safely(name, threshold, score_one, answer) for answer in answers]
    return evaluate
