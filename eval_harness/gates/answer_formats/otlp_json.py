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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_formats.json_records import json_records
from eval_harness.gates.answers import AnswersFileError
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


def any_value(value: Any) -> Any:
    """The Python value of an OTLP AnyValue (lists for arrays, dicts for kvlists)."""
    if not isinstance(value, Mapping) or not value:
        return None
    for key in ("stringValue", "string_value"):
        if key in value:
            return value[key]
    for key in ("boolValue", "bool_value"):
        if key in value:
            return bool(value[key])
    for key in ("intValue", "int_value"):
        if key in value:
            return int(value[key])
    for key in ("doubleValue", "double_value"):
        if key in value:
            return float(value[key])
    for key in ("arrayValue", "array_value"):
        if key in value:
            return [any_value(v) for v in (value[key] or {}).get("values", [])]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return key_values((value[key] or {}).get("values", []))
    for key in ("bytesValue", "bytes_value"):
        if key in value:
            return value[key]
    return None


def key_values(items: Any) -> dict[str, Any]:
    """``[{"key", "value": AnyValue}, ...]`` as a dict."""
    if not isinstance(items, list):
        raise ValueError("attributes must be a list of {key, value} objects")
    found = {}
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise ValueError("attributes must be a list of {key, value} objects")
        found[item["key"]] = any_value(item.get("value"))
    return found


def _time(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    try:
        nanos = int(value)
    except ValueError:
        return None
    if nanos <= 0:
        return None
    return datetime.fromtimestamp(nanos // 1_000_000_000, timezone.utc).replace(
        microsecond=(nanos % 1_000_000_000) // 1000)


def span_from_otlp(span: Mapping[str, Any]) -> Span:
    """One OTLP/JSON span as a :class:`Span`; :class:`ValueError` says what is wrong."""
    trace_id = hex_id(_field(span, "traceId"), 16)
    span_id = hex_id(_field(span, "spanId"), 8)
    if trace_id is None:
        raise ValueError("its traceId is not 16 bytes of hex (or base64)")
    if span_id is None:
        raise ValueError(f"a span of trace {trace_id} has a spanId that is not 8 bytes of hex "
                         "(or base64)")
    start = _time(_field(span, "startTimeUnixNano"))
    if start is None:
        raise ValueError(f"span {span_id} has no startTimeUnixNano")
    try:
        attributes = key_values(span.get("attributes", []))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"span {span_id}: {exc}") from None
    kind = attributes.get(SPAN_KIND)
    return Span(trace_id, span_id, hex_id(_field(span, "parentSpanId"), 8),
                str(span.get("name") or ""), kind.upper() if isinstance(kind, str) else "",
                start, _time(_field(span, "endTimeUnixNano")), attributes)


def read_otlp_spans(path: Path) -> Iterator[tuple[str, Span]]:
    """``(file:line, span)`` of every span of an OTLP/JSON file, in file order."""
    for where, request in json_records(path):
        resource_spans = _field(request, "resourceSpans")
        if not isinstance(resource_spans, list):
            raise AnswersFileError(f"{where}: not an OTLP/JSON trace export (no resourceSpans "
                                   "list)")
        for resource in resource_spans:
            for scope in _list(resource, "scopeSpans", where):
                for span in _list(scope, "spans", where):
                    if not isinstance(span, Mapping):
                        raise AnswersFileError(f"{where}: a span is not a JSON object")
                    try:
                        yield where, span_from_otlp(span)
                    except ValueError as exc:
                        raise AnswersFileError(f"{where}: {exc}") from None


def _list(obj: Any, camel: str, where: str) -> list:
    value = _field(obj, camel) if isinstance(obj, Mapping) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnswersFileError(f"{where}: '{camel}' must be a list")
    return value
