"""A gate's result (eval_harness.gates.result), as the rule-based gates return it."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from eval_harness.gates.citation_coverage import citation_coverage
from eval_harness.gates.format_compliance import format_compliance
from eval_harness.gates.result import GateResult, check_threshold
from gate_sources import sources

pytestmark = pytest.mark.unit


# --- GateResult ------------------------------------------------------------------------------

def test_gate_result_is_frozen_and_json_serialisable():
    result = GateResult(gate="g", score=0.5, passed=False, threshold=0.7,
                        details={"issues": [{"type": "x", "line": 1}]}, latency_ms=1.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 1.0
    assert json.loads(json.dumps(result.to_dict())) == {
        "gate": "g", "score": 0.5, "passed": False, "threshold": 0.7,
        "details": {"issues": [{"type": "x", "line": 1}]}, "latency_ms": 1.5}


def test_gate_result_equality_ignores_latency():
    first = GateResult(gate="g", score=1.0, passed=True, threshold=0.5, latency_ms=1.0)
    second = GateResult(gate="g", score=1.0, passed=True, threshold=0.5, latency_ms=9.0)
    assert first == second


@pytest.mark.parametrize("score", [-0.1, 1.1, math.nan])
def test_gate_result_rejects_scores_outside_unit_interval(score):
    with pytest.raises(ValueError, match="score must be in"):
        GateResult(gate="g", score=score, passed=False, threshold=0.5)


def test_unscored_result_never_passes_and_keeps_the_reason():
    with pytest.raises(ValueError, match="cannot pass"):
        GateResult(gate="grounding", score=None, passed=True, threshold=0.8)
    result = GateResult.unscored("grounding", 0.8, "judge reply did not parse twice")
    assert (result.score, result.passed, result.scored) == (None, False, False)
    assert result.details == {"error": "judge reply did not parse twice"}


@pytest.mark.parametrize("threshold", [-0.01, 1.01, math.nan, "0.7", True])
def test_bad_threshold_is_one_clear_error(threshold):
    with pytest.raises(ValueError, match="Gate 'g': threshold must be a number in"):
        check_threshold("g", threshold)
    with pytest.raises(ValueError, match="threshold"):
        format_compliance("text", threshold=threshold)
    with pytest.raises(ValueError, match="threshold"):
        citation_coverage("text", sources(1), threshold=threshold)


def test_answer_must_be_a_string():
    with pytest.raises(TypeError, match="must be a Markdown string, got NoneType"):
        format_compliance(None)
    with pytest.raises(TypeError, match="must be a Markdown string, got bytes"):
        citation_coverage(b"text", sources(1))
