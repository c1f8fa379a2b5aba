"""The gate outcomes sent to Phoenix and OpenTelemetry (eval_harness.gates.outcomes): each
gate's one-line reason from its real details, and the window's current results read from the
store with the answers' trace links."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime

import pytest

from eval_harness.gates import outcomes
from eval_harness.gates.citation_coverage import citation_coverage
from eval_harness.gates.format_compliance import format_compliance
from eval_harness.gates.outcomes import explanation


@pytest.mark.unit
def test_doctest():
    assert doctest.testmod(outcomes).failed == 0


@pytest.mark.unit
def test_explanations_from_the_rule_gates_details():
    cited = citation_coverage("Aspirin lowers the risk of heart attacks [1]. Statins lower "
                              "cholesterol in most adults.", [{"id": "d", "text": "t"}],
                              threshold=0.7)
    line = explanation("citation_coverage", cited.score, cited.passed, 0.7, cited.details)
    # two claim sentences, one cited: 1/2 = 0.5 < 0.7
    assert line == "1 of 2 claim sentences cite a source; score 0.50 < threshold 0.70"
    clean = format_compliance("Plain text [1].", threshold=0.95)
    assert explanation("format_compliance", clean.score, clean.passed, 0.95, clean.details) \
        == "no Markdown defect; score 1.00 >= threshold 0.95"
    broken = format_compliance("#\n\nText [2].", threshold=0.95)
    line = explanation("format_compliance", broken.score, broken.passed, 0.95, broken.details)
    assert line.startswith("Markdown defects: ") and "< threshold 0.95" in line
    assert all(kind in line for kind in broken.details["issue_types"])


@pytest.mark.unit
def test_explanations_of_judged_and_unscored_results_are_one_line():
    reward = explanation("answer_reward", 0.6, True, 0.3,
                         {"reasoning": "Accurate,\nand cites\tits sources."})
    assert reward == "Accurate, and cites its sources.; score 0.60 >= threshold 0.30"
    grounding = explanation("grounding", 0.5, False, 0.8, {"claims": [
        {"claim": "a", "supported": True}, {"claim": "b", "supported": False}]})
    assert grounding == "1 of 2 claims supported by the sources; score 0.50 < threshold 0.80"
    assert explanation("grounding", None, False, 0.8, {"error": "judge down\nretry"}) \
        == "unscored: judge down retry"
    assert len(explanation("answer_reward", 0.1, False, 0.3, {"reasoning": "x" * 1000})) == 300


def test_window_outcomes_carry_trace_links_and_configured_scale(fresh, tmp_path):
    from eval_harness.gates.answers import import_answers
    from eval_harness.gates.gate import Gate
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.gates.traces import TracedAnswer
    from eval_harness.gates.window import TimeWindow

    created = datetime(2026, 3, 3, 9, tzinfo=UTC)
    sources = [{"id": "d1", "text": "Aspirin lowers the risk of heart attacks."}]
    trace, span = "ab" * 16, "cd" * 8
    with fresh.connection() as conn:
        import_answers(conn, tmp_path / "spans", records=[TracedAnswer(
            trace, "Does aspirin help?", "Aspirin lowers the risk of heart attacks [1].",
            sources, created, trace, span)])
    def score(answer):
        return citation_coverage(answer.answer, answer.sources, threshold=0.7)

    gate = Gate("citation_coverage", 0.7, 0.9, True, "v1",
                evaluate_batch=lambda answers, run: [score(a) for a in answers],
                score_one=score)
    window = TimeWindow.since(created)
    run_quality_gates(fresh, window, [gate])
    [outcome] = outcomes.window_outcomes(fresh, window, [gate])
    assert (outcome.answer_id, outcome.trace_id, outcome.span_id) == (trace, trace, span)
    assert (outcome.score, outcome.label) == (1.0, "pass")
    assert outcome.explanation == ("1 of 1 claim sentences cite a source; "
                                   "score 1.00 >= threshold 0.70")
