"""Section 4: quality gates. Each enabled gate's figures per day from the stored results
(:func:`eval_harness.gates.runner.summarize_gates`), and the worst answers with the reason
the gate recorded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any

import psycopg

from eval_harness.gates.answers_mapping import AnswersMappingError, answers_relation
from eval_harness.gates.gate import Gate, configured_scale
from eval_harness.gates.registry import configured_gates, enabled_gate_names
from eval_harness.gates.report import GateSummary
from eval_harness.gates.runner import summarize_gates
from eval_harness.gates.sql import answers_with_result, gate_results_as_of, latest_answer_at
from eval_harness.gates.window import TimeWindow
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import (FAIL, PASS, SECTION_TITLES, WARN, Block,
                                           BuiltSection, Check, Metric, Paragraph, Section,
                                           Table, no_data)
from eval_harness.settings import Settings

WORST_SHOWN = 5          # worst answers listed per gate and day
REASON_CHARS = 160


def gate_metric_keys(settings: Settings) -> dict[str, Metric]:
    """The section's metrics, all None: four per enabled gate, then the overall ones."""
    keys: dict[str, Metric] = {}
    for name in enabled_gate_names(settings.quality_gates):
        keys.update(dict.fromkeys((f"{name}_pass_rate", f"{name}_passed", f"{name}_answers",
                                   f"{name}_unscored")))
    keys.update(gates_passed=None, gate_days=None, gate_day_count=None)
    return keys


def gates_section(conn: psycopg.Connection, settings: Settings, days: Sequence[date] | None,
                  run_id: str | None) -> BuiltSection:
    """The gates' results on ``days`` (UTC answer partitions; None: the latest day that has
    answers); ``run_id`` is passed to :func:`summarize_gates`."""
    title = SECTION_TITLES["quality_gates"]
    metrics = gate_metric_keys(settings)
    gates = configured_gates(settings)
    if not gates:
        hint = "Every quality gate is disabled (quality_gates.gates in config.yaml)."
        return no_data("quality_gates", hint, metrics)
    try:
        relation = answers_relation(conn, settings)
    except AnswersMappingError as exc:  # the mapping no longer fits the store: say why
        return no_data("quality_gates", str(exc), metrics, check="Quality gates")
    days = sorted(set(days)) if days else _latest_answer_day(conn, relation)
    if not days:
        hint = (f"No answers in `{relation}` yet: import some (`eval-harness answers import "
                "FILE`), then run the gates (`eval-harness gate`)." if isinstance(relation, str)
                else f"No answers in `{relation}` (quality_gates.answers, read in place) yet.")
        return no_data("quality_gates", hint, metrics, check="Quality gates")
    blocks: list[Block] = []
    checks: list[Check] = []
    per_gate: dict[str, list[GateSummary]] = {gate.name: [] for gate in gates}
    for day in days:
        window = TimeWindow.day(day)
        summaries = summarize_gates(conn, window, gates, relation=relation, run_id=run_id)
        as_of = gate_results_as_of(conn, relation, window)
        blocks += _gate_day_blocks(conn, relation, window, gates, summaries, as_of)
        for summary in summaries:
            per_gate[summary.gate].append(summary)
            checks.append(Check(f"Gate {summary.gate} ({window.partition})",
                                _gate_status(summary), summary.decision, as_of))
    for name, summaries in per_gate.items():
        answers = sum(s.answers for s in summaries)
        metrics.update({f"{name}_pass_rate": (sum(s.passed_answers for s in summaries) / answers
                                              if answers else None),
                        f"{name}_passed": all(s.passed for s in summaries),
                        f"{name}_answers": answers,
                        f"{name}_unscored": sum(s.unscored for s in summaries)})
    statuses = {check.status for check in checks}
    metrics.update(gates_passed=FAIL not in statuses,
                   gate_days=", ".join(day.isoformat() for day in days),
                   gate_day_count=len(days))  # each pass rate above pools these days
    status = FAIL if FAIL in statuses else WARN if WARN in statuses else PASS
    return BuiltSection(Section("quality_gates", title, tuple(blocks), status), metrics,
                        tuple(checks))


def _latest_answer_day(conn: psycopg.Connection, relation) -> list[date]:
    latest = latest_answer_at(conn, relation)
    return [] if latest is None else [latest.astimezone(timezone.utc).date()]


def _gate_status(summary: GateSummary) -> str:
    if summary.passed:
        return PASS
    return FAIL if summary.blocking else WARN


def _gate_day_blocks(conn: psycopg.Connection, relation, window: TimeWindow,
                     gates: Sequence[Gate], summaries: Sequence[GateSummary],
                     as_of: datetime | None) -> list[Block]:
    answers = summaries[0].answers if summaries else 0
    rows = []
    for s in summaries:
        interval = (fmt.interval(*s.pass_rate_interval) if s.pass_rate_interval else "n/a")
        rows.append((s.gate, _gate_status(s), "blocking" if s.blocking else "warn only",
                     fmt.num(s.pass_rate), interval, f"{s.threshold:g}", f"{s.min_pass_rate:g}",
                     str(s.answers), str(s.answers - s.unscored), str(s.unscored),
                     fmt.num(s.mean_score), s.decided_by or "-"))
    blocks: list[Block] = [
        Paragraph(f"**{window.describe()}**: {answers} answer(s); results as of "
                  f"{fmt.when(as_of)}. An unscored answer counts as failing."),
        Table(("gate", "status", "severity", "pass rate", "95% CI", "threshold",
               "min pass rate", "answers", "scored", "unscored", "mean score", "decided by"),
              tuple(rows), (False, False, False) + (True,) * 8 + (False,))]
    if answers and all(s.unscored == s.answers for s in summaries):
        blocks.append(Paragraph(f"No stored gate result for these answers: run the gates "
                                f"(`eval-harness gate --partition {window.partition}`)."))
        return blocks
    worst_rows = []
    for gate, summary in zip(gates, summaries):
        for answer_id, query, score, details in answers_with_result(
                conn, relation, gate, summary.failing_answer_ids[:WORST_SHOWN]):
            worst_rows.append((gate.name, answer_id, fmt.num(configured_scale(gate.name, score)),
                               _reason(gate.name, details), fmt.shorten(query, 80)))
    if worst_rows:
        blocks.append(Table(("gate", "answer", "score", "reason", "query"), tuple(worst_rows),
                            (False, False, True, False, False),
                            caption=f"Worst answers of {window.partition}: each gate's failing "
                                    f"answers, lowest score first (at most {WORST_SHOWN})"))
    elif answers:
        blocks.append(Paragraph("No answer of this day fails a gate."))
    return blocks


def _reason(gate: str, details: Mapping[str, Any] | None) -> str:
    """A short why from the stored details of one result (each gate keeps its own)."""
    if details is None:
        return "no current result: the gate has not scored this answer"
    if details.get("error"):
        return fmt.shorten(f"unscored: {details['error']}", REASON_CHARS)
    if details.get("issue_types"):  # format_compliance
        return fmt.shorten("format issues: " + ", ".join(details["issue_types"]), REASON_CHARS)
    if "claim_sentences" in details:  # citation_coverage
        text = (f"{details.get('cited_claim_sentences', 0)} of {details['claim_sentences']} "
                "claim sentences cite a source")
        if details.get("invalid_citations"):
            text += "; a citation points to a missing source"
        if details.get("uncited_claims"):
            text += f"; uncited: \"{details['uncited_claims'][0]}\""
        return fmt.shorten(text, REASON_CHARS)
    if isinstance(details.get("claims"), list):  # grounding
        unsupported = [c.get("claim", "") for c in details["claims"]
                       if isinstance(c, Mapping) and not c.get("supported")]
        if unsupported:
            return fmt.shorten(f"{len(unsupported)} unsupported claim(s): \"{unsupported[0]}\"",
                               REASON_CHARS)
        return details.get("note") or "every claim is supported"
    for key in ("improvement_hint", "reasoning"):  # answer_reward
        if details.get(key):
            return fmt.shorten(str(details[key]), REASON_CHARS)
    return ""
