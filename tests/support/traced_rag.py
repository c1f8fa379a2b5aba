"""A tiny RAG loop traced with OpenInference, and its spans written as the tools that carry
traces write them.

The loop uses the real libraries: opentelemetry-sdk (TracerProvider, an in-memory exporter),
openinference-instrumentation (OITracer and its attribute helpers, which follow
openinference-semantic-conventions). Each question makes one trace: a CHAIN root span, an
optional query-rewriting LLM call, a RETRIEVER span with the ranked documents, and the LLM
span that answers (its output.value is the provider's JSON, the text in
llm.output_messages, as the OpenAI instrumentation records it).

Writers:
- :func:`otlp_json_lines`: what an OTel collector's file exporter writes, one
  ExportTraceServiceRequest per line, encoded by opentelemetry-exporter-otlp-proto-common and
  google.protobuf.json_format, with the ids turned into hex as the OTLP/JSON spec (and the
  collector) has them (``ids="base64"`` keeps protobuf's generic mapping);
- :func:`phoenix_rest_spans`: spans in the shape of Phoenix's REST API and client
  (``GET /v1/projects/{p}/spans``, phoenix-client's v1 ``Span``: context, span_kind,
  ISO times, nested attributes), written from its documented schema (arize-phoenix is not a
  test dependency);
- :func:`phoenix_dataframe_jsonl`: ``get_spans_dataframe()``'s columns, written by pandas'
  ``to_json(orient="records", lines=True)``.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
from google.protobuf.json_format import MessageToDict
from openinference.instrumentation import (
    OITracer,
    TraceConfig,
    get_input_attributes,
    get_llm_attributes,
    get_output_attributes,
    get_retriever_attributes,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

CORPUS = {"doc-aspirin": "Aspirin lowers the risk of heart attacks in adults.",
          "doc-statins": "Statins lower LDL cholesterol in most adults.",
          "doc-sleep": "Sleep improves memory consolidation."}
QUESTIONS = ("Does aspirin lower the risk of heart attacks?",
             "Do statins lower cholesterol?",
             "Does sleep help memory?")


@dataclass(frozen=True)
class Expected:
    """What the importer should make of one traced call."""

    trace_id: str
    span_id: str  # the answering LLM span
    query: str
    answer: str
    source_ids: list[str]
    started: datetime


def _ranked(question: str, top: int = 2) -> list[dict]:
    words = set(re.findall(r"\w+", question.lower()))
    scored = [(len(words & set(re.findall(r"\w+", text.lower()))) / len(words), doc_id, text)
              for doc_id, text in CORPUS.items()]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [{"id": doc_id, "content": text, "score": score}
            for score, doc_id, text in scored[:top]]


def run_rag(questions=QUESTIONS, *, rewrite: bool = True, answer_span: bool = True,
            ) -> tuple[list[ReadableSpan], list[Expected]]:
    """Answer ``questions`` through the traced loop: the finished spans and what each trace
    should import as. ``answer_span=False`` leaves out the answering LLM span (a bad trace);
    ``rewrite=False`` the query-rewriting LLM call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OITracer(provider.get_tracer("traced-rag"), config=TraceConfig())
    expected = []
    for question in questions:
        with tracer.start_as_current_span("rag", openinference_span_kind="chain") as root:
            root.set_attributes(get_input_attributes(question))
            if rewrite:
                with tracer.start_as_current_span("rewrite", openinference_span_kind="llm") as llm:
                    llm.set_attributes(get_llm_attributes(
                        model_name="fake-mini",
                        output_messages=[{"role": "assistant", "content": question.lower()}]))
            with tracer.start_as_current_span("retrieve",
                                              openinference_span_kind="retriever") as retriever:
                documents = _ranked(question)
                retriever.set_attributes(get_input_attributes(question))
                retriever.set_attributes(get_retriever_attributes(documents=documents))
            text = f"{documents[0]['content']} [1]"
            span_id = None
            if answer_span:
                with tracer.start_as_current_span("generate", openinference_span_kind="llm") as llm:
                    llm.set_attributes(get_llm_attributes(
                        model_name="fake-large",
                        input_messages=[{"role": "user", "content": question}],
                        output_messages=[{"role": "assistant", "content": text}]))
                    llm.set_attributes(get_output_attributes(
                        json.dumps({"choices": [{"message": {"content": text}}]}),
                        mime_type="application/json"))
                    span_id = format(llm.get_span_context().span_id, "016x")
            root.set_attributes(get_output_attributes(text))
            context = root.get_span_context()
        started = datetime.fromtimestamp(0, UTC)
        expected.append(Expected(format(context.trace_id, "032x"), span_id, question, text,
                                 [d["id"] for d in documents], started))
    spans = list(exporter.get_finished_spans())
    roots = {format(s.context.trace_id, "032x"): s for s in spans if s.parent is None}
    expected = [Expected(e.trace_id, e.span_id, e.query, e.answer, e.source_ids,
                         _time(roots[e.trace_id].start_time)) for e in expected]
    return spans, expected


def _time(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos // 1_000_000_000, UTC).replace(
        microsecond=nanos % 1_000_000_000 // 1000)


# --- OTLP/JSON -----------------------------------------------------------------------------

def _hex(value: str) -> str:
    return base64.b64decode(value).hex()


def otlp_json_lines(spans, *, batches: int = 2, ids: str = "hex") -> str:
    """The spans as ``batches`` ExportTraceServiceRequest lines (a trace may span lines)."""
    size = -(-len(spans) // batches)
    lines = []
    for start in range(0, len(spans), size):
        request = MessageToDict(encode_spans(spans[start:start + size]))
        if ids == "hex":
            for resource in request["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in span:
                                span[key] = _hex(span[key])
        lines.append(json.dumps(request))
    return "".join(line + "\n" for line in lines)


# --- Phoenix -------------------------------------------------------------------------------

def _collapse(attributes: dict) -> dict:
    """Dotted keys with list indices (``a.b.0.c``) grouped into lists of dicts
    (``{"a.b": [{"c": ...}]}``), as Phoenix's dataframe columns hold them."""
    out: dict = {}
    for key, value in attributes.items():
        match = re.match(r"(.+?)\.(\d+)\.(.+)$", key)
        if not match:
            out[key] = list(value) if isinstance(value, tuple) else value
            continue
        items = out.setdefault(match.group(1), [])
        index = int(match.group(2))
        while len(items) <= index:
            items.append({})
        items[index][match.group(3)] = value
    return out


def _nest(attributes: dict) -> dict:
    """Dotted keys nested into objects and lists, as Phoenix stores and serves them."""
    root: dict = {}
    for key, value in attributes.items():
        node, parts = root, key.split(".")
        for part, following in zip(parts, parts[1:]):
            child = [] if following.isdigit() else {}
            if isinstance(node, list):
                index = int(part)
                while len(node) <= index:
                    node.append({})
                if not node[index]:
                    node[index] = child
                node = node[index]
            else:
                node = node.setdefault(part, child)
        last = parts[-1]
        node[last] = list(value) if isinstance(value, tuple) else value
    return root


def _iso(nanos: int) -> str:
    return _time(nanos).isoformat()


def phoenix_rest_spans(spans) -> list[dict]:
    """Phoenix REST/client span objects (phoenix-client v1 ``Span``)."""
    return [{"id": f"U3Bhbjo{n}", "name": s.name,
             "context": {"trace_id": format(s.context.trace_id, "032x"),
                         "span_id": format(s.context.span_id, "016x")},
             "span_kind": s.attributes.get("openinference.span.kind", "UNKNOWN"),
             **({"parent_id": format(s.parent.span_id, "016x")} if s.parent else {}),
             "start_time": _iso(s.start_time), "end_time": _iso(s.end_time),
             "status_code": "OK", "status_message": "", "events": [],
             "attributes": _nest(dict(s.attributes))}
            for n, s in enumerate(spans)]


def phoenix_dataframe_jsonl(spans) -> str:
    """``get_spans_dataframe()``'s rows as pandas writes them to JSON Lines."""
    rows = []
    for s in spans:
        row = {"name": s.name, "span_kind": s.attributes.get("openinference.span.kind"),
               "parent_id": format(s.parent.span_id, "016x") if s.parent else None,
               "start_time": pd.Timestamp(s.start_time, unit="ns", tz="UTC"),
               "end_time": pd.Timestamp(s.end_time, unit="ns", tz="UTC"),
               "status_code": "OK", "status_message": "", "events": [],
               "context.span_id": format(s.context.span_id, "016x"),
               "context.trace_id": format(s.context.trace_id, "032x")}
        row.update({f"attributes.{k}": v for k, v in _collapse(dict(s.attributes)).items()})
        rows.append(row)
    return pd.DataFrame(rows).to_json(orient="records", lines=True)
