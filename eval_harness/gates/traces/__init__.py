"""Answers from traces: OpenInference spans (from OTLP/JSON files, Phoenix exports or
Phoenix's client) grouped into one answer per trace. See :mod:`.spans`."""

from eval_harness.gates.traces.spans import (
                                             Span,
                                             TracedAnswer,
                                             TraceProblem,
                                             answers_from_spans,
                                             flat_attributes,
)

__all__ = ["Span", "TracedAnswer", "TraceProblem", "answers_from_spans", "flat_attributes"]
