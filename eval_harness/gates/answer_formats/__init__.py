"""Answers files in other tools' formats: ``eval-harness answers import FILE [--format F]``.

Formats (:data:`FORMATS`), detected from the file when not named (:func:`detect_format`):

- ``jsonl``: the harness's own answers file (:mod:`eval_harness.gates.answers`);
- ``openinference``: OpenInference spans exported from Phoenix (:mod:`.phoenix`);
- ``otlp-json``: OTLP/JSON trace exports, as a collector's file exporter writes them
  (:mod:`.otlp_json`);
- ``ragas``: RAGAS ``SingleTurnSample`` rows, JSONL or CSV (:mod:`.eval_datasets`);
- ``deepeval``: DeepEval test cases, JSON or CSV (:mod:`.eval_datasets`).

Span formats make one answer per trace (:func:`eval_harness.gates.traces.answer_of_trace`),
keyed by trace id and keeping the LLM span id; they are read twice, in constant memory
(:mod:`.span_files`; OTLP/JSON incrementally, even one document on one line). Every record's
fields are checked where it is read (:mod:`eval_harness.gates.answer_checks`): the first bad
one stops the import naming ``file:line`` (or the trace id) and the field, and nothing is
written. :func:`eval_harness.gates.answers.import_answers` merges the answers in one
transaction, by id: reimporting a file changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from eval_harness.gates.answer_checks import (
    FUTURE_TOLERANCE,
    AnswersFileError,
    check_created_at,
    check_text,
    checked_id,
    parse_json,
)
from eval_harness.gates.answer_formats import eval_datasets
from eval_harness.gates.answer_formats.json_records import first_line, first_line_number
from eval_harness.gates.answer_formats.json_stream import JsonStream
from eval_harness.gates.answer_formats.otlp_json import read_otlp_spans
from eval_harness.gates.answer_formats.phoenix import is_phoenix_span, read_phoenix_spans
from eval_harness.gates.answer_formats.span_files import traced_answers
from eval_harness.gates.answers import DEFAULT_RELATION, ImportReport, import_answers

FORMATS = ("jsonl", "openinference", "otlp-json", "ragas", "deepeval")
_SPAN_READERS = {"openinference": read_phoenix_spans, "otlp-json": read_otlp_spans}
# A first line longer than this is not read whole to tell the format (one OTLP document on
# one line can be hundreds of megabytes): its first keys are read instead.
_LONG_LINE = 1 << 16


@dataclass(frozen=True)
class FormatGuess:
    format: str
    reason: str  # what in the file told it, for the command's "detected" line


def detect_format(path: Path | str) -> FormatGuess:
    """The format of ``path``, from its first record (or a CSV file's header)."""
    path = Path(path)
    with JsonStream(path) as stream:
        start = stream.peek()
        if not start:
            raise AnswersFileError(f"{path}: the file is empty")
        if start in "{[" and _first_line_is_long(path):
            record = _first_keys(stream)
        else:
            record = None
    if start not in "{[":
        return _csv_guess(path, (first_line(path) or "").strip())
    if record is None:
        record = _first_record(path, (first_line(path) or "").strip())
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


def _first_line_is_long(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="surrogateescape") as handle:
        for line in iter(lambda: handle.readline(_LONG_LINE), ""):
            if line.strip():
                return not line.endswith("\n") and len(line) >= _LONG_LINE
    return False


def _first_keys(stream: JsonStream) -> dict[str, Any] | None:
    """The first record's members, read up to a key that tells an OTLP export (whose value
    is not read)."""
    if stream.peek() == "[":
        for _ in stream.elements():
            return _first_keys(stream) if stream.peek() in "{[" else None
        return None
    record: dict[str, Any] = {}
    for key, _ in stream.keys():
        if key in ("resourceSpans", "resource_spans"):
            return {key: None}
        if key == "data" and stream.peek() == "[":
            return _first_keys(stream)
        record[key] = stream.value()[0]
    return record


def _document_first(path: Path) -> Any:
    with JsonStream(path) as stream:
        return _first_keys(stream)


def _csv_guess(path: Path, header: str) -> FormatGuess:
    columns = {c.strip().strip('"') for c in header.split(",")}
    if "user_input" in columns:
        return FormatGuess("ragas", "a CSV header with user_input (RAGAS)")
    if "actual_output" in columns or "input" in columns:
        return FormatGuess("deepeval", "a CSV header with input / actual_output (DeepEval)")
    raise AnswersFileError(f"{path}: not JSON and not a RAGAS or DeepEval CSV file (no "
                           "user_input or input column); name the format with --format")


def answer_records(path: Path | str, fmt: str, *,
                   notes: list[str] | None = None) -> Iterator[Any] | None:
    """The validated answers of ``path`` read as ``fmt``, as they are read; None for
    ``jsonl``, which :func:`~eval_harness.gates.answers.import_answers` reads itself.

    A span file is read as the answers are taken (:func:`.span_files.traced_answers`): a
    bad trace raises part way, so a caller writing them must roll back. What a reader
    skipped is appended to ``notes``."""
    path = Path(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown answers format '{fmt}'; one of {', '.join(FORMATS)}")
    if fmt == "jsonl":
        return None
    if fmt in _SPAN_READERS:
        return traced_answers(path, _SPAN_READERS[fmt], check=_check_storable,
                              notes=[] if notes is None else notes)
    records = eval_datasets.read_rows(path, fmt)
    if not records:
        raise AnswersFileError(f"{path}: no answers in the file")
    latest = datetime.now(UTC) + FUTURE_TOLERANCE
    for record in records:
        _check_storable(record.where, record, latest)
    return iter(records)


def read_answer_records(path: Path | str, fmt: str) -> list[Any] | None:
    """:func:`answer_records` in a list (for a file that fits in memory)."""
    records = answer_records(path, fmt)
    return None if records is None else list(records)


def _check_storable(where: str, record: Any, latest: datetime) -> None:
    """What Postgres or the gates would refuse later, named now (see
    :mod:`eval_harness.gates.answer_checks`)."""
    checked_id(record.id, where)
    if record.created_at is not None:
        check_created_at(record.created_at, where, "its root span's start", latest,
                         fix="fix the clock of the system that wrote the trace.")
    check_text({"query": record.query, "answer": record.answer, "sources": record.sources},
               where)


def import_answers_file(conn: psycopg.Connection, path: Path | str, *, fmt: str | None = None,
                        relation: str = DEFAULT_RELATION, notes: list[str] | None = None
                        ) -> tuple[ImportReport, FormatGuess]:
    """Import ``path`` in format ``fmt`` (detected when None) into ``relation``; the report
    and the format used. What the reader skipped is appended to ``notes``."""
    path = Path(path)
    if not path.is_file():
        raise AnswersFileError(f"{path}: file not found")
    guess = FormatGuess(fmt, "named with --format") if fmt else detect_format(path)
    records = answer_records(path, guess.format, notes=notes)
    return import_answers(conn, path, relation=relation, records=records,
                          traced=guess.format in _SPAN_READERS), guess
