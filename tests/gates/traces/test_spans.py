"""Grouping OpenInference spans into one answer per trace (hand-built spans)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from eval_harness.gates.traces import Span, answers_from_spans, flat_attributes

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 3, 9, 15, tzinfo=UTC)


def span(trace, span_id, kind, *, parent=None, at=0, length=1, **attributes):
    return Span(trace, span_id, parent, kind.lower() or "span", kind, T0 + timedelta(seconds=at),
                T0 + timedelta(seconds=at + length), attributes)


def documents(*docs):
    flat = {}
    for i, (doc_id, text, score) in enumerate(docs):
        flat.update({f"retrieval.documents.{i}.document.id": doc_id,
                     f"retrieval.documents.{i}.document.content": text,
                     f"retrieval.documents.{i}.document.score": score})
    return flat


def rag_trace(trace="a" * 32, *, answer_kind="LLM"):
    return [
        span(trace, "1" * 16, "CHAIN", at=0, length=5, **{"input.value": "root question"}),
        span(trace, "2" * 16, "RETRIEVER", parent="1" * 16, at=1,
             **{"input.value": "What is X?"},
             **documents(("d2", "second", 0.5), ("d1", "first", 0.9))),
        span(trace, "3" * 16, answer_kind, parent="1" * 16, at=2,
             **{"output.value": "X is Y [1]."}),
    ]


def test_one_trace_makes_one_answer_with_sources_in_rank_order():
    answers, problems = answers_from_spans(rag_trace())
    assert problems == []
    [answer] = answers
    assert (answer.id, answer.trace_id, answer.span_id) == ("a" * 32, "a" * 32, "3" * 16)
    assert answer.query == "What is X?"
    assert answer.answer == "X is Y [1]."
    assert answer.sources == [{"id": "d2", "text": "second", "score": 0.5},
                              {"id": "d1", "text": "first", "score": 0.9}]
    assert answer.created_at == T0


def test_rank_order_is_the_index_not_the_attribute_order():
    spans = rag_trace()
    retriever = spans[1]
    shuffled = dict(reversed(list(retriever.attributes.items())))
    spans[1] = Span(*[getattr(retriever, f) for f in ("trace_id", "span_id", "parent_id", "name",
                                                      "kind", "start_time", "end_time")],
                    shuffled)
    [answer], _ = answers_from_spans(reversed(spans))
    assert [s["id"] for s in answer.sources] == ["d2", "d1"]


def test_the_last_llm_span_gives_the_answer_from_its_output_messages():
    trace = "b" * 32
    spans = rag_trace(trace) + [
        span(trace, "4" * 16, "LLM", parent="1" * 16, at=3, **{
            "output.value": '{"choices": []}',
            "llm.output_messages.1.message.content": "second part",
            "llm.output_messages.0.message.content": "Final [1]."})]
    [answer], _ = answers_from_spans(spans)
    assert answer.span_id == "4" * 16
    assert answer.answer == "Final [1].\n\nsecond part"


def test_query_falls_back_to_the_root_span_and_missing_ids_to_the_span():
    trace = "c" * 32
    spans = rag_trace(trace)
    spans[1] = span(trace, "2" * 16, "RETRIEVER", parent="1" * 16, at=1, **{
        "retrieval.documents.0.document.content": "no id here"})
    [answer], _ = answers_from_spans(spans)
    assert answer.query == "root question"
    assert answer.sources == [{"id": f"{'2' * 16}/0", "text": "no id here"}]


def test_each_bad_trace_is_one_problem_naming_it_and_good_ones_still_answer():
    good, no_llm, no_docs_text = "1" * 32, "2" * 32, "3" * 32
    spans = rag_trace(good) + rag_trace(no_llm, answer_kind="TOOL") + rag_trace(no_docs_text)
    spans[-2] = span(no_docs_text, "2" * 16, "RETRIEVER", parent="1" * 16, at=1,
                     **{"input.value": "q", "retrieval.documents.0.document.id": "d1"})
    answers, problems = answers_from_spans(spans)
    assert [a.id for a in answers] == [good]
    assert [str(p) for p in problems] == [
        f"trace {no_llm}: has no LLM span (openinference.span.kind LLM) to take the answer "
        "from",
        f"trace {no_docs_text}: document 0 of its RETRIEVER span {'2' * 16} has no text "
        "(retrieval.documents.0.document.content)"]


def test_a_trace_without_retriever_or_query_is_a_problem():
    trace = "d" * 32
    answers, problems = answers_from_spans([rag_trace(trace)[2]])
    assert answers == [] and "has no RETRIEVER span" in str(problems[0])
    spans = rag_trace(trace)
    spans[0] = span(trace, "1" * 16, "CHAIN", at=0, length=5)
    spans[1] = span(trace, "2" * 16, "RETRIEVER", parent="1" * 16, at=1)
    _, problems = answers_from_spans(spans)
    assert "has an input.value (the query)" in str(problems[0])


def test_flat_attributes_flattens_phoenix_nesting_both_ways():
    nested = {"retrieval": {"documents": [{"document": {"id": "d1", "score": 1.0}}]}}
    dotted = {"retrieval.documents": [{"document.id": "d1", "document.score": 1.0}]}
    expected = {"retrieval.documents.0.document.id": "d1",
                "retrieval.documents.0.document.score": 1.0}
    assert flat_attributes(nested) == flat_attributes(dotted) == expected


def test_llm_spans_with_equal_times_go_to_the_later_one_in_the_input():
    # times cut to milliseconds (pandas' default) can make the rewrite and answer calls tie
    trace = "e" * 32
    spans = rag_trace(trace)
    spans[2] = span(trace, "3" * 16, "LLM", parent="1" * 16, at=2,
                    **{"output.value": "rewritten question"})
    spans.append(span(trace, "4" * 16, "LLM", parent="1" * 16, at=2,
                      **{"output.value": "X is Y [1]."}))
    [answer], _ = answers_from_spans(spans)
    assert (answer.span_id, answer.answer) == ("4" * 16, "X is Y [1].")


def test_a_trace_whose_root_is_not_exported_yet_starts_at_its_earliest_orphan():
    trace = "f" * 32
    spans = rag_trace(trace)[1:]  # the CHAIN root ends last, so it is written last
    [answer], _ = answers_from_spans(spans)
    assert answer.created_at == T0 + timedelta(seconds=1)
    assert answer.query == "What is X?"
