"""Answers from a span file (OTLP/JSON, a Phoenix export), in two passes over the file so
that memory does not grow with it.

A trace's spans may be spread over the file (a collector writes spans in batches as they
end), so an answer can be made only once its trace's last span has been read. The first
pass reads every span's trace id and remembers, per trace, the number of its last span (a
hundred bytes or so a trace); the second reads the file again, holds the spans of the traces
still open, and makes each trace's answer
(:func:`eval_harness.gates.traces.spans.answer_of_trace`) as soon as its last span is read.
Memory is that of the traces open at once, which for a collector's file is a few batches.

The same span twice (the same trace and span id, as an exporter's retry writes it) is read
once when both copies are identical, and said in one note; copies that differ are a
conflict that refuses the file, naming both lines: which copy is right cannot be known.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from eval_harness.gates.answer_checks import FUTURE_TOLERANCE, AnswersFileError
from eval_harness.gates.traces import Span, TracedAnswer
from eval_harness.gates.traces.spans import answer_of_trace

# At most this many bad traces are named in the one message.
TRACES_NAMED = 3

class SpanReader(Protocol):
    """``(file:line, span)`` of every span of a file, in file order (with ``trace_ids``,
    the span's trace id instead of the span); what it skips appended to ``notes``."""

    def __call__(self, path: Path, notes: list[str] | None = None, *,
                 trace_ids: bool = False) -> Iterable[tuple[str, Any]]: ...


def traced_answers(path: Path, read_spans: SpanReader, *, notes: list[str],
                   check: Callable[[str, TracedAnswer, datetime], None]) -> Iterator[TracedAnswer]:
    """The answers of the span file ``path`` (``read_spans(path, notes)`` yields its
    ``(file:line, span)``), each passed to ``check(where, answer, latest)`` first.

    The first pass checks the file's JSON and each span's trace id; the rest of a span is
    checked in the second, as the answers come, so a bad span raises part way. A trace that
    makes no answer (or has two different copies of a span) is collected, and after the
    last answer :class:`AnswersFileError` names the first :data:`TRACES_NAMED` of them: a
    caller writing the answers as they come must roll back. What was skipped is appended to
    ``notes``."""
    last: dict[str, int] = {}
    number = 0
    for number, (_, trace_id) in enumerate(read_spans(path, notes, trace_ids=True), start=1):
        last[trace_id] = number
    if not number:
        raise AnswersFileError(f"{path}: no answers in the file")
    latest = datetime.now(UTC) + FUTURE_TOLERANCE
    open_traces: dict[str, _OpenTrace] = {}
    problems: list[tuple[int, str]] = []  # (first span's number, message), the first few
    bad = 0
    repeats: list[str] = []
    repeated = 0
    for number, (where, span) in enumerate(read_spans(path, None), start=1):
        trace = open_traces.get(span.trace_id)
        if trace is None:
            trace = open_traces[span.trace_id] = _OpenTrace(number, where)
        copy = trace.spans.get(span.span_id)
        if copy is None:
            trace.spans[span.span_id] = (where, span)
        elif copy[1] == span:
            repeated += 1
            repeats = repeats or [(f"{where}: span {span.span_id} of trace {span.trace_id} "
                                   f"repeats {copy[0]} identically")]
        elif trace.conflict is None:
            trace.conflict = (f"{where}: trace {span.trace_id}: span {span.span_id} differs "
                              f"from its copy at {copy[0]} ({_difference(copy[1], span)}); "
                              "the same trace twice with different content cannot be "
                              "imported: keep one copy")
        if number != last[span.trace_id]:
            continue
        del open_traces[span.trace_id]
        made = answer_of_trace(span.trace_id, [s for _, s in trace.spans.values()])
        if trace.conflict is None and isinstance(made, TracedAnswer):
            check(f"{trace.where}: trace {made.trace_id}", made, latest)
            yield made
            continue
        bad += 1
        message = trace.conflict or f"{trace.where}: {made}"
        if len(problems) < TRACES_NAMED or trace.first < problems[-1][0]:
            bisect.insort(problems, (trace.first, message))
            del problems[TRACES_NAMED:]
    if repeated:
        notes.append(repeats[0] + (f" (and {repeated - 1} more spans repeat an identical "
                                   "copy)" if repeated > 1 else "")
                     + "; each read once.")
    if problems:
        first, *more = (message for _, message in problems)
        rest = bad - 1 - len(more)
        tail = "".join(f"; {m}" for m in more) + (f"; and {rest} more bad traces" if rest
                                                  else "")
        raise AnswersFileError(f"{first}{tail}.")


class _OpenTrace:
    """The spans of a trace read so far (by span id, with where each is)."""

    __slots__ = ("conflict", "first", "spans", "where")

    def __init__(self, first: int, where: str) -> None:
        self.first = first  # the number of its first span, for the order of problems
        self.where = where
        self.spans: dict[str, tuple[str, Span]] = {}
        self.conflict: str | None = None


def _difference(one: Span, other: Span) -> str:
    """What two copies of a span differ in, for the conflict's message."""
    keys = sorted(set(one.attributes) | set(other.attributes))
    changed = [k for k in keys if one.attributes.get(k, None) != other.attributes.get(k, None)
               or (k in one.attributes) != (k in other.attributes)]
    if changed:
        return "attribute " + ", ".join(changed[:2]) + (" ..." if len(changed) > 2 else "")
    names = [f.name for f in fields(Span) if getattr(one, f.name) != getattr(other, f.name)]
    return ", ".join(names)
