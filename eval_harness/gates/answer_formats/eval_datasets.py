"""Answers from evaluation datasets: RAGAS ``SingleTurnSample`` rows and DeepEval test cases.

RAGAS (``EvaluationDataset.to_jsonl`` / ``to_csv``): ``user_input`` is the query,
``response`` the answer, ``retrieved_contexts`` (a list of strings; in CSV the list as
written by pandas, ``['a', 'b']``, or JSON) the sources in rank order, their ids from
``retrieved_context_ids`` when present.

DeepEval (``EvaluationDataset.save_as("json" | "jsonl" | "csv", include_test_cases=True)``):
``input`` is the query, ``actual_output`` the answer, ``retrieval_context`` the sources (a
list in JSON; in CSV and JSONL DeepEval joins it with ``|``, which is split again; a ``|``
inside a passage cannot be told apart, so prefer the JSON file).

An answer's id is the row's own ``id`` field when it has one, else ``ragas:`` or
``deepeval:`` and a SHA-256 of the query, answer and sources (the same row always gets the
same id, so reimporting is idempotent; two identical rows are one answer, and the second is
refused as a duplicate). A source without an id gets ``sha256:`` and 16 hex digits of its
text, so the same passage has the same id in every answer. Rows carry no time: a new answer
gets the import's time and keeps it. Other fields (``reference``, ``expected_output``, ...)
are ignored.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_checks import AnswersFileError, check_text, checked_id
from eval_harness.gates.answer_formats.json_records import json_records, text_lines

DEEPEVAL_DELIMITER = "|"


@dataclass(frozen=True)
class DatasetAnswer:
    """One answer read from an evaluation dataset row, with where the row is."""

    id: str
    query: str
    answer: str
    sources: list[dict[str, Any]]
    where: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class _Fields:
    query: str
    answer: str
    contexts: str
    context_ids: str | None
    prefix: str


_FIELDS = {"ragas": _Fields("user_input", "response", "retrieved_contexts",
                            "retrieved_context_ids", "ragas"),
           "deepeval": _Fields("input", "actual_output", "retrieval_context", None,
                               "deepeval")}


def read_rows(path: Path, fmt: str) -> list[DatasetAnswer]:
    """Every row of a RAGAS or DeepEval file as an answer; the first bad row raises
    :class:`AnswersFileError` naming it."""
    fields = _FIELDS[fmt]
    answers: list[DatasetAnswer] = []
    seen: dict[str, str] = {}
    for where, row in (_csv_rows(path) if _is_csv(path) else json_records(path)):
        answer = _answer(row, where, fields, fmt)
        if answer.id in seen:
            raise AnswersFileError(f"{where}: duplicate id '{answer.id}' (the same row as "
                                   f"{seen[answer.id]})")
        seen[answer.id] = where
        answers.append(answer)
    return answers


def _is_csv(path: Path) -> bool:
    for _, line in text_lines(path):
        return not line.lstrip().startswith(("{", "["))
    return False


def _csv_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    lines = text_lines(path, blank=True)
    reader = csv.DictReader(line for _, line in lines)
    start = 2
    try:
        for row in reader:
            where = f"{path}:{start}"
            start = reader.line_num + 1
            if None in row:
                raise AnswersFileError(f"{where}: more values than the header has columns")
            yield where, row
    except csv.Error as exc:
        raise AnswersFileError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None


def _answer(row: dict[str, Any], where: str, fields: _Fields, fmt: str) -> DatasetAnswer:
    query, answer = row.get(fields.query), row.get(fields.answer)
    if not isinstance(query, str) or not query.strip():
        raise AnswersFileError(f"{where}: '{fields.query}' (the query) is missing or empty")
    if not isinstance(answer, str):
        hint = (" (a DeepEval golden has no answer: run your app over the goldens and save "
                "the test cases)" if fmt == "deepeval" else "")
        raise AnswersFileError(f"{where}: '{fields.answer}' (the answer) is missing{hint}")
    contexts = _text_list(row.get(fields.contexts), where, fields.contexts, fmt, ids=False)
    ids = (_text_list(row.get(fields.context_ids), where, fields.context_ids, fmt, ids=True)
           if fields.context_ids and row.get(fields.context_ids) not in (None, "") else None)
    if ids is not None and len(ids) != len(contexts):
        raise AnswersFileError(f"{where}: '{fields.context_ids}' has {len(ids)} ids for "
                               f"{len(contexts)} '{fields.contexts}'")
    check_text({fields.query: query, fields.answer: answer, fields.contexts: contexts}, where)
    sources = [{"id": str(ids[i]) if ids else _text_id(text), "text": text}
               for i, text in enumerate(contexts)]
    own = row.get("id")
    if own is None or own == "":
        own = f"{fields.prefix}:{_row_hash(query, answer, contexts)}"
    else:
        own = checked_id(own, where)
    return DatasetAnswer(own, query, answer, sources, where)


def _text_list(value: Any, where: str, name: str, fmt: str, *, ids: bool) -> list[Any]:
    """A list of strings (with ``ids``, integers too) from JSON or one CSV cell."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = _parse_cell(value, fmt)
    if not isinstance(value, list):
        raise AnswersFileError(f"{where}: '{name}' must be a list of strings")
    for number, item in enumerate(value, start=1):
        if not (isinstance(item, str)
                or (ids and isinstance(item, int) and not isinstance(item, bool))):
            raise AnswersFileError(f"{where}: '{name}' must be a list of strings; item "
                                   f"{number} is {_json_type(item)}")
    return value


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", dict: "an object",
             list: "a list", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _parse_cell(text: str, fmt: str) -> Any:
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        try:
            return ast.literal_eval(stripped)  # pandas writes Python lists: ['a', 'b']
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    if fmt == "deepeval":
        return text.split(DEEPEVAL_DELIMITER)
    return [text]


def _text_id(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _row_hash(query: str, answer: str, contexts: list[Any]) -> str:
    canonical = json.dumps([query, answer, contexts], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:24]
