"""CI outputs of a gate report: JUnit XML (one test case per check) and a Markdown summary.

A blocking check that fails is a JUnit ``<failure>`` carrying its figures; a non-blocking
check that fails passes as a test case with a ``WARNING`` line in ``<system-out>`` (JUnit has
no warning state), so CI annotates it without failing the job. A test case is named after
its gate and window (``format_compliance[2024-05-01]``), so two days' reports do not collide
in a CI dashboard; its ``time`` is the seconds this run spent scoring that gate's answers,
the suite's ``time`` the seconds the whole gate command took.

Text from data (answer ids, a reason quoting a file or a record) is escaped for where it goes
(:mod:`eval_harness.escaping`): in the JUnit file every id and reason is on one line with
control characters as visible escapes, and the file is always well-formed XML 1.0; in the
Markdown an id is inline code and a reason literal text, neither able to open a link, a
table cell or HTML.

When the gates could not run at all (bad config, unreachable store, a partition outside the
range), :func:`junit_error_xml` and :func:`markdown_error_summary` say why, so CI shows the
reason instead of a missing file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime

from eval_harness.escaping.markdown_text import markdown_code, markdown_inline
from eval_harness.escaping.visible import visible
from eval_harness.escaping.xml_text import xml_safe_tree
from eval_harness.gates.report import GateReport, GateSummary

SUITE_NAME = "quality-gates"
CLASS_NAME = "eval_harness.quality_gates"


def _figures(summary: GateSummary) -> str:
    interval = summary.pass_rate_interval
    rate = "n/a" if summary.pass_rate is None else f"{summary.pass_rate:.3f}"
    ci = "" if interval is None else f" (95% CI {interval[0]:.3f}-{interval[1]:.3f})"
    mean = "n/a" if summary.mean_score is None else f"{summary.mean_score:.3f}"
    lines = [summary.decision,
             f"pass rate {rate}{ci}, minimum {summary.min_pass_rate:.2f}",
             f"threshold {summary.threshold:g}, mean {mean} ({summary.scale}), "
             f"answers {summary.answers}, unscored {summary.unscored}"]
    if summary.failing_answer_ids:
        lines.append(f"failing answers ({summary.failing_count}): "
                     + ", ".join(visible(i) for i in summary.failing_answer_ids))
    return "\n".join(lines)


def window_label(report: GateReport) -> str:
    """The window as a test-case suffix: the day, or ``since <timestamp>``."""
    window = report.window
    return window.partition or f"since {window.start.isoformat()}"


def _suite(*, tests: int, failures: int, errors: int, seconds: float,
           started: datetime | None) -> ET.Element:
    suite = ET.Element("testsuite", name=SUITE_NAME, tests=str(tests), failures=str(failures),
                       errors=str(errors), skipped="0", time=f"{max(0.0, seconds):.3f}")
    if started is not None:
        suite.set("timestamp", started.isoformat(timespec="seconds"))
    return suite


def _document(suite: ET.Element) -> str:
    xml_safe_tree(suite)  # whatever an id or a reason holds, the file stays XML
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def junit_xml(report: GateReport, *, seconds: float = 0.0,
              started: datetime | None = None) -> str:
    """The report as a JUnit XML document (testsuite ``quality-gates``).

    ``seconds`` is the wall time of the gate run (the suite's ``time``), ``started`` its start
    (the suite's ``timestamp``).
    """
    failures = sum(1 for s in report.summaries if s.blocking and not s.passed)
    suite = _suite(tests=len(report.summaries), failures=failures, errors=0, seconds=seconds,
                   started=started)
    label = window_label(report)
    for summary in report.summaries:
        case = ET.SubElement(suite, "testcase", classname=CLASS_NAME,
                             name=f"{summary.gate}[{label}]", time=f"{summary.seconds:.3f}")
        if summary.passed:
            ET.SubElement(case, "system-out").text = _figures(summary)
        elif summary.blocking:
            failure = ET.SubElement(case, "failure", type="QualityGateFailed",
                                    message=summary.decision)
            failure.text = _figures(summary)
            if report.empty_window_note:  # where the answers are instead
                failure.text += "\n" + report.empty_window_note
        else:
            ET.SubElement(case, "system-out").text = "WARNING: " + _figures(summary)
    return _document(suite)


def junit_error_xml(reason: str, *, window: str | None = None, seconds: float = 0.0,
                    started: datetime | None = None) -> str:
    """A JUnit document for gates that could not run: one test case in ``<error>``.

    ``window`` is the day (or ``since ...``) that was asked for, when one was.
    """
    suite = _suite(tests=1, failures=0, errors=1, seconds=seconds, started=started)
    name = f"quality_gates[{visible(window)}]" if window else "quality_gates"
    case = ET.SubElement(suite, "testcase", classname=CLASS_NAME, name=name,
                         time=f"{max(0.0, seconds):.3f}")
    reason = visible(reason)  # one line, as the command printed it
    error = ET.SubElement(case, "error", type="QualityGatesCouldNotRun",
                          message=f"could not run: {reason}")
    error.text = reason
    return _document(suite)


def markdown_summary(report: GateReport) -> str:
    """A Markdown block for a CI step summary (e.g. $GITHUB_STEP_SUMMARY)."""
    verdict = "PASS" if report.passed else "FAIL"
    lines = [f"### Quality gates: {verdict} ({report.window.describe()})", "",
             "| gate | result | blocking | pass rate | 95% CI | minimum | threshold | answers "
             "| unscored | decided by |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---|"]
    for s in report.summaries:
        result = "pass" if s.passed else ("**FAIL**" if s.blocking else "warn")
        rate = "n/a" if s.pass_rate is None else f"{s.pass_rate:.3f}"
        ci = "n/a" if s.pass_rate_interval is None else \
            f"{s.pass_rate_interval[0]:.3f}-{s.pass_rate_interval[1]:.3f}"
        threshold = f"{s.threshold:g}" + (f" ({s.measure})" if s.measure != "score" else "")
        lines.append(f"| {s.gate} | {result} | {'yes' if s.blocking else 'no'} | {rate} | "
                     f"{ci} | {s.min_pass_rate:.2f} | {threshold} | {s.answers} | "
                     f"{s.unscored} | {markdown_inline(s.decided_by or '-')} |")
    if report.empty_window_note:
        lines += ["", markdown_inline(report.empty_window_note)]
    failing = [s for s in report.summaries if not s.passed and s.failing_answer_ids]
    if failing:
        lines.append("")
        for s in failing:
            lines.append(f"- `{s.gate}` failing answers ({s.failing_count}): "
                         + ", ".join(markdown_code(i) for i in s.failing_answer_ids))
    return "\n".join(lines) + "\n"


def markdown_error_summary(reason: str, *, window: str | None = None) -> str:
    """The Markdown summary of gates that could not run: the reason, in one line."""
    where = f" ({markdown_inline(window)})" if window else ""
    return (f"### Quality gates: could not run{where}\n\n"
            f"could not run: {markdown_inline(reason)}\n")
