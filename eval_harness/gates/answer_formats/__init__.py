"""Answers files in other tools' formats: ``eval-harness answers import FILE [--format F]``.

Formats (:data:`FORMATS`), detected from the file when not named (:func:`detect_format`):

- ``jsonl``: the harness's own answers file (:mod:`eval_harness.gates.answers`);
- ``openinference``: OpenInference spans exported from Phoenix (:mod:`.phoenix`);
- ``otlp-json``: OTLP/JSON trace exports, as a collector's file exporter writes them
  (:mod:`.otlp_json`);
- ``ragas``: RAGAS ``SingleTurnSample`` rows, JSONL or CSV (:mod:`.eval_datasets`);
- ``deepeval``: DeepEval test cases, JSON or CSV (:mod:`.eval_datasets`).

Span formats make one answer per trace (:func:`eval_harness.gates.traces.answers_from_spans`),
keyed by trace id and keeping the LLM span id. Every record is read and checked before the
store is touched; the first bad one stops the import naming ``file:line`` (or the trace id),
and nothing is written. Then :func:`eval_harness.gates.answers.import_answers` merges the
answers in one transaction, by id: reimporting a file changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg

from eval_harness.gates.answer_formats import eval_datasets
from eval_harness.gates.answer_formats.json_records import (first_line, first_line_number,
                                                           parse_json)
from eval_harness.gates.answer_formats.otlp_json import read_otlp_spans
from eval_harness.gates.answer_formats.phoenix import is_phoenix_span, read_phoenix_spans
from eval_harness.gates.answers import (DEFAULT_RELATION, FUTURE_TOLERANCE, AnswersFileError,
                                        ImportReport, import_answers)
from eval_harness.gates.traces import answers_from_spans

FORMATS = ("jsonl", "openinference", "otlp-json", "ragas", "deepeval")
_SPAN_READERS = {"openinference": read_phoenix_spans, "otlp-json": read_otlp_spans}
# At most this many bad traces are named in the one message.
_TRACES_NAMED = 3
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class FormatGuess:
    format: str
    reason: str  # what in the file told it, for the command's "detected" line


def detect_format(path: Path | str) -> FormatGuess:
    """The format of ``path``, from its first record (or a CSV file's header)."""
    path = Path(path)
    line = first_line(path)
    if line is None:
        raise AnswersFileError(f"{path}: the file is empty")
    text = line.strip()
    if not text.startswith(("{", "[")):
        return _csv_guess(path, text)
    record = _first_record(path, text)
    if record is None:
        raise AnswersFileError(f"{path}: cannot tell the format from its first record; name "
                               f"it with --format ({', '.join(FORMATS)})")
    if "resourceSpans" in record or "resource_spans" in record:
        return FormatGuess("otlp-json", "resourceSpans (an OTLP/JSON trace export)")
    if is_phoenix_span(record):
        return FormatGuess("openinference", "spans with context.trace_id (a Phoenix export)")
    if "user_input" in record:
        return FormatGuess("ragas", "user_input (RAGAS SingleTurnSample rows)")
    if "actual_output" in record or ("input" in record and "retrieval_context" in record):
        return FormatGuess("deepeval", "input / actual_output (DeepEval test cases)")
    if {"id", "query", "answer"} <= record.keys():
        return FormatGuess("jsonl", "id / query / answer (the harness's answers file)")
    keys = ", ".join(sorted(record)[:6])
    raise AnswersFileError(f"{path}: cannot tell the format from its first record (keys: "
                           f"{keys}); name it with --format ({', '.join(FORMATS)})")


def _first_record(path: Path, text: str) -> dict[str, Any] | None:
    if text.startswith("{"):
        try:
            record = parse_json(text, f"{path}:{first_line_number(path)}")
        except AnswersFileError as line_error:  # a JSON document over several lines?
            try:
                record = _document_first(path)
            except AnswersFileError:
                raise line_error from None
    else:
        record = _document_first(path)
    if isinstance(record, dict) and isinstance(record.get("data"), list):  # a REST answer
        record = record["data"][0] if record["data"] else None
    return record if isinstance(record, dict) else None


def _document_first(path: Path) -> Any:
    document = parse_json(path.read_text(encoding="utf-8-sig"), str(path))
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        document = document["data"]
    if isinstance(document, list):
        return document[0] if document else None
    return document


def _csv_guess(path: Path, header: str) -> FormatGuess:
    columns = {c.strip().strip('"') for c in header.split(",")}
    if "user_input" in columns:
        return FormatGuess("ragas", "a CSV header with user_input (RAGAS)")
    if "actual_output" in columns or "input" in columns:
        return FormatGuess("deepeval", "a CSV header with input / actual_output (DeepEval)")
    raise AnswersFileError(f"{path}: not JSON and not a RAGAS or DeepEval CSV file (no "
                           "user_input or input column); name the format with --format")


def read_answer_records(path: Path | str, fmt: str) -> list[Any] | None:
    """The validated answers of ``path`` read as ``fmt``; None for ``jsonl``, which
    :func:`~eval_harness.gates.answers.import_answers` reads itself."""
    path = Path(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown answers format '{fmt}'; one of {', '.join(FORMATS)}")
    if fmt == "jsonl":
        return None
    if fmt in _SPAN_READERS:
        records, wheres = _traced_answers(path, fmt)
    else:
        records = eval_datasets.read_rows(path, fmt)
        wheres = {r.id: r.where for r in records}
    if not records:
        raise AnswersFileError(f"{path}: no answers in the file")
    latest = datetime.now(timezone.utc) + FUTURE_TOLERANCE
    for record in records:
        _check_storable(wheres[record.id], record, latest)
    return records


def _traced_answers(path: Path, fmt: str) -> tuple[list[Any], dict[str, str]]:
    """The answers of a span file, and where each trace's first span is (``file:line: trace
    ID``)."""
    first_seen: dict[str, str] = {}
    spans = []
    for where, span in _SPAN_READERS[fmt](path):
        first_seen.setdefault(span.trace_id, where)
        spans.append(span)
    answers, problems = answers_from_spans(spans)
    if problems:
        first = problems[0]
        more = problems[1:_TRACES_NAMED]
        rest = len(problems) - 1 - len(more)
        tail = "".join(f"; {p}" for p in more) + (f"; and {rest} more bad traces" if rest
                                                  else "")
        raise AnswersFileError(f"{first_seen[first.trace_id]}: {first}{tail}.")
    return answers, {a.id: f"{first_seen[a.trace_id]}: trace {a.trace_id}" for a in answers}


def _check_storable(where: str, record: Any, latest: datetime) -> None:
    """What Postgres or the gates would refuse later, named now: a date in the future, a NUL
    character, an unpaired surrogate (JSON can spell both, Postgres text cannot)."""
    if record.created_at is not None and record.created_at > latest:
        raise AnswersFileError(
            f"{where}: created {record.created_at.isoformat()}, more than a day after now "
            f"({latest - FUTURE_TOLERANCE:%Y-%m-%d %H:%M} UTC); fix the clock of the system "
            "that wrote it.")
    for text in _strings([record.query, record.answer, record.sources]):
        if "\x00" in text:
            raise AnswersFileError(f"{where}: contains a NUL character, which Postgres cannot "
                                   "store")
        bad = _SURROGATE.search(text)
        if bad:
            raise AnswersFileError(f"{where}: contains an unpaired surrogate "
                                   f"(\\u{ord(bad.group()):04x}), which is not valid Unicode; "
                                   "fix the tool that wrote it.")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def import_answers_file(conn: psycopg.Connection, path: Path | str, *, fmt: str | None = None,
                        relation: str = DEFAULT_RELATION) -> tuple[ImportReport, FormatGuess]:
    """Import ``path`` in format ``fmt`` (detected when None) into ``relation``; the report
    and the format used."""
    path = Path(path)
    if not path.is_file():
        raise AnswersFileError(f"{path}: file not found")
    guess = FormatGuess(fmt, "named with --format") if fmt else detect_format(path)
    records: Sequence[Any] | None = read_answer_records(path, guess.format)
    return import_answers(conn, path, relation=relation, records=records), guess
