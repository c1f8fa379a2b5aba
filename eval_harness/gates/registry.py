"""The configured quality gates: what every caller runs.

The rule-based gates (format_compliance, citation_coverage) are built here; the two LLM gates
(grounding, answer_reward) come from :mod:`eval_harness.gates.llm_gates` as
:class:`~eval_harness.gates.gate.JudgedGate` entries passed to :func:`build_gates`;
:func:`configured_gates` does both. What a gate is: :mod:`eval_harness.gates.gate`.
"""

from __future__ import annotations

from collections.abc import Mapping

from eval_harness.gates import citation_coverage, format_compliance, llm_gates
from eval_harness.gates.gate import (ANSWER_REWARD, CITATION_COVERAGE, FORMAT_COMPLIANCE,
                                     GATE_NAMES, GROUNDING, Gate, JudgedGate, per_answer,
                                     score_threshold)
from eval_harness.gates.result import GateResult
from eval_harness.gates.window import Answer
from eval_harness.judges.client.session import FallbackNotices
from eval_harness.settings import ConfigError, GateSettings, QualityGateSettings, Settings


def _format_gate(cfg: GateSettings) -> Gate:
    threshold = cfg.threshold

    def score_one(answer: Answer) -> GateResult:
        return format_compliance.format_compliance(answer.answer, threshold=threshold)

    return Gate(
        FORMAT_COMPLIANCE, threshold, cfg.min_pass_rate, cfg.blocking,
        version=f"v3 penalty={format_compliance.PENALTY_PER_ISSUE_TYPE}",  # v3: code over lines
        evaluate_batch=per_answer(FORMAT_COMPLIANCE, threshold, score_one), score_one=score_one)


def _citation_gate(cfg: GateSettings) -> Gate:
    threshold = cfg.threshold

    def score_one(answer: Answer) -> GateResult:
        if not isinstance(answer.sources, list):
            raise TypeError("sources is not a JSON list")
        return citation_coverage.citation_coverage(answer.answer, answer.sources,
                                                   threshold=threshold)

    return Gate(
        CITATION_COVERAGE, threshold, cfg.min_pass_rate, cfg.blocking,
        # v3: code over lines; v4: a marker citing a source missing from the corpus is invalid
        version=(f"v4 min_claim_words={citation_coverage.MIN_CLAIM_WORDS} "
                 f"invalid_factor={citation_coverage.INVALID_CITATION_FACTOR}"),
        evaluate_batch=per_answer(CITATION_COVERAGE, threshold, score_one), score_one=score_one)


def enabled_gate_names(settings: QualityGateSettings) -> list[str]:
    """Names of the enabled gates, in the fixed order of :data:`GATE_NAMES`."""
    return [name for name in GATE_NAMES if settings.gate(name).enabled]


def build_gates(settings: QualityGateSettings, *,
                judged: Mapping[str, JudgedGate] | None = None) -> list[Gate]:
    """The enabled gates, in the order of :data:`GATE_NAMES`.

    ``judged`` maps ``"grounding"`` / ``"answer_reward"`` to what the judge layer provides. An
    enabled judged gate without an entry is a :class:`ConfigError`.
    """
    judged = judged or {}
    gates = []
    for name in enabled_gate_names(settings):
        cfg = settings.gate(name)
        if name == FORMAT_COMPLIANCE:
            gates.append(_format_gate(cfg))
        elif name == CITATION_COVERAGE:
            gates.append(_citation_gate(cfg))
        elif name in judged:
            entry = judged[name]
            gates.append(Gate(name, score_threshold(name, cfg), cfg.min_pass_rate, cfg.blocking,
                              version=entry.version, evaluate_batch=entry.evaluate_batch,
                              record=entry.record, needs_judge=True,
                              decided_by=entry.decided_by))
        else:
            raise ConfigError(f"config.yaml: quality_gates.gates.{name} is enabled, but the "
                              f"{name} gate needs the LLM judge layer, which was not passed "
                              "(build the gates with configured_gates(settings)), or set "
                              f"quality_gates.gates.{name}.enabled: false.")
    return gates


def judged_gates(settings: Settings) -> dict[str, JudgedGate]:
    """The judge layer's enabled LLM gates (grounding, answer_reward), built from ``settings``.

    Both use judge 1 (see :mod:`eval_harness.gates.llm_gates`). Only enabled gates are built, so
    a configuration without LLM gates never resolves a judge.
    """
    # one record of fallback notices for every session of these gates: said once per run
    options = {"notices": FallbackNotices()}
    builders = {GROUNDING: llm_gates.grounding_gate,
                ANSWER_REWARD: llm_gates.answer_reward_gate}
    return {name: build(settings, session_options=options) for name, build in builders.items()
            if settings.quality_gates.gate(name).enabled}


def configured_gates(settings: Settings) -> list[Gate]:
    """The enabled gates of ``settings``, judged ones included: what every caller runs."""
    return build_gates(settings.quality_gates, judged=judged_gates(settings))
