"""Answers files with bad bytes or far-future dates."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answers import import_answers, read_answers_file


def answer_line(answer_id: str, created_at: str | None = "2024-06-02T10:00:00Z") -> str:
    row = {"id": answer_id, "query": "What does it show?", "answer": "A claim [1].",
           "sources": [{"id": "d1", "text": "A claim."}]}
    if created_at is not None:
        row["created_at"] = created_at
    return json.dumps(row)


def write_lines(path, lines: list[bytes]):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


# --- 5a: a byte that is not UTF-8 is named on its own line ---------------------------------

@pytest.mark.unit
def test_bad_utf8_byte_names_its_line_and_the_byte(tmp_path):
    tag = uuid.uuid4().hex[:8]
    lines = [answer_line(f"{tag}-{n}").encode() for n in range(1, 6)]
    # line 6: "café" saved as Latin-1; the 0xe9 is byte 43 of the line
    bad = answer_line(f"{tag}-6").replace("A claim [1].", "caf\u00e9 [1].").encode("latin-1")
    path = write_lines(tmp_path / "latin1.jsonl", lines + [bad])
    column = bad.index(b"\xe9") + 1
    with pytest.raises(AnswersFileError) as raised:
        list(read_answers_file(path))
    message = str(raised.value)
    assert message.startswith(f"{path}:6: not valid UTF-8 (byte 0xe9 at byte {column} ")
    assert "\n" not in message


def test_bad_utf8_imports_nothing(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    path = write_lines(tmp_path / "bad.jsonl",
                       [answer_line(f"{tag}-1").encode(), answer_line(f"{tag}-2").encode(),
                        b'{"id": "\xff"}'])
    with pytest.raises(AnswersFileError, match=r":3: not valid UTF-8 \(byte 0xff"):
        import_answers(conn, path)
    assert conn.execute("SELECT count(*) FROM answers WHERE id LIKE %s",
                        (f"{tag}%",)).fetchone()[0] == 0


@pytest.mark.unit
def test_byte_order_mark_and_crlf_are_still_read(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + answer_line("a").encode() + b"\r\n"
                     + answer_line("b").encode() + b"\r\n")
    assert [r.id for r in read_answers_file(path)] == ["a", "b"]


# --- 6a: a created_at far in the future is refused ------------------------------------------

def test_answer_from_the_year_2999_is_refused_naming_file_line_and_date(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    path = write_lines(tmp_path / "future.jsonl",
                       [answer_line(f"{tag}-1").encode(),
                        answer_line(f"{tag}-2", "2999-01-01T00:00:00Z").encode()])
    with pytest.raises(AnswersFileError) as raised:
        import_answers(conn, path)
    message = str(raised.value)
    assert message.startswith(f"{path}:2: 'created_at' '2999-01-01T00:00:00Z' is in the future")
    assert "\n" not in message
    assert conn.execute("SELECT count(*) FROM answers WHERE id LIKE %s",
                        (f"{tag}%",)).fetchone()[0] == 0


@pytest.mark.unit
def test_future_tolerance_is_one_day_of_clock_skew(tmp_path):
    now = datetime.now(UTC)
    soon = (now + timedelta(hours=12)).isoformat()
    later = (now + timedelta(days=2)).isoformat()
    path = write_lines(tmp_path / "skew.jsonl", [answer_line("a", soon).encode()])
    assert [r.id for r in read_answers_file(path)] == ["a"]
    path = write_lines(tmp_path / "late.jsonl", [answer_line("a", later).encode()])
    with pytest.raises(AnswersFileError, match=r":1: 'created_at' .* is in the future"):
        list(read_answers_file(path))
