"""CI outputs of a gate report: JUnit XML (one test case per check) and a Markdown summary.

A blocking check that fails is a JUnit ``<failure>`` carrying its figures; a non-blocking
check that fails passes as a test case with a ``WARNING`` line in ``<system-out>`` (JUnit has
no warning state), so CI annotates it without failing the job.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eval_harness.gates.report import GateReport, GateSummary


def _figures(summary: GateSummary) -> str:
    interval = summary.pass_rate_interval
    rate = "n/a" if summary.pass_rate is None else f"{summary.pass_rate:.3f}"
    ci = "" if interval is None else f" (95% CI {interval[0]:.3f}-{interval[1]:.3f})"
    lines = [summary.verdict,
             f"pass rate {rate}{ci}, minimum {summary.min_pass_rate:.2f}",
             f"threshold {summary.threshold}, answers {summary.answers}, "
             f"unscored {summary.unscored}"]
    if summary.failing_answer_ids:
        lines.append(f"failing answers ({summary.failing_count}): "
                     + ", ".join(summary.failing_answer_ids))
    return "\n".join(lines)


def junit_xml(report: GateReport) -> str:
    """The report as a JUnit XML document (testsuite ``quality-gates``)."""
    failures = sum(1 for s in report.summaries if s.blocking and not s.passed)
    suite = ET.Element("testsuite", name="quality-gates", tests=str(len(report.summaries)),
                       failures=str(failures), errors="0", skipped="0")
    for summary in report.summaries:
        case = ET.SubElement(suite, "testcase", classname="eval_harness.quality_gates",
                             name=summary.gate)
        if summary.passed:
            ET.SubElement(case, "system-out").text = _figures(summary)
        elif summary.blocking:
            failure = ET.SubElement(case, "failure", type="QualityGateFailed",
                                    message=summary.verdict)
            failure.text = _figures(summary)
        else:
            ET.SubElement(case, "system-out").text = "WARNING: " + _figures(summary)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def markdown_summary(report: GateReport) -> str:
    """A Markdown block for a CI step summary (e.g. $GITHUB_STEP_SUMMARY)."""
    verdict = "PASS" if report.passed else "FAIL"
    lines = [f"### Quality gates: {verdict}", "",
             "| gate | result | blocking | pass rate | 95% CI | minimum | answers | unscored |",
             "|---|---|---|---:|---|---:|---:|---:|"]
    for s in report.summaries:
        result = "pass" if s.passed else ("**FAIL**" if s.blocking else "warn")
        rate = "n/a" if s.pass_rate is None else f"{s.pass_rate:.3f}"
        ci = "n/a" if s.pass_rate_interval is None else \
            f"{s.pass_rate_interval[0]:.3f}-{s.pass_rate_interval[1]:.3f}"
        lines.append(f"| {s.gate} | {result} | {'yes' if s.blocking else 'no'} | {rate} | "
                     f"{ci} | {s.min_pass_rate:.2f} | {s.answers} | {s.unscored} |")
    failing = [s for s in report.summaries if not s.passed and s.failing_answer_ids]
    if failing:
        lines.append("")
        for s in failing:
            lines.append(f"- `{s.gate}` failing answers ({s.failing_count}): "
                         + ", ".join(f"`{i}`" for i in s.failing_answer_ids))
    return "\n".join(lines) + "\n"
