"""A seeds-style RAG store whose answers cite corpus ids: ``rag.served_answers`` beside the
``rag`` layout of tests/support/live_store.py (``rag.l2_insights`` ids 1..60), its mapping
(``quality_gates.answers``) and a checksum of every RAG row."""

from __future__ import annotations

from pathlib import Path

from eval_harness.settings import QualityGateSettings, Settings
from eval_harness.settings.datasets import Relation
from eval_harness.settings.gates_answers import AnswersMapping
from live_store import live_config, rag_checksum

DAY = "2025-05-01"
MAPPING = AnswersMapping(Relation("rag", "served_answers"), id="answer_id", query="question",
                         answer="response", created_at="served_at", sources="source_ids",
                         kind="ids", dataset="live")
# answer_id -> (answer, source_ids); citation scores worked by hand (threshold 0.70):
SERVED = {
    1: ("Aspirin lowers the risk of heart attacks [1]. Statins lower cholesterol [2].", [3, 7]),
    # [1] cites id 99999, which is no document: invalid, 1/1 halved = 0.5
    2: ("Aspirin lowers the risk of heart attacks [1].", [99999]),
    3: ("Vitamin pills do not prevent strokes in adults [1].", [7]),  # 1.0
    # [1] and [3] are documents; 99999 is listed but not cited: 2/2 = 1.0, named as missing
    4: ("Coffee raises blood pressure briefly [1]. Sleep helps memory in older adults [3].",
        [5, 99999, 2]),
}


def settings_for(tmp_path: Path, mapping: AnswersMapping = MAPPING, **datasets) -> Settings:
    return Settings(config_path=None, root=tmp_path,
                    datasets=datasets or {"live": live_config()},
                    quality_gates=QualityGateSettings(answers=mapping))


def lay_out_served_answers(conn) -> None:
    with conn.transaction():
        conn.execute("""CREATE TABLE rag.served_answers (
            answer_id bigint PRIMARY KEY, question text NOT NULL, response text NOT NULL,
            source_ids integer[] NOT NULL, reward float8, reasoning text,
            session_id integer, source_names text[], served_local timestamp,
            served_at timestamptz NOT NULL DEFAULT now())""")
        for answer_id, (text, ids) in SERVED.items():
            conn.execute("INSERT INTO rag.served_answers (answer_id, question, response, "
                         "source_ids, session_id, served_at) VALUES (%s, %s, %s, %s, 1, %s)",
                         (answer_id, "What does it show?", text, ids, f"{DAY}T12:00:00Z"))


def served_checksum(conn) -> str:
    """md5 of every row of every RAG relation (the seeds' three and the answers)."""
    served = conn.execute("SELECT md5(string_agg(t::text, '|' ORDER BY t.answer_id)) "
                          "FROM rag.served_answers t").fetchone()[0]
    return rag_checksum(conn) + ":" + served


