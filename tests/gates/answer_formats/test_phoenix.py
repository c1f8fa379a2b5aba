"""Phoenix span exports (the REST/client span objects, and get_spans_dataframe() rows written
by pandas) of a RAG loop traced with the real OpenTelemetry SDK and OpenInference."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from answer_files import element_line
from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answer_formats import (
    detect_format,
    import_answers_file,
    read_answer_records,
)
from traced_rag import phoenix_dataframe_jsonl, phoenix_rest_spans, run_rag


@pytest.fixture
def conn(rolled_back):
    """Answers dated today stay out of the other tests' gate windows."""
    return rolled_back


def check(records, expected, *, precision=timedelta(0)):
    by_id = {r.id: r for r in records}
    assert sorted(by_id) == sorted(e.trace_id for e in expected)
    for e in expected:
        record = by_id[e.trace_id]
        assert (record.query, record.answer) == (e.query, e.answer)
        assert (record.trace_id, record.span_id) == (e.trace_id, e.span_id)
        assert [s["id"] for s in record.sources] == e.source_ids
        assert abs(record.created_at - e.started) <= precision


@pytest.mark.unit
@pytest.mark.parametrize("shape", ["array", "rest-body", "jsonl"])
def test_rest_span_objects_in_each_file_shape(tmp_path, shape):
    spans, expected = run_rag()
    objects = phoenix_rest_spans(spans)
    path = tmp_path / "spans.json"
    if shape == "array":
        path.write_text(json.dumps(objects, indent=2))
    elif shape == "rest-body":
        path.write_text(json.dumps({"data": objects, "next_cursor": None}))
    else:
        path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    assert detect_format(path).format == "openinference"
    check(read_answer_records(path, "openinference"), expected)


def test_dataframe_rows_written_by_pandas(conn, tmp_path):
    spans, expected = run_rag()
    path = tmp_path / "spans.jsonl"
    path.write_text(phoenix_dataframe_jsonl(spans))
    guess = detect_format(path)
    assert guess.format == "openinference"
    # pandas writes times as epoch milliseconds
    check(read_answer_records(path, "openinference"), expected,
          precision=timedelta(milliseconds=1))
    report, _ = import_answers_file(conn, path)
    assert (report.inserted, report.updated, report.unchanged) == (3, 0, 0)
    again, _ = import_answers_file(conn, path)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 3)


@pytest.mark.unit
def test_a_span_without_trace_id_is_named_by_line(tmp_path):
    spans, _ = run_rag()
    objects = phoenix_rest_spans(spans)
    del objects[3]["context"]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "openinference")
    assert str(raised.value) == f"{path}:4: not a Phoenix span (no context.trace_id)"


@pytest.mark.unit
def test_a_span_without_start_time_is_named_by_record(tmp_path):
    spans, _ = run_rag()
    objects = phoenix_rest_spans(spans)
    objects[1]["start_time"] = "yesterday"
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(objects, indent=2))
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "openinference")
    span_id = objects[1]["context"]["span_id"]
    assert str(raised.value) == (f"{path}:{element_line(path.read_text(), 2)}: span {span_id} "
                                 "has no start_time "
                                 "(ISO-8601 or epoch)")


def test_a_trace_without_retriever_is_named_and_nothing_imported(conn, tmp_path):
    spans, expected = run_rag()
    objects = [o for o in phoenix_rest_spans(spans)
               if not (o["span_kind"] == "RETRIEVER"
                       and o["context"]["trace_id"] == expected[2].trace_id)]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    first_line = next(n for n, o in enumerate(objects, start=1)
                      if o["context"]["trace_id"] == expected[2].trace_id)
    with pytest.raises(AnswersFileError) as raised:
        import_answers_file(conn, path)
    assert str(raised.value) == (
        f"{path}:{first_line}: trace {expected[2].trace_id}: has no RETRIEVER span "
        "(openinference.span.kind RETRIEVER) to take the sources from.")
    assert conn.execute("SELECT count(*) FROM answers WHERE id = ANY(%s)",
                        ([e.trace_id for e in expected],)).fetchone()[0] == 0


@pytest.mark.unit
def test_top_level_ids_and_dotted_attributes_are_read_too(tmp_path):
    spans, expected = run_rag(["Does sleep help memory?"])
    objects = phoenix_rest_spans(spans)
    for o in objects:  # Phoenix's older span model: ids at the top, attributes dotted
        context = o.pop("context")
        o.update(trace_id=context["trace_id"], span_id=context["span_id"])
        o["attributes"] = {"openinference.span.kind": o.pop("span_kind"),
                           **{f"{k}.{kk}": v for k, sub in o["attributes"].items()
                              if k != "openinference" for kk, v in sub.items()}}
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    assert detect_format(path).format == "openinference"
    check(read_answer_records(path, "openinference"), expected)


@pytest.mark.unit
def test_a_bad_json_line_and_a_trace_without_llm_span_are_named(tmp_path):
    spans, expected = run_rag()
    objects = phoenix_rest_spans(spans)
    path = tmp_path / "spans.jsonl"
    lines = [json.dumps(o) for o in objects]
    path.write_text("\n".join(lines[:4] + [lines[4][:-1]] + lines[5:]) + "\n")
    with pytest.raises(AnswersFileError, match=rf"^{path}:5: not valid JSON \("):
        read_answer_records(path, "openinference")
    kept = [o for o in objects if not (o["span_kind"] == "LLM"
                                       and o["context"]["trace_id"] == expected[0].trace_id)]
    path.write_text("".join(json.dumps(o) + "\n" for o in kept))
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "openinference")
    assert f"trace {expected[0].trace_id}: has no LLM span" in str(raised.value)


@pytest.mark.unit
def test_a_span_exported_twice_is_read_once_or_refused_when_it_differs(tmp_path):
    spans, expected = run_rag(["Does sleep help memory?"], rewrite=False)
    objects = phoenix_rest_spans(spans)
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects + objects[:1]))
    check(read_answer_records(path, "openinference"), expected)
    changed = json.loads(json.dumps(objects[0]))
    changed["attributes"]["input"]["value"] = "Does sleep hurt memory?"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects + [changed]))
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "openinference")
    context = objects[0]["context"]
    assert str(raised.value) == (
        f"{path}:{len(objects) + 1}: trace {context['trace_id']}: span {context['span_id']} "
        f"differs from its copy at {path}:1 (attribute input.value); the same trace twice "
        "with different content cannot be imported: keep one copy.")
