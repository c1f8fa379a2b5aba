"""Judge replies: forgiving in form, strict in meaning; prompts carry versions and anchors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_harness.judges import prompts
from eval_harness.judges.parsing import (
    ParseError,
    extract_json,
    parse_evaluation,
    parse_grounding,
    parse_reflexion,
    parse_relevance,
)
from eval_harness.judges.protocol import AnswerEvaluation, reward_from_criteria

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("reply, expected", [
    ("0.7", 0.7), ("0.7.", 0.7), ("Score: 0.7", 0.7), ("**0.7**", 0.7), (" 0.7 \n", 0.7),
    ("```\n0.7\n```", 0.7), ("Relevance score (0.0-1.0): 0.7", 0.7), ("relevance: 1", 1.0),
    ("0", 0.0), (".3", 0.3), ("0.7 (highly relevant)", 0.7), ("0.5 - moderately relevant", 0.5),
    ("0.7\n\nThe document directly addresses the query.", 0.7),
    ('{"score": 0.8}', 0.8), ('```json\n{"score": 0.8}\n```', 0.8),
    ('Here you go:\n```json\n{"relevance": "0.3"}\n```', 0.3),
])
def test_relevance_forms_that_parse(reply, expected):
    assert parse_relevance(reply) == pytest.approx(expected)


@pytest.mark.parametrize("reply", [
    "1.5", "-0.1", "high", "", "   ", "0.7 or 0.8", "70%", "0.7%", "7/10", "0.7/1.0", "nan",
    "inf", "The document is relevant.", "0.7.5", '{"score": "high"}', '{"verdict": 0.7}',
    '{"score": 1.2}', "about 0.7",
])
def test_relevance_replies_that_do_not_parse(reply):
    with pytest.raises(ParseError):
        parse_relevance(reply)


@given(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
def test_any_in_range_number_round_trips(value):
    assert parse_relevance(f"{value:.6f}") == pytest.approx(round(value, 6))
    assert parse_relevance(f"Score: **{value:.3f}**.") == pytest.approx(round(value, 3))


def test_reward_formula_weights_40_40_20():
    # 2 * (0.4 * 1.0 + 0.4 * 0.5 + 0.2 * 0.0) - 1 = 2 * 0.6 - 1 = 0.2
    assert reward_from_criteria(1.0, 0.5, 0.0) == pytest.approx(0.2)
    assert reward_from_criteria(1.0, 1.0, 1.0) == 1.0
    assert reward_from_criteria(0.0, 0.0, 0.0) == -1.0


def test_evaluation_json_in_fences_with_prose():
    reply = ("Here is my evaluation:\n```json\n" + json.dumps({
        "relevance": 0.9, "accuracy": 0.5, "completeness": 1, "reward_score": 0.99,
        "reasoning": "Mostly right.", "issues": ["one unsupported claim"],
        "improvement_hint": "Cite the source."}) + "\n```\nThanks.")
    evaluation = parse_evaluation(reply)
    assert isinstance(evaluation, AnswerEvaluation)
    assert evaluation.criteria == {"relevance": 0.9, "accuracy": 0.5, "completeness": 1.0}
    # the reward is computed, never the model's own arithmetic: 2*(0.36+0.2+0.2)-1 = 0.52
    assert evaluation.reward == pytest.approx(0.52)
    assert evaluation.issues == ("one unsupported claim",)
    assert evaluation.improvement_hint == "Cite the source."


def test_evaluation_accepts_nested_criteria_and_null_hint():
    evaluation = parse_evaluation(json.dumps({
        "criteria": {"relevance": 1.0, "accuracy": 1.0, "completeness": 0.5},
        "reasoning": "Good.", "issues": [], "improvement_hint": None}))
    assert evaluation.reward == pytest.approx(0.8) and evaluation.improvement_hint is None


@pytest.mark.parametrize("reply, message", [
    ('{"relevance": 0.9, "accuracy": 0.5, "reasoning": "x"}', "'completeness' is missing"),
    ('{"relevance": 1.9, "accuracy": 0.5, "completeness": 1, "reasoning": "x"}', "outside"),
    ('{"relevance": true, "accuracy": 0.5, "completeness": 1, "reasoning": "x"}', "number"),
    ('{"relevance": 1, "accuracy": 0.5, "completeness": 1}', "'reasoning' is missing"),
    ('{"relevance": 1, "accuracy": 0.5, "completeness": 1, "reasoning": "x", "issues": 3}',
     "list of strings"),
    ("The answer is good.", "no JSON object"),
    ('{"relevance": 1, "accuracy": 0.5,', "not valid"),
])
def test_evaluation_rejections_say_why(reply, message):
    with pytest.raises(ParseError, match=message):
        parse_evaluation(reply)


def test_grounding_claims_and_source_checks():
    grounding = parse_grounding(json.dumps({"claims": [
        {"claim": "A", "supported": True, "source": 2},
        {"claim": "B", "supported": "no", "source": None},
        {"claim": "C", "supported": False}]}), n_sources=2)
    assert [c.supported for c in grounding.claims] == [True, False, False]
    assert grounding.claims[0].source == 2 and grounding.supported_share == pytest.approx(1 / 3)
    assert parse_grounding('{"claims": []}').supported_share is None
    with pytest.raises(ParseError, match="source 3 does not exist"):
        parse_grounding('{"claims": [{"claim": "A", "supported": true, "source": 3}]}',
                        n_sources=2)
    with pytest.raises(ParseError, match="'supported' must be true or false"):
        parse_grounding('{"claims": [{"claim": "A", "supported": "maybe"}]}')


@pytest.mark.parametrize("reply", [
    "Problem: The answer ignored the sources.\nLesson: Answer from the context.",
    "**Problem:** The answer ignored the sources.\n\n**Lesson:** Answer from the context.",
    "## Problem: The answer ignored the sources.\n## Lesson learned: Answer from the context.",
    '{"problem": "The answer ignored the sources.", "lesson": "Answer from the context."}',
])
def test_reflexion_sections(reply):
    reflexion = parse_reflexion(reply)
    assert reflexion.problem == "The answer ignored the sources."
    assert reflexion.lesson == "Answer from the context."


@pytest.mark.parametrize("reply", ["Problem: only a problem.", "Lesson: only a lesson.",
                                   "Problem:\nLesson: x", "nothing here"])
def test_reflexion_needs_both_sections(reply):
    with pytest.raises(ParseError):
        parse_reflexion(reply)


def test_extract_json_refuses_two_objects():
    with pytest.raises(ParseError, match="more than one"):
        extract_json('{"a": 1} {"b": 2}')


def test_prompts_carry_the_seed_scale_and_versions():
    prompt = prompts.relevance_prompt("what is aspirin", "Aspirin is a drug.")
    for anchor in ("0.0 = Completely irrelevant", "0.3 = Marginally relevant",
                   "0.5 = Moderately relevant", "0.7 = Highly relevant",
                   "1.0 = Perfectly relevant"):
        assert anchor in prompt.system
    assert "Return only the number" in prompt.system
    assert prompt.user.endswith("Relevance score (0.0-1.0):")
    assert prompt.version == prompts.RELEVANCE_VERSION
    evaluation = prompts.evaluation_prompt("q", ["c1", "c2"], "a")
    assert "weight 40%" in evaluation.system and "weight 20%" in evaluation.system
    assert "[2] c2" in evaluation.user
    assert len(set(prompts.VERSIONS.values())) == len(prompts.VERSIONS)  # one per operation
