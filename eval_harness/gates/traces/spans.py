"""OpenInference spans, and the answers their traces hold.

A traced RAG call is one trace: a root span (often a CHAIN), a RETRIEVER span that carries the
query (``input.value``) and the documents it found
(``retrieval.documents.{i}.document.{id,content,score}``), and an LLM span whose output is
the answer. :func:`answers_from_spans` groups spans by trace and makes one answer of each
trace, whatever wrote the spans (an OTLP/JSON file, a Phoenix export, Phoenix's client):
the readers only turn their format into :class:`Span` objects.

Which span gives what, when a trace has several:

- the answer: the LLM span that ended last (a query-rewriting call comes before the final
  generation); its text is ``llm.output_messages.{i}.message.content`` (the messages joined
  in order) when set, else ``output.value``;
- the sources: the last RETRIEVER span that started before that LLM span (else the last
  one), its documents in rank order ``i``; a document without an id gets
  ``<span_id>/<i>``, its score is kept as ``score``;
- the query: that retriever's ``input.value``, else the root span's;
- ``created_at``: the root span's start (the root: the span without a parent in the trace,
  the earliest if several); ``id``: the trace id; ``trace_id`` and ``span_id`` (the LLM
  span's) link gate results back to the trace.

A trace that cannot make an answer (no LLM span, no RETRIEVER span, no query, a document
without text) is a :class:`TraceProblem` naming its trace id; the caller decides what to do
(the importer refuses the whole file).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"

_DOCUMENT_KEY = re.compile(r"retrieval\.documents\.(\d+)\.document\.(\w+)$")
_MESSAGE_KEY = re.compile(r"llm\.output_messages\.(\d+)\.message\.content$")


@dataclass(frozen=True)
class Span:
    """One span, in the terms :func:`answers_from_spans` needs.

    ``trace_id`` (32 hex digits) and ``span_id`` / ``parent_id`` (16) are lower-case hex;
    ``kind`` is the ``openinference.span.kind`` attribute, upper case ("" when absent);
    ``attributes`` is flat: dotted OpenInference keys to values
    (``retrieval.documents.0.document.id``; see :func:`flat_attributes`).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start_time: datetime
    end_time: datetime | None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TracedAnswer:
    """One answer made from a trace, in the answers contract plus the ids that link it back."""

    id: str
    query: str
    answer: str
    sources: list[dict[str, Any]]
    created_at: datetime
    trace_id: str
    span_id: str  # the LLM span that produced the answer


@dataclass(frozen=True)
class TraceProblem:
    """Why a trace made no answer."""

    trace_id: str
    reason: str

    def __str__(self) -> str:
        return f"trace {self.trace_id}: {self.reason}"


# Deeper attributes are refused (ValueError) before Python's recursion limit is.
MAX_ATTRIBUTE_NESTING = 100


def flat_attributes(attributes: Mapping[str, Any], prefix: str = "", *,
                    depth: int = 0) -> dict[str, Any]:
    """``attributes`` with nested objects and lists of objects flattened to dotted keys.

    Phoenix nests what OTLP keeps flat: ``{"retrieval": {"documents": [{"document":
    {"id": "d1"}}]}}`` and ``{"retrieval.documents": [{"document.id": "d1"}]}`` both become
    ``{"retrieval.documents.0.document.id": "d1"}``. A list of plain values stays a list.

    >>> flat_attributes({"retrieval.documents": [{"document.id": "d1"}], "tag.tags": ["a"]})
    {'retrieval.documents.0.document.id': 'd1', 'tag.tags': ['a']}

    Objects nested more than :data:`MAX_ATTRIBUTE_NESTING` deep raise :class:`ValueError`.
    """
    if depth > MAX_ATTRIBUTE_NESTING:
        raise ValueError(f"attribute '{prefix[:80]}...' nests objects more than "
                         f"{MAX_ATTRIBUTE_NESTING} deep")
    flat: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flat_attributes(value, f"{name}.", depth=depth + 1))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for index, item in enumerate(value):
                flat.update(flat_attributes(item, f"{name}.{index}.", depth=depth + 1))
        else:
            flat[name] = value
    return flat


def answers_from_spans(spans: Iterable[Span]
                       ) -> tuple[list[TracedAnswer], list[TraceProblem]]:
    """One answer per trace of ``spans`` (traces in order of first appearance), and one
    problem per trace that makes none (see the module docstring for what is taken from
    where)."""
    traces: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    answers: list[TracedAnswer] = []
    problems: list[TraceProblem] = []
    for trace_id, trace in traces.items():
        made = answer_of_trace(trace_id, trace)
        if isinstance(made, TracedAnswer):
            answers.append(made)
        else:
            problems.append(made)
    return answers, problems


def answer_of_trace(trace_id: str, trace: Sequence[Span]) -> TracedAnswer | TraceProblem:
    """The answer the spans of one trace make, or why they make none."""
    llms = [s for s in trace if s.kind == "LLM"]
    if not llms:
        return TraceProblem(trace_id, "has no LLM span (openinference.span.kind LLM) to take "
                                      "the answer from")
    # ties (times cut to milliseconds) go to the span later in the input
    llm = max(reversed(llms), key=lambda s: (s.end_time or s.start_time, s.start_time))
    retrievers = sorted((s for s in trace if s.kind == "RETRIEVER"), key=lambda s: s.start_time)
    if not retrievers:
        return TraceProblem(trace_id, "has no RETRIEVER span (openinference.span.kind "
                                      "RETRIEVER) to take the sources from")
    before = [s for s in retrievers if s.start_time <= llm.start_time]
    retriever = (before or retrievers)[-1]
    root = _root(trace)
    query = _text(retriever.attributes.get(INPUT_VALUE)) or _text(root.attributes.get(INPUT_VALUE))
    if not query:
        return TraceProblem(trace_id, f"neither its RETRIEVER span {retriever.span_id} nor its "
                                      f"root span {root.span_id} has an input.value (the query)")
    answer = _answer_text(llm)
    if answer is None:
        return TraceProblem(trace_id, f"its LLM span {llm.span_id} has neither "
                                      "llm.output_messages.N.message.content nor an "
                                      "output.value (the answer)")
    sources = _documents(retriever)
    if isinstance(sources, str):
        return TraceProblem(trace_id, sources)
    return TracedAnswer(trace_id, query, answer, sources, root.start_time, trace_id,
                        llm.span_id)


def _root(trace: Sequence[Span]) -> Span:
    ids = {s.span_id for s in trace}
    roots = [s for s in trace if not s.parent_id or s.parent_id not in ids]
    return min(roots or trace, key=lambda s: s.start_time)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _answer_text(llm: Span) -> str | None:
    messages = sorted((int(m.group(1)), value) for key, value in llm.attributes.items()
                      if (m := _MESSAGE_KEY.match(key)) and isinstance(value, str))
    if messages:
        return "\n\n".join(text for _, text in messages)
    value = llm.attributes.get(OUTPUT_VALUE)
    return value if isinstance(value, str) else None


def _documents(retriever: Span) -> list[dict[str, Any]] | str:
    """The retriever's documents in rank order, or why they cannot be sources."""
    documents: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in retriever.attributes.items():
        if m := _DOCUMENT_KEY.match(key):
            documents[int(m.group(1))][m.group(2)] = value
    sources = []
    for rank in sorted(documents):
        document = documents[rank]
        content = document.get("content")
        if not isinstance(content, str):
            return (f"document {rank} of its RETRIEVER span {retriever.span_id} has no text "
                    f"(retrieval.documents.{rank}.document.content)")
        source_id = document.get("id")
        if isinstance(source_id, bool) or not isinstance(source_id, (str, int)) \
                or not str(source_id).strip():
            source_id = f"{retriever.span_id}/{rank}"
        source: dict[str, Any] = {"id": str(source_id), "text": content}
        score = document.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool) \
                and math.isfinite(score):
            source["score"] = score
        sources.append(source)
    return sources
