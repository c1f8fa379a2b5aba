"""Spans from OTLP/JSON files, as an OpenTelemetry collector's file exporter writes them.

Each line is one ``ExportTraceServiceRequest`` in the OTLP/JSON encoding:
``{"resourceSpans": [{"resource": ..., "scopeSpans": [{"scope": ..., "spans": [...]}]}]}``.
A span has ``traceId`` / ``spanId`` / ``parentSpanId`` (hex, as the OTLP/JSON spec says; the
base64 that protobuf's generic JSON mapping writes is read too), ``name``,
``startTimeUnixNano`` / ``endTimeUnixNano`` (decimal strings or numbers) and ``attributes``,
a list of ``{"key", "value": AnyValue}`` where AnyValue is one of ``stringValue``,
``boolValue``, ``intValue`` (a decimal string), ``doubleValue``, ``bytesValue``,
``arrayValue {values}`` or ``kvlistValue {values}``. The OpenInference kind is the
``openinference.span.kind`` attribute. snake_case field names (``trace_id``) are read too.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_checks import MAX_NESTING, AnswersFileError, epoch_time
from eval_harness.gates.answer_formats.json_stream import JsonStream
from eval_harness.gates.traces import Span
from eval_harness.gates.traces.spans import SPAN_KIND

_HEX = re.compile(r"[0-9a-fA-F]+")


def _field(obj: Mapping[str, Any], camel: str) -> Any:
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel))


def hex_id(value: Any, size: int) -> str | None:
    """A trace (``size`` 16 bytes) or span (8) id as lower-case hex, from hex or base64;
    None when it is neither. An all-zero id is no id."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == 2 * size and _HEX.fullmatch(value):
        text = value.lower()
    else:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) != size:
            return None
        text = raw.hex()
    return None if text.strip("0") == "" else text


def any_value(value: Any, depth: int = 0) -> Any:
    """The Python value of an OTLP AnyValue (lists for arrays, dicts for kvlists);
    :class:`ValueError` for arrays and kvlists nested more than
    :data:`~eval_harness.gates.answer_checks.MAX_NESTING` deep."""
    if not isinstance(value, dict) or not value:  # JSON objects are dicts (a fast check)
        return None
    if depth > MAX_NESTING:
        raise ValueError(f"an attribute's value nests arrays or kvlists more than "
                         f"{MAX_NESTING} deep")
    for key in ("stringValue", "string_value"):
        if key in value:
            return value[key]
    for key in ("boolValue", "bool_value"):
        if key in value:
            return bool(value[key])
    for key in ("intValue", "int_value"):
        if key in value:
            try:
                return int(value[key])
            except (TypeError, ValueError):
                raise ValueError(f"intValue {str(value[key])[:40]!r} is not an integer"
                                 ) from None
    for key in ("doubleValue", "double_value"):
        if key in value:
            try:  # "NaN" and "Infinity" are valid OTLP/JSON doubles
                return float(value[key])
            except (TypeError, ValueError):
                raise ValueError(f"doubleValue {str(value[key])[:40]!r} is not a number"
                                 ) from None
    for key in ("arrayValue", "array_value"):
        if key in value:
            return [any_value(v, depth + 1) for v in _values(value[key])]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return key_values(_values(value[key]), depth + 1)
    for key in ("bytesValue", "bytes_value"):
        if key in value:
            return value[key]
    return None


def key_values(items: Any, depth: int = 0) -> dict[str, Any]:
    """``[{"key", "value": AnyValue}, ...]`` as a dict."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError("attributes must be a list of {key, value} objects")
    found = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError("attributes must be a list of {key, value} objects")
        try:
            found[item["key"]] = any_value(item.get("value"), depth)
        except ValueError as exc:
            raise ValueError(f"attribute '{item['key'][:80]}': {exc}") from None
    return found


def _values(container: Any) -> list:
    values = container.get("values") if isinstance(container, dict) else None
    if values is not None and not isinstance(values, list):
        raise ValueError("an arrayValue's or kvlistValue's 'values' must be a list")
    return values or []


def _time(value: Any, field: str) -> datetime | None:
    """A ``*TimeUnixNano`` as a UTC time (None when absent or zero, as OTLP has "unset");
    :class:`ValueError` naming ``field`` when it is no time."""
    if value is None or value in (0, "0"):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"'{field}' must be nanoseconds since 1970 (a decimal string or a "
                         "number)")
    try:
        nanos = int(value)
    except (ValueError, OverflowError):
        raise ValueError(f"'{field}' {str(value)[:40]!r} is not a number of nanoseconds"
                         ) from None
    moment = epoch_time(nanos // 1_000_000_000, field, value)
    return moment.replace(microsecond=(nanos % 1_000_000_000) // 1000)


def _trace_id(span: Mapping[str, Any]) -> str:
    trace_id = hex_id(_field(span, "traceId"), 16)
    if trace_id is None:
        raise ValueError("its traceId is not 16 bytes of hex (or base64)")
    return trace_id


def span_from_otlp(span: Mapping[str, Any]) -> Span:
    """One OTLP/JSON span as a :class:`Span`; :class:`ValueError` says what is wrong."""
    trace_id = _trace_id(span)
    span_id = hex_id(_field(span, "spanId"), 8)
    if span_id is None:
        raise ValueError(f"a span of trace {trace_id} has a spanId that is not 8 bytes of hex "
                         "(or base64)")
    try:
        start = _time(_field(span, "startTimeUnixNano"), "startTimeUnixNano")
        end = _time(_field(span, "endTimeUnixNano"), "endTimeUnixNano")
        attributes = key_values(span.get("attributes", []))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"span {span_id} of trace {trace_id}: {exc}") from None
    if start is None:
        raise ValueError(f"span {span_id} has no startTimeUnixNano")
    kind = attributes.get(SPAN_KIND)
    return Span(trace_id, span_id, hex_id(_field(span, "parentSpanId"), 8),
                str(span.get("name") or ""), kind.upper() if isinstance(kind, str) else "",
                start, end, attributes)


def read_otlp_spans(path: Path, notes: list[str] | None = None, *, trace_ids: bool = False
                    ) -> Iterator[tuple[str, Any]]:
    """``(file:line, span)`` of every span of an OTLP/JSON file, in file order, read
    incrementally (:class:`~.json_stream.JsonStream`): JSON Lines of
    ExportTraceServiceRequests, one such document (on one line or pretty-printed), or a
    JSON array of them. What holds no spans though it says it does (``"spans": null``) is
    skipped and said in ``notes``, when given. With ``trace_ids``, each span's trace id
    instead of the span (its other fields are not checked: a quicker first pass)."""
    skipped = _Skipped(notes, trace_ids)
    with JsonStream(path) as stream:
        for _ in stream.documents():
            if stream.peek() == "[":
                for _ in stream.elements():
                    yield from _request(stream, skipped)
            else:
                yield from _request(stream, skipped)
    skipped.close()


def _request(stream: JsonStream, skipped: _Skipped) -> Iterator[tuple[str, Span | str]]:
    """The spans of one ExportTraceServiceRequest (or of a ``{"data": [...]}`` of them)."""
    line = stream.line()
    if stream.peek() != "{":
        kind = type(stream.value()[0]).__name__
        raise AnswersFileError(f"{stream.path}:{line}: expected a JSON object, got {kind}")
    found = False
    for key, _ in stream.keys():
        if key in ("resourceSpans", "resource_spans") and stream.peek() == "[":
            found = True
            for number, _ in enumerate(stream.elements(), start=1):
                yield from _resource(stream, skipped, number)
        elif key == "data" and stream.peek() == "[":
            found = True
            for _ in stream.elements():
                yield from _request(stream, skipped)
        else:
            stream.skip()
    if not found:
        raise AnswersFileError(f"{stream.path}:{line}: not an OTLP/JSON trace export (no "
                               "resourceSpans list)")


def _resource(stream: JsonStream, skipped: _Skipped, number: int
              ) -> Iterator[tuple[str, Span | str]]:
    line = stream.line()
    if stream.peek() != "{":
        value = stream.value()[0]
        if value is not None:
            raise AnswersFileError(f"{stream.path}:{line}: resourceSpans {number} is not an "
                                   "object")
        skipped.add(f"{stream.path}:{line}: resourceSpans {number} is null")
        return
    for key, _ in stream.keys():
        if key not in ("scopeSpans", "scope_spans"):
            stream.skip()
        elif stream.peek() == "[":
            for scope, _ in enumerate(stream.elements(), start=1):
                yield from _scope(stream, skipped, scope)
        elif stream.value()[0] is None:
            skipped.add(f"{stream.path}:{line}: resourceSpans {number} has no scopeSpans "
                        "(null)")
        else:
            raise AnswersFileError(f"{stream.path}:{line}: 'scopeSpans' must be a list")


def _scope(stream: JsonStream, skipped: _Skipped, number: int) -> Iterator[tuple[str, Span | str]]:
    line = stream.line()
    if stream.peek() != "{":
        if stream.value()[0] is not None:
            raise AnswersFileError(f"{stream.path}:{line}: scopeSpans {number} is not an "
                                   "object")
        skipped.add(f"{stream.path}:{line}: scopeSpans {number} is null")
        return
    name, null_spans = None, False
    for key, _ in stream.keys():
        if key == "scope":
            scope = stream.value()[0]
            name = scope.get("name") if isinstance(scope, dict) else None
        elif key != "spans":
            stream.skip()
        elif stream.peek() == "[":
            for _ in stream.elements():
                span, at = stream.value()
                where = f"{stream.path}:{at}"
                if not isinstance(span, dict):
                    raise AnswersFileError(f"{where}: a span is not a JSON object")
                try:
                    yield where, (_trace_id(span) if skipped.trace_ids else span_from_otlp(span))
                except ValueError as exc:
                    raise AnswersFileError(f"{where}: {exc}") from None
        elif stream.value()[0] is None:
            null_spans = True
        else:
            raise AnswersFileError(f"{stream.path}:{line}: 'spans' must be a list")
    if null_spans:
        named = f"'{str(name)[:80]}'" if isinstance(name, str) and name else f"{number} (unnamed)"
        skipped.add(f"{stream.path}:{line}: scope {named} has no spans (null)")


class _Skipped:
    """What a read skipped, said in ``notes``: the first few, then how many more (and
    whether the read wants trace ids only)."""

    SAID = 3

    def __init__(self, notes: list[str] | None, trace_ids: bool) -> None:
        self._notes = notes
        self._count = 0
        self.trace_ids = trace_ids

    def add(self, what: str) -> None:
        self._count += 1
        if self._notes is not None and self._count <= self.SAID:
            self._notes.append(f"{what}; skipped.")

    def close(self) -> None:
        if self._notes is not None and self._count > self.SAID:
            self._notes.append(f"and {self._count - self.SAID} more skipped (null spans, "
                               "scopes or resources).")
