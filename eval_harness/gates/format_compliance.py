"""Markdown format compliance of an answer (no LLM).

The five issue types of the seed (feature 67.6), outside code:

- ``empty_heading``: a heading with no text, ``#``, ``## ``, ``## ##``;
- ``empty_list_item``: a list marker with nothing after it, ``-``, ``*``, ``+``, ``1.``, ``2)``;
- ``empty_link``: a link or image with an empty destination, ``[text]()``, ``[text]( )``,
  ``![alt](<>)``;
- ``non_sequential_citations``: the distinct cited numbers are not exactly 1..k. ``[1][3]``
  skips 2, ``[2]`` alone does not start at 1, ``[0]`` is below 1. The order in the text does
  not matter (``[2] ... [1]`` is sequential); a range ``[1-3]`` cites 1, 2 and 3;
- ``unclosed_code_fence``: a fence of backticks or tildes that is never closed.

Score::

    score = max(0, 1 - 0.1 * number of issue TYPES present)

A type costs 0.1 once however often it occurs, so the score is one of 1.0, 0.9, ..., 0.5, and
with the default threshold 0.95 a single issue fails the gate. Every occurrence is still listed
in ``details["issues"]`` with its line and the line's text.

Code is not checked: a ``#`` comment in a shell block is not a heading and ``a[1]`` in code is
not a citation (code and citation markers are read as in
:mod:`eval_harness.gates.citation_coverage`).
Degenerate input: an empty answer has no issues and scores 1.0; citation coverage is the gate
that fails it.
"""

from __future__ import annotations

import re
from time import perf_counter
from typing import Any

from eval_harness.gates.citation_coverage import CITATION_PATTERN, marker_numbers, parse_answer
from eval_harness.gates.result import GateResult, check_threshold

GATE_NAME = "format_compliance"
FORMAT_COMPLIANCE_THRESHOLD = 0.95
PENALTY_PER_ISSUE_TYPE = 0.1
MAX_LISTED_ISSUES = 50  # occurrences quoted in details; issue_count is always complete
SNIPPET_CHARS = 80

EMPTY_HEADING = "empty_heading"
EMPTY_LIST_ITEM = "empty_list_item"
EMPTY_LINK = "empty_link"
NON_SEQUENTIAL_CITATIONS = "non_sequential_citations"
UNCLOSED_CODE_FENCE = "unclosed_code_fence"
ISSUE_TYPES = (EMPTY_HEADING, EMPTY_LIST_ITEM, EMPTY_LINK, NON_SEQUENTIAL_CITATIONS,
               UNCLOSED_CODE_FENCE)

# Runs on "\n" + text: starting with a literal lets the regex engine skip ahead.
_EMPTY_BLOCK = re.compile(
    r"\n(?:[ \t]{0,3}(?P<heading>#{1,6})(?:[ \t]+#+)?|[ \t]*(?:[-*+]|\d{1,9}[.)]))"
    r"[ \t\r]*(?=\n|\Z)")
_EMPTY_LINK = re.compile(r"\[[^\]\n]*\]\([ \t]*(?:<[ \t]*>)?[ \t]*\)")


def format_compliance(answer: str, *,
                      threshold: float = FORMAT_COMPLIANCE_THRESHOLD) -> GateResult:
    """Penalise each type of Markdown defect once; see the module docstring for the rules."""
    started = perf_counter()
    threshold = check_threshold(GATE_NAME, threshold)
    if not isinstance(answer, str):
        raise TypeError(f"Gate {GATE_NAME!r}: the answer must be a Markdown string, "
                        f"got {type(answer).__name__}.")
    masked, unclosed_fence_lines, cited, _ = parse_answer(answer)
    found: list[tuple[str, int, dict[str, Any]]] = []  # (type, line, extra fields)

    lined = "\n" + masked  # now every line, the first included, follows a "\n"
    for block in _EMPTY_BLOCK.finditer(lined):
        kind = EMPTY_HEADING if block.group("heading") else EMPTY_LIST_ITEM
        found.append((kind, lined.count("\n", 0, block.start() + 1), {}))
    if ")" in masked and "](" in masked:  # one-character search first: it is a memchr
        for link in _EMPTY_LINK.finditer(masked):
            found.append((EMPTY_LINK, _line_of(masked, link.start()), {}))
    # distinct integers are exactly 1..k when the smallest is 1 and the largest is k
    if cited and not (min(cited) == 1 and max(cited) == len(cited)):
        found.append(_non_sequential_citations(masked, cited))
    for line in unclosed_fence_lines:
        found.append((UNCLOSED_CODE_FENCE, line, {}))

    issue_types = sorted({kind for kind, _, _ in found}) if found else []
    score = max(0.0, round(1.0 - PENALTY_PER_ISSUE_TYPE * len(issue_types), 10))
    details = {
        "issues": _describe(answer, found) if found else [],
        "issue_types": issue_types,
        "issue_count": len(found),
        "penalty_per_issue_type": PENALTY_PER_ISSUE_TYPE,
    }
    return GateResult(gate=GATE_NAME, score=score, passed=score >= threshold,
                      threshold=threshold, details=details,
                      latency_ms=(perf_counter() - started) * 1000.0)


def _non_sequential_citations(masked: str,
                              cited: frozenset[int]) -> tuple[str, int, dict[str, Any]]:
    """One issue, at the first marker citing a number outside the unbroken run 1, 2, ..."""
    run = 0
    while run + 1 in cited:
        run += 1
    outside_run = {n for n in cited if n < 1 or n > run}
    for marker in CITATION_PATTERN.finditer(masked):
        if not outside_run.isdisjoint(marker_numbers(marker.group(1))):
            break
    missing = [n for n in range(1, max(cited) + 1) if n not in cited]
    return (NON_SEQUENTIAL_CITATIONS, _line_of(masked, marker.start()),
            {"marker": marker.group(), "cited": sorted(cited), "missing": missing})


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _describe(answer: str, found: list[tuple[str, int, dict]]) -> list[dict[str, Any]]:
    lines = answer.split("\n")
    issues = []
    for kind, line, extra in sorted(found, key=lambda issue: issue[1])[:MAX_LISTED_ISSUES]:
        snippet = lines[line - 1].strip()
        if len(snippet) > SNIPPET_CHARS:
            snippet = snippet[:SNIPPET_CHARS - 1] + "…"
        issues.append({"type": kind, "line": line, "snippet": snippet, **extra})
    return issues
