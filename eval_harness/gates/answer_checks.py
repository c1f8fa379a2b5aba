"""What an imported answer may hold, checked where each import format reads its records.

Every format (the harness's JSONL, OTLP/JSON and Phoenix spans, RAGAS and DeepEval rows) reads
through these checks, so a value that Python, Postgres or the gates would refuse later is
named now, with ``file:line`` (or the trace) and the field, before anything is written:

- JSON (:func:`parse_json`, :func:`json_decoder`): ``NaN`` / ``Infinity`` and numbers beyond a
  double (``1e400``) are refused naming their field, because Postgres' ``jsonb`` stores
  neither; a record nested more than :data:`MAX_NESTING` levels deep is refused (no answer
  needs that, and walking it would exhaust Python's recursion limit);
- ids (:func:`checked_id`): a non-empty string (an integer is taken as its decimal string) of
  at most :data:`MAX_ID_LENGTH` characters: the id is the answers table's primary key, and a
  B-tree entry holds at most 2,704 bytes (512 characters of UTF-8 take at most 2,048);
- times (:func:`check_created_at`, :func:`epoch_time`): from :data:`EARLIEST_CREATED_AT`
  (the Unix epoch: no system wrote an answer before it, and trace times count from it) to
  :data:`FUTURE_TOLERANCE` after the import's clock (a later date is a bug in the exporting
  system, and it would put the answer in a partition the gates refuse);
- text (:func:`check_text`): no NUL character and no unpaired surrogate (JSON can spell
  both, Postgres text cannot).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from eval_harness.errors import InvalidInput

MAX_NESTING = 100
MAX_ID_LENGTH = 512
EARLIEST_CREATED_AT = datetime(1970, 1, 1, tzinfo=UTC)
# Clock skew between the exporting system and this one; anything later is a wrong date.
FUTURE_TOLERANCE = timedelta(days=1)
_FIX_DATE = ("fix the date in the system that exported the file, or leave the field out to "
             "stamp the import time.")
_LATEST_EPOCH_SECONDS = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


class AnswersFileError(InvalidInput):
    """An answers file is missing or malformed; the message names the file and the line."""


# --- JSON ----------------------------------------------------------------------------------

class _Numbers:
    """The JSON decoder's number hooks: remembers a number no double (or jsonb) can hold."""

    __slots__ = ("bad",)

    def __init__(self) -> None:
        self.bad: str | None = None

    def number(self, literal: str) -> float:
        value = float(literal)
        if math.isinf(value) and self.bad is None:
            self.bad = literal
        return value

    def constant(self, name: str) -> float:
        if self.bad is None:
            self.bad = name
        return math.nan


def json_decoder() -> tuple[json.JSONDecoder, _Numbers]:
    """A decoder that keeps reading past a non-finite number, and what it saw: after a
    decode, call :func:`check_numbers` on the value (streaming readers decode many values
    with one decoder; reset ``numbers.bad`` after a refused one)."""
    numbers = _Numbers()
    return json.JSONDecoder(parse_float=numbers.number, parse_constant=numbers.constant), numbers


def parse_json(text: str, where: str, *, nesting: bool = True,
               error_line: bool = False) -> Any:
    """``text`` as JSON, or :class:`AnswersFileError` naming ``where`` and what is wrong: not
    JSON (with ``error_line``, ``where`` is a file and the line of the error is added), a
    non-finite number (and its field), nesting deeper than :data:`MAX_NESTING`
    (``nesting=False`` leaves the depth to the caller's own bounded walk)."""
    decoder, numbers = json_decoder()
    try:
        value = decoder.decode(text)
    except RecursionError:
        raise too_deep(where, text) from None
    except ValueError as exc:  # JSONDecodeError, or an integer of more than 4,300 digits
        if isinstance(exc, json.JSONDecodeError):
            reason, where = exc.msg, f"{where}:{exc.lineno}" if error_line else where
        else:
            reason = str(exc)
        raise AnswersFileError(f"{where}: not valid JSON ({reason})") from None
    check_numbers(value, numbers, where)
    if nesting and text.count("{") + text.count("[") > MAX_NESTING:  # else it cannot be
        check_nesting(value, where)
    return value


def check_numbers(value: Any, numbers: _Numbers, where: str) -> None:
    """Raise naming the field of the first non-finite number the decoder saw in ``value``."""
    if numbers.bad is None:
        return
    literal, numbers.bad = numbers.bad, None
    field = next((path for path, item in _walk(value)
                  if isinstance(item, float) and not math.isfinite(item)), None)
    what = f"'{field}' is {literal}" if field else f"a number is {literal}"
    raise AnswersFileError(f"{where}: {what}, which is not a finite JSON number (Postgres "
                           "cannot store it); write a finite number or null.")


def check_nesting(value: Any, where: str) -> None:
    """Raise when ``value`` nests containers more than :data:`MAX_NESTING` deep."""
    for path, _ in _walk(value, stop_below=MAX_NESTING):
        raise _nested(where, path.split(".")[0].split("[")[0])  # the member it is in


def too_deep(where: str, text: str, start: int = 0, member: str | None = None
             ) -> AnswersFileError:
    """The error for JSON ``text`` (from ``start``) too deep to decode, naming the member
    the deep part is in (``member`` when the value is one): the text is scanned up to where
    it passes :data:`MAX_NESTING`."""
    keys: list[str | None] = []  # the member name each open container is in
    key, depth, pos = None, 0, start
    string = re.compile(r'"(?:[^"\\]|\\.)*"')
    while pos < len(text) and depth <= MAX_NESTING:
        char = text[pos]
        if char == '"':
            match = string.match(text, pos)
            if match is None:
                break
            pos = match.end()
            colon = re.compile(r"\s*:").match(text, pos)
            if colon:
                key = match.group()[1:-1]
            continue
        if char in "{[":
            keys.append(key)
            depth += 1
            key = None
        elif char in "}]":
            depth -= 1
            if keys:
                keys.pop()
        pos += 1
    field = member or next((k for k in keys if k is not None), None)
    return _nested(where, field or "")


def _nested(where: str, field: str) -> AnswersFileError:
    at = f" (in '{field[:80]}')" if field else ""
    return AnswersFileError(f"{where}: nested more than {MAX_NESTING} levels deep{at}; an "
                            "answer's record needs far fewer: flatten that field.")


def _walk(value: Any, *, stop_below: int | None = None) -> Iterator[tuple[str, Any]]:
    """``(path, item)`` of every item in ``value`` (``sources[0].score``), depth first,
    without recursion; with ``stop_below`` only the containers deeper than that."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if stop_below is None:
            yield path, item
        if isinstance(item, (dict, list)):
            if stop_below is not None and depth >= stop_below:
                yield path, item
                continue
            children = (item.items() if isinstance(item, dict) else enumerate(item))
            for key, child in reversed(list(children)):
                step = f"[{key}]" if isinstance(key, int) else (f".{key}" if path else key)
                stack.append((path + step, child, depth + 1))


# --- fields --------------------------------------------------------------------------------

def checked_id(value: Any, where: str, field: str = "id") -> str:
    """``value`` as an answer id: a non-empty string or an integer (as its decimal string),
    at most :data:`MAX_ID_LENGTH` characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise AnswersFileError(f"{where}: '{field}' must be a non-empty string or an integer")
    if len(value) > MAX_ID_LENGTH:
        raise AnswersFileError(f"{where}: '{field}' is {len(value):,} characters long; an id "
                               f"may have at most {MAX_ID_LENGTH} (it is the answers table's "
                               "key): use a shorter id, or a hash of this one.")
    return value


def check_created_at(moment: datetime, where: str, field: str, latest: datetime, *,
                     shown: str | None = None, fix: str = _FIX_DATE) -> None:
    """Raise unless ``moment`` (timezone-aware) lies from :data:`EARLIEST_CREATED_AT` to
    ``latest`` (the import's clock plus :data:`FUTURE_TOLERANCE`); the sentence names
    ``where``, ``field`` (as written: ``'created_at'``), the value (``shown``, default its
    ISO form) and what to do (``fix``)."""
    shown = shown or moment.isoformat()
    if moment < EARLIEST_CREATED_AT:
        raise AnswersFileError(f"{where}: {field} {shown} is before 1970 (the Unix epoch), "
                               f"which no answer can be; {fix}")
    if moment > latest:
        raise AnswersFileError(
            f"{where}: {field} {shown} is in the future (more than a day after now, "
            f"{latest - FUTURE_TOLERANCE:%Y-%m-%d %H:%M} UTC); {fix}")


def epoch_time(seconds: float, field: str, shown: Any) -> datetime:
    """``seconds`` since the epoch as a UTC time; :class:`ValueError` naming ``field`` and
    its value as written (``shown``) when it is outside the years 1970 to 9999 (Python's
    datetime ends there; before, see :data:`EARLIEST_CREATED_AT`)."""
    if not 0 <= seconds <= _LATEST_EPOCH_SECONDS:  # False for NaN too
        raise ValueError(f"'{field}' {str(shown)[:40]} is not a time from 1970 to 9999")
    return datetime.fromtimestamp(seconds, UTC)


def check_text(value: Any, where: str) -> None:
    """Raise when a string in ``value`` (strings, lists and objects, keys too) holds a NUL
    character or an unpaired surrogate, neither of which Postgres text can store."""
    if not any(_unstorable(text) for text in _strings(value)):
        return
    for path, item in _walk(value):  # found: now the slower walk that knows the field
        for text in ((item, *item) if isinstance(item, dict) else (item,)):
            if not isinstance(text, str) or not _unstorable(text):
                continue
            field = f" in '{path}'" if path else ""
            if "\x00" in text:
                raise AnswersFileError(f"{where}: contains a NUL character{field}, which "
                                       "Postgres cannot store")
            bad = next(c for c in text if "\ud800" <= c <= "\udfff")
            raise AnswersFileError(f"{where}: contains an unpaired surrogate "
                                   f"(\\u{ord(bad):04x}){field}, which is not valid Unicode; "
                                   "fix the tool that wrote it.")


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _unstorable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:  # a C loop; it refuses exactly the unpaired surrogates
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
