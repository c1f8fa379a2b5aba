"""JSON records of an import file, each with where it is (``file:line``), whether the file is
JSON Lines (one object per line) or one JSON document (an array of objects, or an object
holding one under ``data``, as Phoenix's REST API answers), read a record at a time.

Bytes that are not UTF-8, a line that is not JSON, a non-finite number, nesting deeper than
:data:`~eval_harness.gates.answer_checks.MAX_NESTING` and a record that is not an object stop
the read with :class:`AnswersFileError` naming ``file:line``
(:func:`~eval_harness.gates.answer_checks.parse_json`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answer_formats.json_stream import JsonStream
from eval_harness.datasets.beir import DatasetError, utf8_lines


def text_lines(path: Path, *, blank: bool = False) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of the non-blank lines (every line with ``blank``) of a UTF-8
    file."""
    if not path.is_file():
        raise AnswersFileError(f"{path}: file not found")
    with closing(utf8_lines(path)) as lines:
        while True:
            try:
                line_no, line = next(lines)
            except StopIteration:
                return
            except DatasetError as exc:
                raise AnswersFileError(str(exc)) from None
            if blank or line.strip():
                yield line_no, line


def first_line(path: Path) -> str | None:
    """The first non-blank line of ``path`` (None for an empty file)."""
    for _, line in text_lines(path):
        return line
    return None


def first_line_number(path: Path) -> int:
    """The number of the first non-blank line of ``path`` (1 for an empty file)."""
    for line_no, _ in text_lines(path):
        return line_no
    return 1


def json_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file:line, object)`` of every record of ``path``, read incrementally
    (:class:`~.json_stream.JsonStream`): JSON Lines, a JSON array of records, or a REST answer
    holding them under ``data`` (``{"data": [...], "next_cursor": ...}``); the line is where
    the record starts."""
    if not path.is_file():
        raise AnswersFileError(f"{path}: file not found")
    with JsonStream(path) as stream:
        if not stream.peek():
            raise AnswersFileError(f"{path}: no records in the file")
        for _ in stream.documents():
            if stream.peek() == "[":
                for _ in stream.elements():
                    yield _record(stream)
            else:
                yield from _object_records(stream)


def _object_records(stream: JsonStream) -> Iterator[tuple[str, dict[str, Any]]]:
    """One record, or the records of a REST answer's ``data`` list."""
    if stream.peek() != "{":
        yield _record(stream)
        return
    record: dict[str, Any] = {}
    line = stream.line()
    wrapper = False
    for key, _ in stream.keys():
        if key == "data" and stream.peek() == "[" and not wrapper:
            wrapper = True
            for _ in stream.elements():
                yield _record(stream)
        else:
            record[key] = stream.value()[0]
    if not wrapper:
        yield f"{stream.path}:{line}", record


def _record(stream: JsonStream) -> tuple[str, dict[str, Any]]:
    record, line = stream.value()
    where = f"{stream.path}:{line}"
    if not isinstance(record, dict):
        raise AnswersFileError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return where, record
