"""JSON records of an import file, each with where it is (``file:line``), whether the file is
JSON Lines (one object per line) or one JSON document (an array of objects, or an object
holding one under ``data``, as Phoenix's REST API answers).

Bytes that are not UTF-8, a line that is not JSON, a non-finite number, nesting deeper than
:data:`~eval_harness.gates.answer_checks.MAX_NESTING` and a record that is not an object stop
the read with :class:`AnswersFileError` naming ``file:line``
(:func:`~eval_harness.gates.answer_checks.parse_json`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from itertools import chain
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_checks import AnswersFileError, parse_json
from eval_harness.store.beir import DatasetError
from eval_harness.store.beir import _text_lines as utf8_lines


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
    """``(where, object)`` of every record of ``path``: ``file:line`` for JSON Lines; for one
    JSON document, the file and the record's position (``file: record 3``)."""
    lines = text_lines(path)
    first = next(lines, None)
    if first is None:
        raise AnswersFileError(f"{path}: no records in the file")
    stripped = first[1].strip()
    if stripped.startswith("["):
        yield from _records_of(path, _document(path))
        return
    if stripped.startswith("{") and not _is_record(stripped):
        try:  # an object over several lines, or a REST answer {"data": [...]}
            document = _document(path)
        except AnswersFileError:
            pass  # a broken first line of JSON Lines: named below by its line
        else:
            yield from _records_of(path, document)
            return
    for line_no, text in chain([first], lines):
        record = parse_json(text, f"{path}:{line_no}")
        if not isinstance(record, dict):
            raise AnswersFileError(f"{path}:{line_no}: expected a JSON object, got "
                                   f"{type(record).__name__}")
        yield f"{path}:{line_no}", record


def _is_record(text: str) -> bool:
    """Whether ``text`` is one whole JSON record (not the start of a document spread over
    lines, nor a REST answer holding its records under ``data``)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # named when the line is read as a record
        return False
    return not (isinstance(value, dict) and isinstance(value.get("data"), list))


def _document(path: Path) -> Any:
    """The file as one JSON document; where it does not parse is named by line."""
    text = "".join(t for _, t in text_lines(path, blank=True))
    return parse_json(text, str(path), error_line=True)


def _records_of(path: Path, document: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        document = document["data"]
    if not isinstance(document, list):
        raise AnswersFileError(f"{path}: expected a JSON array of records (or one "
                               "JSON object per line)")
    for number, record in enumerate(document, start=1):
        where = f"{path}: record {number}"
        if not isinstance(record, dict):
            raise AnswersFileError(f"{where}: expected a JSON object, got "
                                   f"{type(record).__name__}")
        yield where, record
