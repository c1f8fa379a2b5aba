"""OTLP/JSON trace exports (as a collector's file exporter writes them) from a RAG loop traced
with the real OpenTelemetry SDK and OpenInference instrumentation, imported as answers."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answer_formats import (
    detect_format,
    import_answers_file,
    json_stream,
    read_answer_records,
)
from traced_rag import otlp_json_lines, run_rag


@pytest.fixture
def conn(rolled_back):
    """Answers dated today stay out of the other tests' gate windows."""
    return rolled_back


def stored(conn, ids):
    rows = conn.execute("SELECT id, query, answer, sources, created_at, trace_id, span_id "
                        "FROM answers WHERE id = ANY(%s)", (ids,)).fetchall()
    return {row[0]: row[1:] for row in rows}


def test_each_trace_becomes_one_answer_linked_to_its_llm_span(conn, tmp_path):
    spans, expected = run_rag()
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans, batches=2))
    report, guess = import_answers_file(conn, path)
    assert guess.format == "otlp-json"
    assert (report.inserted, report.updated, report.unchanged) == (3, 0, 0)
    rows = stored(conn, [e.trace_id for e in expected])
    for e in expected:
        query, answer, sources, created_at, trace_id, span_id = rows[e.trace_id]
        # the answer is the last LLM span's message text, not the rewrite call's, and not
        # its output.value (the provider's JSON)
        assert (query, answer, trace_id, span_id) == (e.query, e.answer, e.trace_id, e.span_id)
        assert [s["id"] for s in sources] == e.source_ids
        assert sources[0]["score"] > sources[1]["score"]
        assert created_at == e.started


def test_reimport_is_idempotent_and_a_changed_answer_is_an_update(conn, tmp_path):
    spans, expected = run_rag()
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans))
    import_answers_file(conn, path)
    again, _ = import_answers_file(conn, path)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 3)
    path.write_text(path.read_text().replace(expected[1].answer, "Statins do nothing [1]"))
    changed, _ = import_answers_file(conn, path)
    assert (changed.inserted, changed.updated, changed.unchanged) == (0, 1, 2)


@pytest.mark.unit
def test_base64_ids_of_protobufs_generic_json_read_the_same(tmp_path):
    spans, _ = run_rag()
    hex_path, b64_path = tmp_path / "hex.jsonl", tmp_path / "b64.jsonl"
    hex_path.write_text(otlp_json_lines(spans, ids="hex"))
    b64_path.write_text(otlp_json_lines(spans, ids="base64"))
    assert hex_path.read_text() != b64_path.read_text()
    assert detect_format(b64_path).format == "otlp-json"
    assert read_answer_records(hex_path, "otlp-json") == read_answer_records(b64_path,
                                                                             "otlp-json")


def test_a_trace_without_an_llm_span_is_named_and_nothing_is_imported(conn, tmp_path):
    good, good_expected = run_rag(["Does sleep help memory?"])
    bad, bad_expected = run_rag(["Do statins lower cholesterol?"], rewrite=False,
                                answer_span=False)
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(list(good), batches=1) + otlp_json_lines(list(bad),
                                                                              batches=1))
    with pytest.raises(AnswersFileError) as raised:
        import_answers_file(conn, path)
    assert str(raised.value) == (
        f"{path}:2: trace {bad_expected[0].trace_id}: has no LLM span "
        "(openinference.span.kind LLM) to take the answer from.")
    assert stored(conn, [good_expected[0].trace_id, bad_expected[0].trace_id]) == {}


def test_a_line_that_is_not_json_is_named(conn, tmp_path):
    spans, expected = run_rag()
    path = tmp_path / "traces.jsonl"
    lines = otlp_json_lines(spans, batches=3).splitlines()
    lines[1] = lines[1][:-10]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AnswersFileError, match=rf"^{path}:2: not valid JSON \("):
        import_answers_file(conn, path, fmt="otlp-json")
    assert stored(conn, [e.trace_id for e in expected]) == {}


@pytest.mark.unit
def test_a_span_without_a_trace_id_is_named(tmp_path):
    spans, _ = run_rag()
    request = json.loads(otlp_json_lines(spans, batches=1))
    del request["resourceSpans"][0]["scopeSpans"][0]["spans"][2]["traceId"]
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(request) + "\n")
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "otlp-json")
    assert str(raised.value) == f"{path}:1: its traceId is not 16 bytes of hex (or base64)"


@pytest.mark.unit
def test_a_line_that_is_no_trace_export_is_named(tmp_path):
    spans, _ = run_rag()
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans, batches=1) + '{"resourceLogs": []}\n')
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "otlp-json")
    assert str(raised.value) == (f"{path}:2: not an OTLP/JSON trace export (no resourceSpans "
                                 "list)")


@pytest.mark.unit
def test_a_trace_from_the_future_is_named_by_line_and_trace(tmp_path):
    spans, expected = run_rag(["Does sleep help memory?"])
    text = otlp_json_lines(spans, batches=1)
    later = 3 * 24 * 3600 * 10**9  # three days, in nanoseconds
    shifted = json.loads(text)
    for span in shifted["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = str(int(span[key]) + later)
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(shifted) + "\n")
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "otlp-json")
    assert str(raised.value).startswith(
        f"{path}:1: trace {expected[0].trace_id}: its root span's start "
        f"{(expected[0].started + timedelta(days=3)).isoformat()} is in the future (more than "
        "a day after now")


# --- read incrementally: every layout, file:line kept ---------------------------------------

def _layouts(tmp_path, spans) -> dict:
    """The same spans as JSON Lines, as one document (on one line, and pretty-printed) and
    as a JSON array of requests."""
    text = otlp_json_lines(spans, batches=3)
    requests = [json.loads(line) for line in text.splitlines()]
    document = {"resourceSpans": [r for q in requests for r in q["resourceSpans"]]}
    files = {"lines": text, "one line": json.dumps(document) + "\n",
             "pretty": json.dumps(document, indent=2), "array": json.dumps(requests)}
    for name, content in files.items():
        files[name] = tmp_path / f"{name.replace(' ', '-')}.json"
        files[name].write_text(content)
    return files


@pytest.mark.unit
@pytest.mark.parametrize("chunk", [json_stream.CHUNK, 97])
def test_every_layout_of_a_trace_export_reads_the_same(tmp_path, monkeypatch, chunk):
    # 97 characters at a time: every value is cut by the reads, and read text is dropped
    monkeypatch.setattr(json_stream, "CHUNK", chunk)
    spans, expected = run_rag()
    files = _layouts(tmp_path, spans)
    read = {name: read_answer_records(path, detect_format(path).format)
            for name, path in files.items()}
    assert [a.id for a in read["lines"]] == [e.trace_id for e in expected]
    assert all(answers == read["lines"] for answers in read.values())


@pytest.mark.unit
def test_a_bad_span_of_a_pretty_printed_document_is_named_by_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(json_stream, "CHUNK", 97)
    spans, _ = run_rag()
    document = json.loads(otlp_json_lines(spans, batches=1))
    bad = document["resourceSpans"][0]["scopeSpans"][0]["spans"][4]
    del bad["traceId"]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document, indent=2))
    lines = path.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, start=1) if bad["spanId"] in text) - 1
    assert lines[line - 1].strip() == "{"  # where the span starts
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "otlp-json")
    assert str(raised.value) == f"{path}:{line}: its traceId is not 16 bytes of hex (or base64)"


@pytest.mark.unit
def test_a_byte_that_is_not_utf8_is_named_by_its_line_and_column(tmp_path, monkeypatch):
    monkeypatch.setattr(json_stream, "CHUNK", 97)  # the bad byte far into the file
    spans, _ = run_rag()
    lines = otlp_json_lines(spans, batches=3).encode("utf-8").splitlines()
    column = lines[2].index(b"Sleep") + 1
    lines[2] = lines[2].replace(b"Sleep", b"\xe9leep", 1)  # Latin-1, as a wrong export writes
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "otlp-json")
    assert str(raised.value) == (f"{path}:3: not valid UTF-8 (byte 0xe9 at byte {column} of the "
                                 "line); save the file as UTF-8 (from Latin-1: iconv -f latin1 "
                                 "-t utf-8).")
