"""A JSON file read a piece at a time, each piece with its line: memory stays flat however
large the file, even when it is one JSON document on one line.

:class:`JsonStream` walks the outer containers token by token (:meth:`~JsonStream.elements`
of an array, :meth:`~JsonStream.keys` of an object) and decodes whatever the reader wants
whole with the standard library's C decoder (:meth:`~JsonStream.value`). The file is a
sequence of top-level JSON values, so JSON Lines and a single document (pretty-printed or
not) read the same way. Only the text of the value being decoded is held, and a chunk
(:data:`CHUNK`) around it. Bytes that are not UTF-8, text that is not JSON, a non-finite
number and nesting deeper than :data:`~eval_harness.gates.answer_checks.MAX_NESTING` stop
the read with :class:`~eval_harness.gates.answer_checks.AnswersFileError` naming
``file:line``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_checks import AnswersFileError, check_numbers, json_decoder, too_deep

CHUNK = 1 << 20  # characters read at a time
_UNDECODABLE = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8 (surrogateescape)
_WHITESPACE = re.compile(r"[ \t\r\n]*")
# A decode error this close to the end of the text read so far may be the cut, not the JSON.
_CUT_MARGIN = 16


def _skip_whitespace(text: str, pos: int) -> int:
    found = _WHITESPACE.match(text, pos)
    return found.end() if found else pos


class JsonStream:
    """The JSON values of one file, read incrementally (use as a context manager)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file = path.open(encoding="utf-8", errors="surrogateescape")
        except FileNotFoundError:
            raise AnswersFileError(f"{path}: file not found") from None
        except OSError as exc:  # a folder, no permission: said the same way, by the path
            raise AnswersFileError(f"{path}: cannot be read ({exc.strerror})") from None
        self._text = ""
        self._pos = 0      # where reading goes on in _text
        self._counted = 0  # _text[:_counted] has been counted into _line
        self._line = 1
        self._eof = False
        self._started = False
        self._decoder, self._numbers = json_decoder()
        self._top_line: int | None = None  # where the top-level value being read starts
        self._json_lines: bool | None = None  # one top-level value per line, as far as seen
        self._top_pos: int | None = None
        self._member: str | None = None  # the member whose value is read next
        self._line_head = 0  # UTF-8 bytes of the current line in the text dropped so far

    def __enter__(self) -> JsonStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    # --- position ------------------------------------------------------------------------

    def line(self, pos: int | None = None) -> int:
        """The line of ``pos`` in the text read (default: where reading goes on)."""
        pos = self._pos if pos is None else pos
        if pos >= self._counted:
            self._line += self._text.count("\n", self._counted, pos)
        else:  # an error's position behind the count: count back
            self._line -= self._text.count("\n", pos, self._counted)
        self._counted = pos
        return self._line

    def where(self, pos: int | None = None) -> str:
        """``file:line`` of ``pos`` (default: where reading goes on)."""
        return f"{self.path}:{self.line(pos)}"

    def _fill(self, at_least: int = 0) -> bool:
        """Read more text; False at the end of the file."""
        if self._eof:
            return False
        if self._pos > CHUNK and self._pos > len(self._text) // 2:  # drop what was read
            self.line(self._pos)
            dropped = self._text[:self._pos]
            newline = dropped.rfind("\n")
            self._line_head = (0 if newline >= 0 else self._line_head) + len(
                dropped[newline + 1:].encode("utf-8", "surrogateescape"))
            self._text = self._text[self._pos:]
            self._counted -= self._pos
            if self._top_pos is not None:
                self._top_pos = None if self._top_pos < self._pos else self._top_pos - self._pos
            self._pos = 0
        chunk = self._file.read(max(at_least, CHUNK))
        if not self._started:
            chunk = chunk.removeprefix("\ufeff")  # a byte order mark is no content
            self._started = True
        if not chunk:
            self._eof = True
            return False
        bad = None if chunk.isascii() else _UNDECODABLE.search(chunk)  # isascii: a C scan
        if bad:
            self._undecodable(len(self._text) + bad.start(), chunk)
        self._text += chunk
        return True

    def _undecodable(self, pos: int, chunk: str) -> None:
        text = self._text + chunk
        start = text.rfind("\n", 0, pos) + 1
        head = self._line_head if start == 0 else 0  # the line began in text already dropped
        column = head + len(text[start:pos].encode("utf-8", "surrogateescape")) + 1
        self._text = text
        raise AnswersFileError(
            f"{self.where(pos)}: not valid UTF-8 (byte 0x{ord(text[pos]) - 0xDC00:02x} at byte "
            f"{column} of the line); save the file as UTF-8 (from Latin-1: iconv -f latin1 -t "
            "utf-8).")

    def _invalid(self, pos: int, reason: str) -> AnswersFileError:
        """"not valid JSON" at ``pos``; in JSON Lines, named by the line of the value that
        breaks (the decoder only fails on a later line, where the broken one runs into the
        next)."""
        line = self.line(pos)
        json_lines = self._json_lines or (self._json_lines is None and self._lines_ahead())
        if json_lines and self._top_line is not None and line > self._top_line:
            line, reason = self._top_line, f"{reason}; the line ends before its value does"
        return AnswersFileError(f"{self.path}:{line}: not valid JSON ({reason})")

    def _lines_ahead(self) -> bool:
        """While the first value is read: whether the next line starts a value as its line
        does (JSON Lines whose first line broke), not a member of a document over lines."""
        top = self._top_pos
        if top is None or (top > 0 and self._text[top - 1] != "\n"):
            return False
        end = self._text.find("\n", top)
        rest = self._text[end:].lstrip("\r\n") if end >= 0 else ""
        return bool(rest) and rest[0] in "{[" and self._text[top] in "{["  # not indented

    def documents(self) -> Iterator[int]:
        """Yield once per top-level value of the file, with its line; the caller reads the
        value before the next ``next()``."""
        while self.peek():
            self._top_line, self._top_pos = self.line(), self._pos
            yield self._top_line
            ended = self.line()
            if self._json_lines is None or self._json_lines:
                self._json_lines = ended == self._top_line and self._next_on_new_line()
            self._top_line = self._top_pos = None

    def _next_on_new_line(self) -> bool:
        while True:
            rest = self._text[self._pos:_skip_whitespace(self._text, self._pos)]
            if self._pos + len(rest) < len(self._text) or not self._fill():
                return "\n" in rest or self._pos + len(rest) >= len(self._text)

    # --- tokens ----------------------------------------------------------------------------

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file)."""
        while True:
            self._pos = _skip_whitespace(self._text, self._pos)
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._fill():
                return ""

    def _take(self, expected: str, after: str) -> None:
        found = self.peek()
        if found != expected:
            shown = repr(found) if found else "the end of the file"
            raise self._invalid(self._pos, f"expected '{expected}' {after}, found {shown}")
        self._pos += 1

    def elements(self) -> Iterator[int]:
        """Enter the array that comes next and yield once per element, with the element's
        line; the caller reads each element (:meth:`value`, :meth:`keys`, ...) before the
        next ``next()``."""
        self._take("[", "(an array)")
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            self.peek()
            yield self.line()
            if self.peek() == ",":
                self._pos += 1
                continue
            self._take("]", "or ',' after an array element")
            return

    def keys(self) -> Iterator[tuple[str, int]]:
        """Enter the object that comes next and yield ``(key, line)`` per member; the
        caller reads each member's value before the next ``next()``."""
        self._take("{", "(an object)")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            if self.peek() != '"':
                self._take('"', "(a member's name)")
            key, line = self.value()
            self._take(":", "after a member's name")
            self._member = key
            yield key, line
            self._member = None
            if self.peek() == ",":
                self._pos += 1
                continue
            self._take("}", "or ',' after an object member")
            return

    def value(self) -> tuple[Any, int]:
        """The next JSON value, decoded whole, and the line it starts on."""
        if not self.peek():
            raise self._invalid(self._pos, "the file ends where a value should be")
        while True:
            start = self._pos  # the text before it may have been dropped by _fill
            self._numbers.bad = None
            try:
                value, end = self._decoder.raw_decode(self._text, start)
            except RecursionError:
                raise too_deep(self.where(start), self._text, start, self._member) from None
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self._text) - _CUT_MARGIN \
                    or exc.msg.startswith("Unterminated string")
                if cut and self._fill(len(self._text) - start):  # read as much again
                    continue
                raise self._invalid(exc.pos, exc.msg) from None
            except ValueError as exc:  # an integer of more than 4,300 digits
                raise AnswersFileError(f"{self.where(start)}: not valid JSON ({exc})") from None
            if end == len(self._text) and self._fill():  # a number may go on
                continue
            break
        self._pos = end
        line = self.line(start)
        check_numbers(value, self._numbers, f"{self.path}:{line}")
        return value, line

    def skip(self) -> None:
        """Read past the next value."""
        self.value()
