"""A comparison as the user reads it: JSON, the terminal table, the Markdown a pull request
shows as a comment (or ``$GITHUB_STEP_SUMMARY``), and JUnit XML (one test case per row)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from eval_harness.comparison.compare import BETTER, WORSE, Comparison, Row
from eval_harness.comparison.records import GATES, RETRIEVAL
from eval_harness.escaping.markdown_text import markdown_code, markdown_inline
from eval_harness.escaping.visible import visible
from eval_harness.escaping.xml_text import xml_safe_tree

LABELS = {"precision_at_5": "P@5", "recall_at_5": "Recall@5", "ndcg_at_10": "nDCG@10",
          "mrr_at_10": "MRR@10"}


def _row_dict(row: Row) -> dict[str, Any]:
    key = "metric" if row.kind == RETRIEVAL else "gate"
    return {key: row.name, "base": row.base_mean, "candidate": row.candidate_mean,
            "difference": row.difference, "interval": list(row.interval),
            "p_value": row.p_value, "p_adjusted": row.p_adjusted, "verdict": row.verdict,
            "queries" if row.kind == RETRIEVAL else "answers": row.units,
            "blocking": row.blocking,
            "most_worse": [{"id": unit, "base": base, "candidate": candidate}
                           for unit, base, candidate in row.most_worse]}


def to_dict(comparison: Comparison) -> dict[str, Any]:
    return {"base": comparison.base, "candidate": comparison.candidate,
            "dataset": comparison.dataset, "comparable": comparison.comparable,
            "reasons": list(comparison.reasons),
            "margin": comparison.margin, "alpha": comparison.alpha,
            "metrics": [_row_dict(r) for r in comparison.rows if r.kind == RETRIEVAL],
            "gates": [_row_dict(r) for r in comparison.rows if r.kind == GATES],
            "failed": comparison.failed,
            "records": {key: {"id": info.record_id, "name": info.name,
                              "recorded_at": info.recorded_at,
                              "code_version": info.code_version,
                              "configuration": info.configuration,
                              "corpus_version": info.corpus_version,
                              "ground_truth_version": info.ground_truth_version,
                              "units": info.units}
                        for key, info in comparison.records.items()}}


def to_json(comparison: Comparison) -> str:
    return json.dumps(to_dict(comparison))


def _label(row: Row) -> str:
    return LABELS.get(row.name, row.name) if row.kind == RETRIEVAL else f"gate {row.name}"


def _shown_verdict(row: Row) -> str:
    if row.verdict == WORSE:
        return "WORSE" if row.blocking else "worse (not blocking)"
    return row.verdict


def headline(comparison: Comparison) -> str:
    where = f"'{comparison.candidate}' against '{comparison.base}'"
    if not comparison.comparable:
        return f"Not comparable: {where}: " + "; ".join(comparison.reasons) + "."
    worse = comparison.worse
    if comparison.failed:
        names = ", ".join(_label(r) for r in worse if r.blocking)
        return f"WORSE: {where}: {names} worse beyond the margin {comparison.margin:g}."
    if worse:
        return f"Passed with warnings: {where}: " + ", ".join(_label(r) for r in worse) + \
            " worse (not blocking)."
    better = [r for r in comparison.rows if r.verdict == BETTER]
    return (f"No evidence of worse: {where}" + (
        f"; better: {', '.join(_label(r) for r in better)}" if better else "") + ".")


def format_table(comparison: Comparison) -> str:
    lines = [visible(headline(comparison))]
    if not comparison.rows:
        return "\n".join(lines)
    lines += ["", f"  {'row':<24} {'base':>8} {'candidate':>9} {'difference':>10}  "
              f"{'95% interval':<19} {'p (Holm)':>8}  {'n':>5}  verdict"]
    for row in comparison.rows:
        lines.append(f"  {visible(_label(row)):<24} {row.base_mean:8.4f} {row.candidate_mean:9.4f} "
                     f"{row.difference:+10.4f}  [{row.interval[0]:+.4f}, {row.interval[1]:+.4f}] "
                     f"{row.p_adjusted:8.4f}  {row.units:>5}  {_shown_verdict(row)}")
    lines.append(f"\n(paired bootstrap interval and randomisation test over the shared units; "
                 f"Holm over {len(comparison.rows)} rows at alpha {comparison.alpha:g}; "
                 f"margin {comparison.margin:g})")
    return "\n".join(lines)


def markdown(comparison: Comparison) -> str:
    """The pull-request comment: the verdict, a table of rows, the queries that got most
    worse (their ids; an answer's query as text), every text escaped."""
    lines = [f"### Compared with `{markdown_inline(comparison.base)}`: "
             f"{markdown_inline(headline(comparison).split(':', 1)[0])}", ""]
    if not comparison.comparable:
        lines += [markdown_inline(headline(comparison)), ""]
        return "\n".join(lines)
    lines += ["| | base | candidate | difference | 95% interval | p (Holm) | n | verdict |",
              "|---|---:|---:|---:|---|---:|---:|---|"]
    for row in comparison.rows:
        verdict = _shown_verdict(row)
        verdict = f"**{verdict}**" if row.verdict == WORSE and row.blocking else verdict
        lines.append(f"| {markdown_inline(_label(row))} | {row.base_mean:.4f} | "
                     f"{row.candidate_mean:.4f} | {row.difference:+.4f} | "
                     f"[{row.interval[0]:+.4f}, {row.interval[1]:+.4f}] | "
                     f"{row.p_adjusted:.4f} | {row.units} | {verdict} |")
    dropped = [row for row in comparison.rows if row.most_worse and
               (row.verdict == WORSE or row.difference < 0)]
    if dropped:
        lines.append("")
        lines.append("Most worse:")
        for row in dropped:
            units = ", ".join(f"{markdown_code(unit)} ({base:.2f} → {candidate:.2f})"
                              for unit, base, candidate in row.most_worse)
            lines.append(f"- {markdown_inline(_label(row))}: {units}")
    lines += ["", f"Paired over the queries both records share (answers by their query); "
              f"95% paired bootstrap interval; randomisation test, Holm-corrected over "
              f"{len(comparison.rows)} rows at alpha {comparison.alpha:g}; a difference within "
              f"{comparison.margin:g} is never worse. Base `{markdown_inline(comparison.base)}`"
              f" at {markdown_inline(_code_version(comparison, 'base'))}, candidate "
              f"`{markdown_inline(comparison.candidate)}` at "
              f"{markdown_inline(_code_version(comparison, 'candidate'))}."]
    return "\n".join(lines) + "\n"


def _short(version: str) -> str:
    """A commit as its first 12 hex digits; anything else as it is."""
    return version[:12] if re.fullmatch(r"[0-9a-f]{40}", version) else version


def _code_version(comparison: Comparison, side: str) -> str:
    versions = sorted({_short(info.code_version) for key, info in comparison.records.items()
                       if key.startswith(side)})
    return ", ".join(versions) or "?"


def junit_xml(comparison: Comparison, *, seconds: float = 0.0) -> str:
    """One test case per row (a blocking worse row fails, a non-blocking one is a warning in
    its output); a comparison that is not comparable is one error."""
    suite = ET.Element("testsuite", name="eval-harness compare",
                       tests=str(max(len(comparison.rows), 1)),
                       failures=str(sum(1 for r in comparison.worse if r.blocking)),
                       errors="0" if comparison.comparable else "1", time=f"{seconds:.3f}")
    if not comparison.comparable:
        case = ET.SubElement(suite, "testcase", classname="compare", name="comparable")
        ET.SubElement(case, "error", message="not comparable").text = headline(comparison)
    for row in comparison.rows:
        case = ET.SubElement(suite, "testcase", classname=f"compare.{row.kind}", name=row.name)
        figures = (f"difference {row.difference:+.4f} [{row.interval[0]:+.4f}, "
                   f"{row.interval[1]:+.4f}], p (Holm) {row.p_adjusted:.4f}, n {row.units}")
        if row.verdict == WORSE and row.blocking:
            ET.SubElement(case, "failure", message=f"{_label(row)} worse").text = figures
        else:
            ET.SubElement(case, "system-out").text = f"{_shown_verdict(row)}: {figures}"
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(xml_safe_tree(root), encoding="unicode", xml_declaration=True) + "\n"
