"""RAGAS SingleTurnSample rows and DeepEval test cases imported as answers (files in the
shapes ragas 0.4.3 and deepeval 4.3.1 write, see tests/support/eval_dataset_files.py)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from answer_files import element_line
from eval_dataset_files import (
    deepeval_case,
    ragas_sample,
    write_deepeval_csv,
    write_deepeval_json,
    write_deepeval_jsonl,
    write_ragas_csv,
    write_ragas_jsonl,
)
from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answer_formats import import_answers_file, read_answer_records


@pytest.fixture
def conn(rolled_back):
    """Answers dated today stay out of the other tests' gate windows."""
    return rolled_back

PASSAGES = ["Aspirin lowers the risk of heart attacks.", "It's \"quoted\", with, commas"]


def text_id(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def ragas_rows(tag: str):
    return [ragas_sample(f"Does aspirin help? {tag}", "Yes, it lowers the risk [1].", PASSAGES,
                         reference="Yes"),
            ragas_sample(f"Anything else? {tag}", "No.", [])]


@pytest.mark.unit
@pytest.mark.parametrize("write", [write_ragas_jsonl, write_ragas_csv])
def test_ragas_rows_become_answers_with_sources_in_order(tmp_path, write):
    path = write(tmp_path / "ragas.data", ragas_rows("t"))
    first, second = read_answer_records(path, "ragas")
    assert (first.query, first.answer) == ("Does aspirin help? t", "Yes, it lowers the risk [1].")
    assert first.sources == [{"id": text_id(t), "text": t} for t in PASSAGES]
    assert second.sources == [] and second.created_at is None
    assert first.id.startswith("ragas:") and first.id != second.id


def test_ragas_jsonl_and_csv_give_the_same_ids_and_reimport_is_idempotent(conn, tmp_path):
    rows = ragas_rows(uuid.uuid4().hex)
    jsonl = write_ragas_jsonl(tmp_path / "ragas.jsonl", rows)
    csv_file = write_ragas_csv(tmp_path / "ragas.csv", rows)
    assert [r.id for r in read_answer_records(jsonl, "ragas")] == \
        [r.id for r in read_answer_records(csv_file, "ragas")]
    report, guess = import_answers_file(conn, jsonl)
    assert guess.format == "ragas" and (report.inserted, report.unchanged) == (2, 0)
    again, guess = import_answers_file(conn, csv_file)
    assert guess.format == "ragas" and (again.inserted, again.updated, again.unchanged) == (0, 0, 2)


@pytest.mark.unit
def test_ragas_context_ids_and_an_own_id_are_used(tmp_path):
    row = ragas_sample("q", "a [1].", PASSAGES, retrieved_context_ids=["4983", 12])
    row["id"] = "served-17"
    [answer] = read_answer_records(write_ragas_csv(tmp_path / "r.csv", [row]), "ragas")
    assert answer.id == "served-17"
    assert [s["id"] for s in answer.sources] == ["4983", "12"]


def test_ragas_missing_user_input_is_named_by_line(conn, tmp_path):
    rows = ragas_rows(uuid.uuid4().hex)
    del rows[1]["user_input"]
    path = write_ragas_jsonl(tmp_path / "ragas.jsonl", rows)
    with pytest.raises(AnswersFileError) as raised:
        import_answers_file(conn, path, fmt="ragas")
    assert str(raised.value) == f"{path}:2: 'user_input' (the query) is missing or empty"
    assert conn.execute("SELECT count(*) FROM answers WHERE query = %s",
                        (rows[0]["user_input"],)).fetchone()[0] == 0


@pytest.mark.unit
def test_ragas_bad_json_line_and_duplicate_row_are_named(tmp_path):
    rows = ragas_rows("d")
    path = write_ragas_jsonl(tmp_path / "ragas.jsonl", rows + [rows[0]])
    with pytest.raises(AnswersFileError, match=rf"^{path}:3: duplicate id 'ragas:[0-9a-f]+' "
                                               rf"\(the same row as {path}:1\)$"):
        read_answer_records(path, "ragas")
    path.write_text(path.read_text().replace('"response"', '"response', 1))
    with pytest.raises(AnswersFileError, match=rf"^{path}:1: not valid JSON \("):
        read_answer_records(path, "ragas")


def deepeval_cases(tag: str):
    return [deepeval_case(f"Does aspirin help? {tag}", "Yes [1].", PASSAGES,
                          expected_output="Yes"),
            deepeval_case(f"Anything else? {tag}", "No.", [])]


@pytest.mark.unit
@pytest.mark.parametrize("write", [write_deepeval_json, write_deepeval_csv,
                                   write_deepeval_jsonl])
def test_deepeval_cases_become_answers(tmp_path, write):
    path = write(tmp_path / "cases.data", deepeval_cases("t"))
    first, second = read_answer_records(path, "deepeval")
    assert (first.query, first.answer) == ("Does aspirin help? t", "Yes [1].")
    assert [s["text"] for s in first.sources] == PASSAGES
    assert second.sources == []
    assert first.id.startswith("deepeval:")


def test_deepeval_import_is_idempotent(conn, tmp_path):
    path = write_deepeval_json(tmp_path / "cases.json", deepeval_cases(uuid.uuid4().hex))
    first, guess = import_answers_file(conn, path)
    assert guess.format == "deepeval" and first.inserted == 2
    again, _ = import_answers_file(conn, path)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 2)


@pytest.mark.unit
def test_deepeval_golden_without_output_is_named_with_what_to_do(tmp_path):
    cases = deepeval_cases("g")
    cases[1]["actual_output"] = None
    path = write_deepeval_json(tmp_path / "goldens.json", cases)
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "deepeval")
    line = element_line(path.read_text(), 2)  # a record of a JSON document: where it starts
    assert str(raised.value) == (
        f"{path}:{line}: 'actual_output' (the answer) is missing (a DeepEval golden has no "
        "answer: run your app over the goldens and save the test cases)")


@pytest.mark.unit
def test_deepeval_csv_row_with_too_many_values_is_named(tmp_path):
    path = write_deepeval_csv(tmp_path / "cases.csv", deepeval_cases("c"))
    path.write_text(path.read_text() + "q,a,,,,,,,,,,,,,,,,extra\n")
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "deepeval")
    assert str(raised.value) == f"{path}:4: more values than the header has columns"


@pytest.mark.unit
def test_unpaired_surrogate_and_nul_are_named_before_the_store_sees_them(tmp_path):
    path = tmp_path / "ragas.jsonl"
    path.write_text('{"user_input": "q", "retrieved_contexts": ["bad \\ud800 text"], '
                    '"response": "a"}\n')
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "ragas")
    assert str(raised.value) == (f"{path}:1: contains an unpaired surrogate (\\ud800) in "
                                 "'retrieved_contexts[0]', which is not valid Unicode; fix the "
                                 "tool that wrote it.")
    path.write_text('{"user_input": "q", "retrieved_contexts": [], "response": "a\\u0000"}\n')
    with pytest.raises(AnswersFileError, match=rf"^{path}:1: contains a NUL character"):
        read_answer_records(path, "ragas")


@pytest.mark.unit
def test_deepeval_json_that_does_not_parse_is_named_by_its_line(tmp_path):
    path = write_deepeval_json(tmp_path / "cases.json", deepeval_cases("j"))
    lines = path.read_text().splitlines()
    lines[3] = lines[3].rstrip(",")  # drop the comma after "actual_output"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AnswersFileError) as raised:
        read_answer_records(path, "deepeval")
    assert str(raised.value) == f"{path}:5: not valid JSON (Expecting ',' delimiter)"


@pytest.mark.unit
def test_a_broken_first_line_of_json_lines_is_named_as_line_1(tmp_path):
    path = write_ragas_jsonl(tmp_path / "ragas.jsonl", ragas_rows("b"))
    lines = path.read_text().splitlines()
    path.write_text(lines[0][:-1] + "\n" + lines[1] + "\n")
    with pytest.raises(AnswersFileError, match=rf"^{path}:1: not valid JSON \("):
        read_answer_records(path, "ragas")
