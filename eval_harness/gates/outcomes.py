"""Each gate's result on each answer of a window, as the tools people look at take it.

``gate --to-phoenix`` (:mod:`eval_harness.gates.phoenix`) and ``gate --otlp``
(:mod:`eval_harness.gates.otel_events`) send one record per (answer, gate) with:

- ``gate``: the gate's name (``citation_coverage``, ``format_compliance``, ``grounding``,
  ``answer_reward``);
- ``score``: on the scale the gate is configured in (answer_reward's reward -1..+1, the others
  0..1; :func:`~eval_harness.gates.registry.configured_scale`), None when the gate could not
  score the answer;
- ``label``: ``pass`` or ``fail`` (an unscored answer fails);
- ``explanation``: the gate's one-line reason (:func:`explanation`);
- ``trace_id`` / ``span_id``: the trace and LLM span the answer was made of, when it was
  imported from a trace (``answers import`` of spans, ``answers pull --phoenix``).

The records are the current stored results of the window's answers (what the gate report
counts), so a rerun that evaluates nothing sends the same records again; the receivers make
that an update (Phoenix: the annotation's identifier) or a repeated event (OTel).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_harness.gates import sql
from eval_harness.gates.answers import DEFAULT_RELATION
from eval_harness.gates.gate import Gate, configured_scale
from eval_harness.gates.window import TimeWindow
from eval_harness.store.connection import StoreLocation

_REASON_CHARS = 300


@dataclass(frozen=True)
class GateOutcome:
    """One gate's current result on one answer."""

    answer_id: str
    gate: str
    score: float | None       # on the gate's configured scale
    passed: bool
    threshold: float          # on the gate's configured scale
    explanation: str
    trace_id: str | None = None
    span_id: str | None = None

    @property
    def label(self) -> str:
        return "pass" if self.passed else "fail"


def explanation(gate: str, score: float | None, passed: bool, threshold: float,
                details: Mapping[str, Any]) -> str:
    """The gate's one-line reason for a result (``threshold`` on the configured scale).

    >>> explanation("citation_coverage", 0.5, False, 0.8,
    ...             {"claim_sentences": 4, "cited_claim_sentences": 2, "invalid_citations": []})
    '2 of 4 claim sentences cite a source; score 0.50 < threshold 0.80'
    """
    if score is None:
        return _line(f"unscored: {details.get('error') or 'no score'}")
    verdict = f"score {score:.2f} {'>=' if passed else '<'} threshold {threshold:.2f}"
    return _line(f"{_evidence(gate, details)}; {verdict}" if _evidence(gate, details)
                 else verdict)


def _evidence(gate: str, details: Mapping[str, Any]) -> str:
    if "claim_sentences" in details:  # citation_coverage
        text = (f"{details.get('cited_claim_sentences', 0)} of {details['claim_sentences']} "
                "claim sentences cite a source")
        if details.get("invalid_citations"):
            text += f", citations {details['invalid_citations']} name no source"
        return text if details["claim_sentences"] else "the answer makes no claim sentence"
    if "issue_types" in details:  # format_compliance
        return ("no Markdown defect" if not details["issue_types"] else
                "Markdown defects: " + ", ".join(details["issue_types"]))
    if "reasoning" in details:  # answer_reward
        return str(details["reasoning"])
    if "claims" in details:  # grounding
        claims = details["claims"] or []
        unsupported = sum(1 for claim in claims if not claim.get("supported"))
        return (details.get("note") or
                f"{len(claims) - unsupported} of {len(claims)} claims supported by the sources")
    return ""


def _line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _REASON_CHARS else line[:_REASON_CHARS - 1] + "…"


def window_outcomes(store: StoreLocation, window: TimeWindow, gates: Sequence[Gate], *,
                    relation: str = DEFAULT_RELATION) -> list[GateOutcome]:
    """Every gate's current result on every answer of ``window`` (answers without a current
    result for a gate, e.g. a run stopped early, have none), by gate then answer id."""
    outcomes = []
    with store.connection() as conn:
        traced = sql.relation_has_trace_ids(conn, relation)
        for gate in gates:
            for (answer_id, score, passed, threshold, details, trace_id, span_id) in \
                    sql.window_current_results(conn, relation, window, gate.name, gate.version,
                                               traced=traced):
                shown = configured_scale(gate.name, score)
                limit = configured_scale(gate.name, threshold)
                outcomes.append(GateOutcome(
                    answer_id, gate.name, shown, passed, limit,
                    explanation(gate.name, shown, passed, limit, details or {}),
                    trace_id, span_id))
    return outcomes
