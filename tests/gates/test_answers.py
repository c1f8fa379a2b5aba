"""Importing answers files into the store (eval_harness.gates.answers): idempotent by id, and
a bad line named with its file and line, nothing imported."""

from __future__ import annotations

import json
import uuid
from datetime import date, timezone

import pytest

from eval_harness.gates.answer_checks import AnswersFileError
from eval_harness.gates.answers import import_answers, stream_answers
from eval_harness.gates.window import TimeWindow
from answer_files import answer_row, write_jsonl


# --- import ----------------------------------------------------------------------------------

def test_import_is_idempotent_by_id_and_reports_changes(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    rows = [answer_row(f"{tag}-1", "Aspirin lowers the risk of heart attacks [1].",
                       "2024-06-01T09:00:00Z"),
            answer_row(f"{tag}-2", "Statins lower cholesterol in most adults [2].",
                       "2024-06-01T23:59:59.999+00:00"),
            answer_row(f"{tag}-3", "Sleep improves memory consolidation in adults [1].", None)]
    path = write_jsonl(tmp_path / "answers.jsonl", rows)
    first = import_answers(conn, path)
    assert (first.inserted, first.updated, first.unchanged) == (3, 0, 0)
    stamped = conn.execute("SELECT created_at FROM answers WHERE id = %s",
                           (f"{tag}-3",)).fetchone()[0]
    # the UTC days the file's answers fall on (the run command gates exactly these)
    assert first.days == tuple(sorted({date(2024, 6, 1),
                                       stamped.astimezone(timezone.utc).date()}))
    again = import_answers(conn, path)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 3)
    rows[1]["answer"] = "Statins lower LDL cholesterol in most adults [1]."
    changed = import_answers(conn, write_jsonl(path, rows))
    assert (changed.inserted, changed.updated, changed.unchanged) == (0, 1, 2)
    # an answer without created_at keeps the time of its first import
    assert conn.execute("SELECT created_at FROM answers WHERE id = %s",
                        (f"{tag}-3",)).fetchone()[0] == stamped
    # the day window is [00:00, 24:00) UTC: 23:59:59.999 is in it, the next day is not
    day = [a.id for a in stream_answers(conn, TimeWindow.day("2024-06-01"), batch_size=1)
           if a.id.startswith(tag)]
    assert sorted(day) == [f"{tag}-1", f"{tag}-2"]


@pytest.mark.parametrize(("bad_line", "message"), [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"id": "x", "query": "q", "answer": "a"}', "missing field 'sources'"),
    ('{"id": "", "query": "q", "answer": "a", "sources": []}', "'id' must be a non-empty"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": [{"id": "d1"}]}',
     "source 1 must be an object with 'id' and 'text'"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": {"id": "d1", "text": "t"}}',
     "'sources' must be a list"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": [], "created_at": "2024-06-01T10:00"}',
     "'created_at' '2024-06-01T10:00' has no timezone"),
    ('{"id": "x", "query": "q", "answer": "a\\u0000", "sources": []}', "contains a NUL character"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": [{"id": 1, "text": "t \\udc00"}]}',
     "contains an unpaired surrogate (\\udc00)"),
    ('{"id": "DUP", "query": "q", "answer": "a", "sources": []}', "duplicate id 'DUP' (first on line 1)"),
])
def test_bad_line_names_file_and_line_and_imports_nothing(conn, tmp_path, bad_line, message):
    tag = uuid.uuid4().hex[:8]
    good = [json.dumps(answer_row("DUP" if "DUP" in bad_line else f"{tag}-1", "A claim [1].",
                                  "2024-06-02T10:00:00Z")),
            json.dumps(answer_row(f"{tag}-2", "Another claim [1].", "2024-06-02T11:00:00Z"))]
    path = write_jsonl(tmp_path / "bad.jsonl", [good[0], "", good[1], bad_line])
    with pytest.raises(AnswersFileError) as raised:
        import_answers(conn, path)
    assert f"{path}:4: {message}" in str(raised.value)
    assert conn.execute("SELECT count(*) FROM answers WHERE id LIKE %s OR id = 'DUP'",
                        (f"{tag}%",)).fetchone()[0] == 0
