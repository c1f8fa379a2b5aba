"""Gate results out as OpenTelemetry ``gen_ai.evaluation.result`` events (``gate --otlp``).

Each gate outcome (:mod:`eval_harness.gates.outcomes`) becomes one log record emitted through
the OpenTelemetry SDK's Logs API (``LoggerProvider``, ``Logger.emit(event_name=...)``), as the
GenAI semantic conventions define the event (open-telemetry/semantic-conventions-genai,
``model/gen-ai/events.yaml``; stability: development):

- ``gen_ai.evaluation.name`` (required): the gate;
- ``gen_ai.evaluation.score.value``: the score on the gate's configured scale (left out when
  the gate could not score the answer);
- ``gen_ai.evaluation.score.label``: ``pass`` or ``fail``;
- ``gen_ai.evaluation.explanation``: the gate's one-line reason;
- ``gen_ai.response.id``: the answer's id, for answers that did not come from a trace (the
  conventions ask for it "when span id is not available");
- ``eval_harness.answer.id`` and ``eval_harness.threshold``: the answer and the threshold;
- the record's trace and span ids: the answer's trace and LLM span when it was imported from a
  trace, so a tracing backend shows the event on that span.

The records go out through the SDK's OTLP exporters: to a URL by OTLP/HTTP (protobuf,
``opentelemetry-exporter-otlp-proto-http``; ``http://host:4318`` gets ``/v1/logs``), or to a
FILE as OTLP/JSON lines, one ``ExportLogsServiceRequest`` per line as a collector's file
exporter writes them: encoded by the SDK's protobuf encoder and written with protobuf's
``json_format``, trace and span ids as hex (the OTLP/JSON rule). Needs the ``otel`` extra.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from time import time_ns
from typing import Any
from urllib.parse import urlsplit

from eval_harness.escaping.visible import encodable
from eval_harness.gates.outcomes import GateOutcome

# The OpenTelemetry SDK and its exporters are an optional extra (``otel``): imported where an
# event is written, so that without them ``gate --otlp`` says so in one sentence.

EVENT_NAME = "gen_ai.evaluation.result"
INSTRUMENTATION_SCOPE = "eval_harness.gates"
SERVICE_NAME = "eval-harness"
EXPORT_TIMEOUT_SECONDS = 30


class OtlpError(RuntimeError):
    """The events could not be written or delivered; the message says where and why."""


def event_attributes(outcome: GateOutcome) -> dict[str, Any]:
    """The ``gen_ai.evaluation.result`` attributes of ``outcome``. Texts go as they are
    (protobuf and OTLP/JSON carry any control character), but a lone surrogate, which the
    protobuf encoder refuses (it would drop the attribute with a logged traceback), is
    written as its escape (:func:`~eval_harness.escaping.visible.encodable`)."""
    answer_id = encodable(outcome.answer_id)
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": encodable(outcome.gate),
        "gen_ai.evaluation.score.label": outcome.label,
        "gen_ai.evaluation.explanation": encodable(outcome.explanation),
        "eval_harness.answer.id": answer_id,
        "eval_harness.threshold": outcome.threshold,
    }
    if outcome.score is not None:
        attributes["gen_ai.evaluation.score.value"] = float(outcome.score)
    if not outcome.span_id:
        attributes["gen_ai.response.id"] = answer_id
    return attributes


def is_url(target: str) -> bool:
    return urlsplit(target).scheme in ("http", "https")


def logs_endpoint(url: str) -> str:
    """``url`` with OTLP/HTTP's ``/v1/logs`` path when it has none."""
    parts = urlsplit(url)
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/logs"


def _sdk():
    try:
        from opentelemetry.sdk import _logs as logs
        from opentelemetry.sdk._logs import export
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        raise OtlpError("gate --otlp needs the OpenTelemetry SDK: pip install "
                        "'eval-harness[otel]'") from None
    return logs, export, Resource


def _json_lines_exporter(path: Path):
    """An SDK log exporter writing OTLP/JSON lines to ``path`` (created or truncated)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    _, export, _ = _sdk()

    class OtlpJsonLinesExporter(export.LogRecordExporter):
        def __init__(self) -> None:
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in shutdown

        def export(self, batch):
            request = MessageToDict(encode_logs(batch), use_integers_for_enums=True)
            _hex_ids(request)
            self._file.write(json.dumps(request, separators=(",", ":")) + "\n")
            self._file.flush()
            return export.LogRecordExportResult.SUCCESS

        def shutdown(self) -> None:
            self._file.close()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return OtlpJsonLinesExporter()


def _hex_ids(request: dict[str, Any]) -> None:
    """protobuf's JSON mapping writes bytes as base64; OTLP/JSON has trace and span ids in hex."""
    for resource in request.get("resourceLogs", []):
        for scope in resource.get("scopeLogs", []):
            for record in scope.get("logRecords", []):
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()


def _counting(inner, delivered: list[int], failures: list[str]):
    """``inner`` noting how many records it delivered, and why a batch failed."""
    _, export, _ = _sdk()

    class Counting(export.LogRecordExporter):
        def export(self, batch):
            try:
                result = inner.export(batch)
            except Exception as exc:  # noqa: BLE001 - a file that cannot be written, say
                failures.append(f"{type(exc).__name__}: {exc}")
                return export.LogRecordExportResult.FAILURE
            if result == export.LogRecordExportResult.SUCCESS:
                delivered[0] += len(batch)
            else:
                failures.append(f"the exporter reported {result.name}")
            return result

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return Counting()


def _context(outcome: GateOutcome):
    """The context that links the event to the answer's span (None: not from a trace)."""
    if not (outcome.trace_id and outcome.span_id):
        return None
    from opentelemetry import trace

    span = trace.NonRecordingSpan(trace.SpanContext(
        int(outcome.trace_id, 16), int(outcome.span_id, 16), is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)))
    return trace.set_span_in_context(span)


def emit_evaluation_events(target: str, outcomes: Sequence[GateOutcome], *,
                           timeout_seconds: float = EXPORT_TIMEOUT_SECONDS) -> int:
    """Write one ``gen_ai.evaluation.result`` event per outcome to ``target`` (a FILE path or
    an ``http(s)://`` collector URL); how many were delivered. :class:`OtlpError` when some
    were not (a collector is retried by the exporter for at most ``timeout_seconds``)."""
    logs, export, Resource = _sdk()
    from opentelemetry._logs import SeverityNumber

    if is_url(target):
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        except ImportError:
            raise OtlpError("gate --otlp URL needs the OTLP/HTTP exporter: pip install "
                            "'eval-harness[otel]'") from None
        inner = OTLPLogExporter(endpoint=logs_endpoint(target), timeout=timeout_seconds)
        where = logs_endpoint(target)
    else:
        path = Path(target)
        try:
            inner = _json_lines_exporter(path)
        except OSError as exc:
            raise OtlpError(f"cannot write {path}: {exc.strerror or exc}") from None
        where = str(path)
    delivered, failures = [0], []
    provider = logs.LoggerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_log_record_processor(export.BatchLogRecordProcessor(
        _counting(inner, delivered, failures), max_export_batch_size=512))
    logger = provider.get_logger(INSTRUMENTATION_SCOPE)
    try:
        for outcome in outcomes:
            logger.emit(event_name=EVENT_NAME, context=_context(outcome), timestamp=time_ns(),
                        severity_number=SeverityNumber.INFO,
                        attributes=event_attributes(outcome))
        provider.force_flush(int(timeout_seconds * 2000))
    finally:
        provider.shutdown()
    if failures or delivered[0] != len(outcomes):
        reason = failures[0] if failures else "the exporter did not finish in time"
        raise OtlpError(f"{delivered[0]} of {len(outcomes)} evaluation events reached {where} "
                        f"({reason}).")
    return delivered[0]
