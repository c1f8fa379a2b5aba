"""Spans from a Phoenix export: what Phoenix's client gives, saved as JSON.

Two shapes are read, one span per JSON object (a JSON Lines file, a JSON array, or the REST
answer ``{"data": [...], "next_cursor": ...}``):

- the span objects of Phoenix's REST API and client (``client.spans.get_spans(...)``,
  ``GET /v1/projects/{project}/spans``): ``{"name", "context": {"trace_id", "span_id"},
  "parent_id", "span_kind", "start_time", "end_time", "attributes": {...}}``;
- the rows of ``get_spans_dataframe()`` written with ``df.to_json(orient="records",
  lines=True)``: ``"context.trace_id"``, ``"context.span_id"``, ``"parent_id"``,
  ``"span_kind"``, ``"start_time"`` and one ``"attributes.<key>"`` column per attribute;
- top-level ``trace_id`` / ``span_id`` (Phoenix's older span model) are read as well.

Attributes may be nested (``{"retrieval": {"documents": [...]}}``) or dotted; both are
flattened (:func:`~eval_harness.gates.traces.flat_attributes`), null values dropped. Times
are ISO-8601 (without a timezone: UTC, as Phoenix stores them) or epoch numbers (seconds,
milliseconds as pandas writes them, micro- or nanoseconds, told apart by size). The kind is
the ``openinference.span.kind`` attribute, else ``span_kind``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_harness.gates.answer_checks import AnswersFileError, epoch_time
from eval_harness.gates.answer_formats.json_records import json_records
from eval_harness.gates.answer_formats.otlp_json import hex_id
from eval_harness.gates.traces import Span, flat_attributes
from eval_harness.gates.traces.spans import SPAN_KIND

_ATTRIBUTE_COLUMN = "attributes."


def is_phoenix_span(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` looks like one of Phoenix's span shapes."""
    context = record.get("context")
    return (isinstance(context, Mapping) and "trace_id" in context) \
        or "context.trace_id" in record \
        or ({"trace_id", "span_id"} <= record.keys()
            and ("span_kind" in record or "attributes" in record))


def _time(value: Any, field: str) -> datetime | None:
    """An ISO-8601 or epoch time (None when absent); :class:`ValueError` naming ``field``
    when it is outside what Python and Postgres can hold."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = float(value)
        while seconds > 1e11 and math.isfinite(seconds):  # ms, us or ns since the epoch
            seconds /= 1000
        return epoch_time(seconds, field, value)
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def span_from_phoenix(record: Mapping[str, Any]) -> Span:
    """One Phoenix span (either shape) as a :class:`Span`; :class:`ValueError` says what is
    wrong."""
    context = record.get("context") if isinstance(record.get("context"), Mapping) else {}
    trace_id = hex_id(_first(context.get("trace_id"), record.get("context.trace_id"),
                             record.get("trace_id")), 16)
    span_id = hex_id(_first(context.get("span_id"), record.get("context.span_id"),
                            record.get("span_id")), 8)
    if trace_id is None:
        raise ValueError("its context.trace_id is not 32 hex digits")
    if span_id is None:
        raise ValueError(f"a span of trace {trace_id} has a context.span_id that is not 16 hex "
                         "digits")
    try:
        start = _time(record.get("start_time"), "start_time")
        end = _time(record.get("end_time"), "end_time")
    except ValueError as exc:
        raise ValueError(f"span {span_id} of trace {trace_id}: {exc}") from None
    if start is None:
        raise ValueError(f"span {span_id} has no start_time (ISO-8601 or epoch)")
    nested = record.get("attributes")
    if nested is not None and not isinstance(nested, Mapping):
        raise ValueError(f"span {span_id}: 'attributes' must be an object")
    columns = {key[len(_ATTRIBUTE_COLUMN):]: value for key, value in record.items()
               if key.startswith(_ATTRIBUTE_COLUMN)}
    attributes = {key: value for key, value in flat_attributes({**(nested or {}), **columns})
                  .items() if value is not None}
    kind = attributes.get(SPAN_KIND) or record.get("span_kind")
    parent = record.get("parent_id")
    return Span(trace_id, span_id, hex_id(parent, 8) if parent else None,
                str(record.get("name") or ""), kind.upper() if isinstance(kind, str) else "",
                start, end, attributes)


def read_phoenix_spans(path: Path, notes: list[str] | None = None, *, trace_ids: bool = False
                       ) -> Iterator[tuple[str, Any]]:
    """``(where, span)`` of every span of a Phoenix span export, in file order (``notes``
    is for what a reader skips: a Phoenix export holds nothing to skip); with ``trace_ids``
    each span's trace id instead."""
    for where, record in json_records(path):
        if not is_phoenix_span(record):
            raise AnswersFileError(f"{where}: not a Phoenix span (no context.trace_id)")
        try:
            span = span_from_phoenix(record)
            yield where, (span.trace_id if trace_ids else span)
        except ValueError as exc:
            raise AnswersFileError(f"{where}: {exc}") from None
