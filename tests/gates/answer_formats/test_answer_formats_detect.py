"""Which format an answers file is in, told from its first record (or CSV header)."""

from __future__ import annotations

import json

import pytest

from answer_files import SAMPLE
from eval_dataset_files import (
    deepeval_case,
    ragas_sample,
    write_deepeval_csv,
    write_deepeval_json,
    write_ragas_csv,
    write_ragas_jsonl,
)
from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answer_formats import (
    detect_format,
    import_answers_file,
    read_answer_records,
)
from traced_rag import otlp_json_lines, phoenix_dataframe_jsonl, phoenix_rest_spans, run_rag


@pytest.mark.unit
def test_every_format_is_detected(tmp_path):
    spans, _ = run_rag(["Does sleep help memory?"])
    files = {
        "jsonl": SAMPLE,
        "otlp-json": tmp_path / "otlp.jsonl",
        "openinference": tmp_path / "phoenix.json",
        "ragas": write_ragas_jsonl(tmp_path / "r.jsonl", [ragas_sample("q", "a", [])]),
        "deepeval": write_deepeval_json(tmp_path / "d.json", [deepeval_case("q", "a", [])]),
    }
    files["otlp-json"].write_text(otlp_json_lines(spans))
    files["openinference"].write_text(json.dumps(phoenix_rest_spans(spans), indent=2))
    assert {fmt: detect_format(path).format for fmt, path in files.items()} == \
        {fmt: fmt for fmt in files}
    frame = tmp_path / "frame.jsonl"
    frame.write_text(phoenix_dataframe_jsonl(spans))
    assert detect_format(frame).format == "openinference"
    assert detect_format(write_ragas_csv(tmp_path / "r.csv", [ragas_sample("q", "a", [])])) \
        .format == "ragas"
    assert detect_format(write_deepeval_csv(tmp_path / "d.csv", [deepeval_case("q", "a", [])])) \
        .format == "deepeval"


@pytest.mark.unit
def test_an_unknown_record_asks_for_format(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"question": "q", "reply": "a"}\n')
    with pytest.raises(AnswersFileError) as raised:
        detect_format(path)
    assert str(raised.value) == (
        f"{path}: cannot tell the format from its first record (keys: question, reply); name "
        "it with --format (jsonl, openinference, otlp-json, ragas, deepeval)")


def test_empty_and_missing_files_are_named(conn, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(AnswersFileError, match=rf"^{empty}: the file is empty$"):
        detect_format(empty)
    with pytest.raises(AnswersFileError, match=r"nope\.jsonl: file not found$"):
        import_answers_file(conn, tmp_path / "nope.jsonl")


def test_a_named_format_overrides_detection(conn, tmp_path):
    # a RAGAS file read as the harness's JSONL: its first line lacks the JSONL fields
    path = write_ragas_jsonl(tmp_path / "r.jsonl", [ragas_sample("q", "a", [])])
    with pytest.raises(AnswersFileError, match=rf"^{path}:1: missing field 'id'$"):
        import_answers_file(conn, path, fmt="jsonl")


@pytest.mark.unit
def test_a_broken_first_line_is_named_by_its_line(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text('\n{"resourceSpans": [\n{"resourceSpans": []}\n')
    guess = detect_format(path)  # its first key tells the format
    with pytest.raises(AnswersFileError, match=rf"^{path}:2: not valid JSON \("):
        read_answer_records(path, guess.format)
