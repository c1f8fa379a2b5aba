"""A running Phoenix, both ways: answers from its traces, gate results back as annotations.

- :func:`pull_traced_answers` reads a project's spans through Phoenix's client
  (``arize-phoenix-client``, the ``phoenix`` extra) and makes one answer per trace
  (:func:`eval_harness.gates.traces.answers_from_spans`). With ``since``, only traces whose
  root span started at or after it: a trace whose root started earlier is left out whole,
  never imported from its later spans alone.
- :func:`post_annotations` posts each gate outcome (:mod:`eval_harness.gates.outcomes`) as a
  span annotation on the answer's LLM span: name = the gate, score, label ``pass``/``fail``,
  explanation = the gate's one-line reason, annotator kind ``CODE``, identifier
  ``eval-harness`` (Phoenix keys an annotation by name, span and identifier, so a rerun
  updates it instead of adding another).

Errors a user can cause (Phoenix not running, a wrong URL, an unknown project, the extra not
installed) raise :class:`PhoenixError` with one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from eval_harness.escaping.visible import encodable
from eval_harness.gates.answer_formats.phoenix import span_from_phoenix
from eval_harness.gates.outcomes import GateOutcome
from eval_harness.gates.traces import Span, TracedAnswer, TraceProblem, answers_from_spans

# Phoenix's client is an optional extra (``phoenix``), and httpx takes almost half a second to
# import for commands that never call Phoenix: both are imported where Phoenix is called.

DEFAULT_URL = "http://localhost:6006"  # where a Phoenix started with its defaults listens
ANNOTATION_IDENTIFIER = "eval-harness"
ANNOTATOR_KIND = "CODE"
SPANS_PER_PULL = 10_000_000  # the client pages through them 100 at a time
ANNOTATIONS_PER_POST = 500
TIMEOUT_SECONDS = 30


class PhoenixError(RuntimeError):
    """Phoenix could not be read or written; the message says what and what to do."""


def _client(url: str):
    try:
        from phoenix.client import Client
    except ImportError:
        raise PhoenixError("talking to Phoenix needs arize-phoenix-client: pip install "
                           "'eval-harness[phoenix]'") from None
    return Client(base_url=url.rstrip("/"))


def _failure(url: str, exc: Exception, *, project: str | None = None) -> PhoenixError:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        if status == 404 and project is not None:
            return PhoenixError(f"Phoenix at {url} has no project '{project}' (HTTP 404); "
                                "check --project against the projects its UI lists.")
        body = " ".join(exc.response.text.split())[:200]
        return PhoenixError(f"Phoenix at {url} answered HTTP {status} ({body or 'no body'}).")
    if isinstance(exc, httpx.HTTPError):
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return PhoenixError(f"cannot reach Phoenix at {url} ({reason}); is it running "
                            "(`phoenix serve`) and is the URL right?")
    return PhoenixError(f"Phoenix at {url}: {type(exc).__name__}: {exc}")


def pull_spans(url: str, project: str, *, since: datetime | None = None) -> list[Span]:
    """Every span of ``project`` (those of traces whose root started at or after ``since``)."""
    import httpx

    client = _client(url)
    try:
        raw = client.spans.get_spans(project_identifier=project, start_time=since,
                                     limit=SPANS_PER_PULL, timeout=TIMEOUT_SECONDS)
    except (httpx.HTTPError, ValueError) as exc:
        raise _failure(url, exc, project=project) from None
    spans = []
    for record in raw:
        try:
            spans.append(span_from_phoenix(record))
        except ValueError as exc:
            raise PhoenixError(f"Phoenix at {url}, project '{project}': {exc}") from None
    rooted = {span.trace_id for span in spans if span.parent_id is None}
    return [span for span in spans if span.trace_id in rooted]


def pull_traced_answers(url: str, project: str, *, since: datetime | None = None
                        ) -> tuple[list[TracedAnswer], list[TraceProblem]]:
    """The answers of ``project``'s traces, and one problem per trace that makes none."""
    return answers_from_spans(pull_spans(url, project, since=since))


def annotation(outcome: GateOutcome) -> dict[str, Any]:
    """The span annotation Phoenix stores for ``outcome`` (its REST API's shape). JSON
    escapes control characters itself; a lone surrogate, which is no Unicode text for the
    server, is sent as its escape (:func:`~eval_harness.escaping.visible.encodable`)."""
    result: dict[str, Any] = {"label": outcome.label,
                              "explanation": encodable(outcome.explanation)}
    if outcome.score is not None:
        result["score"] = outcome.score
    return {"span_id": outcome.span_id, "name": encodable(outcome.gate),
            "annotator_kind": ANNOTATOR_KIND, "identifier": ANNOTATION_IDENTIFIER,
            "result": result,
            "metadata": {"answer_id": encodable(outcome.answer_id),
                         "threshold": outcome.threshold,
                         "source": "eval-harness gate"}}


def post_annotations(url: str, outcomes: Sequence[GateOutcome]) -> tuple[int, int]:
    """Post the outcomes of answers with a span id as span annotations:
    ``(posted, answers without a span id)``."""
    import httpx

    linked = [outcome for outcome in outcomes if outcome.span_id]
    unlinked = len({outcome.answer_id for outcome in outcomes if not outcome.span_id})
    if not linked:
        return 0, unlinked
    client = _client(url)
    try:
        for start in range(0, len(linked), ANNOTATIONS_PER_POST):
            client.spans.log_span_annotations(
                span_annotations=[annotation(o) for o in linked[start:start +
                                                                   ANNOTATIONS_PER_POST]],
                sync=True)
    except (httpx.HTTPError, ValueError) as exc:
        raise _failure(url, exc) from None
    return len(linked), unlinked
