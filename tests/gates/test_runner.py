"""Running the quality gates over a window of answers on a real store
(eval_harness.gates.runner): incremental evaluation and summaries.

Library tests use days in 2024-06 with ids unique to the test. Expected per-answer scores are
worked out by hand from the gate rules (tests/gates/test_citation_coverage.py and
tests/gates/test_format_compliance.py have the rule details); the comment next to each shows
the count.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import date, timedelta

import pytest

from eval_harness.gates.answers import import_answers
from eval_harness.gates.window import TimeWindow
from eval_harness.gates.gate import Gate, per_answer
from eval_harness.gates.result import GateResult
from eval_harness.gates.runner import evaluate_window, run_quality_gates, summarize_gates
from eval_harness.metrics.proportions import wilson_interval
from eval_harness.settings import GateSettings
from answer_files import answer_row, write_jsonl
from gate_sources import rule_gates


def gates_with(**changes) -> list[Gate]:
    """The rule-based gates with the default config, some gate settings replaced."""
    return rule_gates(**changes)


# --- incremental evaluation and summaries ---------------------------------------------------

# Hand-worked scores (format threshold 0.95; citation threshold 0.70, two sources):
HAND_WRITTEN = {
    # format 1.0 (no issue); citation 2/2 = 1.0
    "good": "Aspirin lowers the risk of heart attacks [1]. Statins lower cholesterol [2].",
    # format 0.9 (empty_heading); citation 1/1 = 1.0
    "heading": "##\n\nAspirin lowers the risk of heart attacks [1].",
    # format 1.0; citation 1/2 = 0.5 (second claim uncited)
    "uncited": "Aspirin lowers the risk of heart attacks [1]. Statins lower blood cholesterol.",
    # format 0.9 (non_sequential: [3] skips 2); citation 2/2 = 1.0 halved for [3] = 0.5
    "invalid": "Aspirin lowers the risk of heart attacks [1]. Statins lower cholesterol [3].",
}


_FREE_DAYS = itertools.count()


@pytest.fixture
def hand_written(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    day = date(2024, 7, 1) + timedelta(days=next(_FREE_DAYS))  # a day of its own per test
    rows = [answer_row(f"{tag}-{name}", text, f"{day}T12:00:00Z")
            for name, text in HAND_WRITTEN.items()]
    path = write_jsonl(tmp_path / "hand.jsonl", rows)
    import_answers(conn, path)
    return {"tag": tag, "window": TimeWindow.day(day), "rows": rows, "path": path}


def by_gate(report):
    return {s.gate: s for s in report.summaries}


def test_summary_figures_over_hand_written_answers(store, hand_written):
    tag, window = hand_written["tag"], hand_written["window"]
    report = run_quality_gates(store, window, gates_with())
    fmt, cit = by_gate(report)["format_compliance"], by_gate(report)["citation_coverage"]
    # format: good 1.0, heading 0.9, uncited 1.0, invalid 0.9 -> 2 of 4 pass, mean 0.95
    assert (fmt.answers, fmt.passed_answers, fmt.unscored, fmt.evaluated_now) == (4, 2, 0, 4)
    assert fmt.mean_score == pytest.approx(0.95) and fmt.pass_rate == 0.5
    assert fmt.pass_rate_interval == pytest.approx(wilson_interval(2, 4))
    assert fmt.failing_answer_ids == (f"{tag}-heading", f"{tag}-invalid")  # 0.9 each, by id
    # citation: good 1.0, heading 1.0, uncited 0.5, invalid 0.5 -> 2 of 4, mean 0.75
    assert (cit.passed_answers, cit.mean_score) == (2, pytest.approx(0.75))
    assert cit.worst_answer_ids[:2] == (f"{tag}-invalid", f"{tag}-uncited")
    assert not fmt.passed and not report.passed and report.failed_blocking == [
        "format_compliance", "citation_coverage"]
    assert fmt.latency_p50_ms is not None and fmt.latency_p95_ms >= fmt.latency_p50_ms


def test_rerun_evaluates_nothing_and_a_changed_answer_is_reevaluated(store, conn, hand_written):
    window, gates = hand_written["window"], gates_with()
    first = evaluate_window(store, window, gates)
    assert first.evaluated == {"format_compliance": 4, "citation_coverage": 4}
    again = evaluate_window(store, window, gates)
    assert again.answers_read == 0 and again.evaluated == {}
    rows = hand_written["rows"]
    rows[1]["answer"] = "## Heart\n\nAspirin lowers the risk of heart attacks [1]."  # fixed
    import_answers(conn, write_jsonl(hand_written["path"], rows))
    changed = evaluate_window(store, window, gates)
    assert changed.answers_read == 1 and changed.evaluated == {"format_compliance": 1,
                                                               "citation_coverage": 1}
    summary = by_gate(run_quality_gates(store, window, gates))["format_compliance"]
    assert (summary.passed_answers, summary.evaluated_now) == (3, 0)


def test_a_new_threshold_rederives_passed_without_reevaluating(store, conn, hand_written):
    window = hand_written["window"]
    run_quality_gates(store, window, gates_with())
    lenient = gates_with(format_compliance=GateSettings(True, 0.9, 0.5, True))
    report = run_quality_gates(store, window, lenient)
    fmt = by_gate(report)["format_compliance"]
    assert (fmt.evaluated_now, fmt.passed_answers, fmt.passed) == (0, 4, True)
    stored = conn.execute("SELECT bool_and(passed), min(threshold) FROM gate_results "
                          "WHERE gate = 'format_compliance' AND answer_id LIKE %s",
                          (hand_written["tag"] + "%",)).fetchone()
    assert stored == (True, 0.9)


def test_a_failing_judge_gives_unscored_failing_results_not_a_crash(store, conn, hand_written):
    def judge_down(answers, run):
        raise TimeoutError("judge did not answer in 30 s")

    def score_one(answer):
        if answer.id.endswith("uncited"):
            raise ValueError("bad row")
        return GateResult("half", 0.75, True, 0.5)

    flaky = Gate("grounding", 0.8, 0.9, True, version="test-judge-v1",
                 evaluate_batch=judge_down, needs_judge=True)
    half = Gate("half", 0.5, 0.5, False, version="v1",
                evaluate_batch=per_answer("half", 0.5, score_one))
    report = run_quality_gates(store, hand_written["window"], [flaky, half])
    grounding, partial = by_gate(report)["grounding"], by_gate(report)["half"]
    assert (grounding.answers, grounding.unscored, grounding.passed_answers) == (4, 4, 0)
    assert grounding.mean_score is None and not grounding.passed and not report.passed
    assert (partial.unscored, partial.passed_answers, partial.passed) == (1, 3, True)
    assert partial.worst_answer_ids[0] == hand_written["tag"] + "-uncited"  # unscored first
    error = conn.execute("SELECT details->>'error', score, passed FROM gate_results "
                         "WHERE gate = 'grounding' AND answer_id = %s",
                         (hand_written["tag"] + "-good",)).fetchone()
    assert error == ("TimeoutError: judge did not answer in 30 s", None, False)


def test_an_empty_window_fails_with_a_reason(store, conn):
    window = TimeWindow.day("2024-01-02")
    summary = summarize_gates(conn, window, gates_with())[0]
    assert (summary.answers, summary.pass_rate, summary.pass_rate_interval) == (0, None, None)
    assert not summary.passed and "no answers" in summary.verdict
