"""Answers from traces keep their trace and span ids (migration 0019): stored, compared on
reimport, and read back for linking results to the trace."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from eval_harness.gates import sql
from eval_harness.gates.answers import AnswersRelationError, import_answers
from eval_harness.gates.traces import TracedAnswer


@pytest.fixture
def conn(rolled_back):
    """Answers dated today stay out of the other tests' gate windows."""
    return rolled_back


def traced(trace_id: str, span_id: str, text: str = "X is Y [1].") -> TracedAnswer:
    return TracedAnswer(trace_id, "What is X?", text, [{"id": "d1", "text": "X is Y."}],
                        datetime(2026, 3, 3, 9, 15, tzinfo=UTC), trace_id, span_id)


def test_traced_answers_store_their_ids_and_reimport_is_idempotent(conn, tmp_path):
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    records = [traced(first, "1" * 16), traced(second, "2" * 16)]
    report = import_answers(conn, tmp_path / "spans.jsonl", records=records)
    assert (report.inserted, report.updated, report.unchanged) == (2, 0, 0)
    assert sql.answer_trace_links(conn, "answers", [first, second, "nope"]) == {
        first: (first, "1" * 16), second: (second, "2" * 16)}
    again = import_answers(conn, tmp_path / "spans.jsonl", records=records)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 2)
    # the same trace answered by a later LLM span: the span id alone makes it an update
    moved = [records[0], replace(records[1], span_id="3" * 16)]
    changed = import_answers(conn, tmp_path / "spans.jsonl", records=moved)
    assert (changed.inserted, changed.updated, changed.unchanged) == (0, 1, 1)
    assert sql.answer_trace_links(conn, "answers", [second]) == {second: (second, "3" * 16)}


def test_a_relation_without_the_trace_columns_says_to_migrate(conn, tmp_path):
    conn.execute("CREATE TEMP TABLE own_answers (id text PRIMARY KEY, query text, answer text, "
                 "sources jsonb, created_at timestamptz)")
    with pytest.raises(AnswersRelationError) as raised:
        import_answers(conn, tmp_path / "spans.jsonl", relation="own_answers",
                       records=[traced(uuid.uuid4().hex, "1" * 16)])
    message = str(raised.value)
    assert message.startswith("Cannot write answers into 'own_answers' (column a.trace_id does "
                              "not exist)")
    assert "answers from traces also trace_id and span_id" in message
