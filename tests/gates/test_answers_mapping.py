"""Answers in place (eval_harness.gates.answers_mapping): a seeds-style store whose answers
cite corpus ids, gated through ``quality_gates.answers`` without a byte of it changing.

The store: the small BEIR folder of tests/support/live_store.py laid out in ``rag`` like the
seeds (``rag.l2_insights`` ids 1..60), plus ``rag.served_answers`` as a RAG system keeps
what it served (its own column names, ``source_ids integer[]`` citing l2_insights ids).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timezone

import pytest

from eval_harness.gates.answers import AnswersRelationError, import_answers, stream_answers
from eval_harness.gates.window import TimeWindow
from eval_harness.gates.answers_mapping import (AnswersMappingError, check_answers_mapping,
                                                import_refusal)
from eval_harness.gates.runner import evaluate_window, run_quality_gates
from eval_harness.settings import Settings
from eval_harness.settings.datasets import Relation
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.ingest import ingest_beir
from answer_files import answer_row, write_jsonl
from gate_sources import rule_gates
from live_store import live_config
from served_answers import (DAY, MAPPING, lay_out_served_answers, served_checksum,
                            settings_for)

@pytest.fixture
def seeds_store(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        lay_out_served_answers(conn)
    return fresh


def gates():
    return rule_gates()  # format_compliance and citation_coverage


def test_answers_citing_corpus_ids_are_gated_in_place_and_not_a_row_changes(seeds_store,
                                                                            tmp_path):
    with seeds_store.connection() as conn:
        before = served_checksum(conn)
        mapped = check_answers_mapping(conn, settings_for(tmp_path))
    report = run_quality_gates(seeds_store, TimeWindow.day(DAY), gates(), relation=mapped)
    citation = {s.gate: s for s in report.summaries}["citation_coverage"]
    # 1.0, 0.5, 1.0, 1.0: only answer 2 fails, for citing a document that is not there
    assert (citation.answers, citation.passed_answers) == (4, 3)
    assert citation.failing_answer_ids == ("2",)
    with seeds_store.connection() as conn:
        assert served_checksum(conn) == before
        details = dict(conn.execute(
            "SELECT answer_id, details FROM eval_harness.gate_results "
            "WHERE gate = 'citation_coverage'").fetchall())
        assert conn.execute("SELECT count(*) FROM eval_harness.answers").fetchone()[0] == 0
    assert details["2"]["invalid_citations"] == [1]
    assert details["2"]["missing_sources"] == [{"number": 1, "id": 99999}]
    assert details["4"]["missing_sources"] == [{"number": 2, "id": 99999}]
    assert details["4"]["invalid_citations"] == [] and "missing_sources" not in details["1"]


def test_source_ids_resolve_to_corpus_texts_in_citation_order(seeds_store, tmp_path):
    with seeds_store.connection() as conn:
        mapped = check_answers_mapping(conn, settings_for(tmp_path))
        texts = dict(conn.execute("SELECT id, content FROM rag.l2_insights "
                                  "WHERE id IN (2, 5)").fetchall())
        answers = {a.id: a for a in stream_answers(conn, TimeWindow.day(DAY), relation=mapped,
                                                   batch_size=1)}
    assert sorted(answers) == ["1", "2", "3", "4"]
    assert answers["4"].sources == [{"id": 5, "text": texts[5]},
                                    {"id": 99999, "text": "", "missing": True},
                                    {"id": 2, "text": texts[2]}]
    assert answers["4"].query == "What does it show?"
    assert answers["4"].created_at == datetime(2025, 5, 1, 12, tzinfo=timezone.utc)


def test_an_edit_to_one_cited_document_regates_exactly_the_answers_citing_it(seeds_store,
                                                                            tmp_path):
    window = TimeWindow.day(DAY)
    with seeds_store.connection() as conn:
        mapped = check_answers_mapping(conn, settings_for(tmp_path))
    evaluate_window(seeds_store, window, gates(), relation=mapped)
    assert evaluate_window(seeds_store, window, gates(), relation=mapped).answers_read == 0
    with seeds_store.connection() as conn, conn.transaction():  # the RAG system edits doc 7
        conn.execute("UPDATE rag.l2_insights SET content = content || ' (revised)' "
                     "WHERE id = 7")
    rerun = evaluate_window(seeds_store, window, gates(), relation=mapped)
    with seeds_store.connection() as conn:
        regated = {row[0] for row in conn.execute(
            "SELECT answer_id FROM eval_harness.gate_results WHERE run_id = %s",
            (rerun.run_id,))}
    assert rerun.answers_read == 2 and regated == {"1", "3"}  # the two citing id 7


def test_sources_from_an_ingested_copy(seeds_store, beir_folder, tmp_path):
    mapping = dataclasses.replace(MAPPING, dataset="copy")
    with seeds_store.connection() as conn:
        ingest_beir(conn, beir_folder, name="copy")
        copy = dict(conn.execute("SELECT id, content FROM eval_harness.l2_insights "
                                 "WHERE dataset = 'copy' AND id IN (3, 7)").fetchall())
        mapped = check_answers_mapping(conn, settings_for(tmp_path, mapping))
        answer = next(a for a in stream_answers(conn, TimeWindow.day(DAY), relation=mapped)
                      if a.id == "1")
    assert answer.sources == [{"id": 3, "text": copy[3]}, {"id": 7, "text": copy[7]}]


def test_json_sources_are_read_as_the_answers_contract(seeds_store, tmp_path):
    with seeds_store.connection() as conn, conn.transaction():
        conn.execute("CREATE TABLE rag.json_answers AS SELECT answer_id, question, response, "
                     "served_at, jsonb_build_array(jsonb_build_object('id', 'd1', 'text', "
                     "'first')) AS cited FROM rag.served_answers")
        conn.execute("ALTER TABLE rag.json_answers ADD PRIMARY KEY (answer_id)")
    mapping = dataclasses.replace(MAPPING, relation=Relation("rag", "json_answers"),
                                  sources="cited", kind="json", dataset=None)
    with seeds_store.connection() as conn:
        mapped = check_answers_mapping(conn, settings_for(tmp_path, mapping))
        answers = list(stream_answers(conn, TimeWindow.day(DAY), relation=mapped))
    assert len(answers) == 4 and all(a.sources == [{"id": "d1", "text": "first"}]
                                     for a in answers)


def test_import_into_a_mapped_relation_is_refused(seeds_store, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [answer_row("x-1", "Text [1].", None)])
    settings = settings_for(tmp_path)
    with seeds_store.connection() as conn:
        before = served_checksum(conn)
        mapped = check_answers_mapping(conn, settings)
        with pytest.raises(AnswersRelationError, match="quality_gates.answers maps it"):
            import_answers(conn, path, relation=mapped)
        assert served_checksum(conn) == before
    assert "only reads" in import_refusal(settings)
    assert import_refusal(Settings(config_path=None, root=tmp_path)) is None


M = MAPPING


@pytest.mark.parametrize(("mapping", "datasets", "message"), [
    (dataclasses.replace(M, relation=Relation("rag", "nope")), None,
     "'quality_gates.answers.relation': rag.nope does not exist in the store"),
    (dataclasses.replace(M, id="nope"), None,
     "'quality_gates.answers.id': rag.served_answers has no column 'nope'"),
    (dataclasses.replace(M, id="reward"), None,
     "'quality_gates.answers.id': column rag.served_answers.reward is double precision"),
    (dataclasses.replace(M, id="session_id"), None,
     "'quality_gates.answers.id': rag.served_answers.session_id is not unique: 1 ids"),
    (dataclasses.replace(M, query="reward"), None,
     "'quality_gates.answers.query': column rag.served_answers.reward is double precision; "
     "it must be text"),
    (dataclasses.replace(M, answer="source_ids"), None,
     "'quality_gates.answers.answer': column rag.served_answers.source_ids is integer[]"),
    (dataclasses.replace(M, created_at="served_local"), None,
     "'quality_gates.answers.created_at': column rag.served_answers.served_local is "
     "timestamp without time zone; it must be timestamp with time zone"),
    (dataclasses.replace(M, sources="source_names"), None,
     "'quality_gates.answers.sources.column': column rag.served_answers.source_names is "
     "text[] but the ids of dataset 'live'"),
    (dataclasses.replace(M, kind="json", dataset=None), None,
     "'quality_gates.answers.sources.column': column rag.served_answers.source_ids is "
     "integer[]; it must be jsonb or json"),
    (dataclasses.replace(M, dataset="nope"), None,
     "'quality_gates.answers.dataset': dataset 'nope' is neither a live dataset"),
    (M, {"live": live_config(relation=Relation("rag", "gone"))},
     "'datasets.live.live.corpus.relation': rag.gone does not exist"),
    (M, {"live": live_config(content="embedding")},
     "'datasets.live.live.corpus.content': column rag.l2_insights.embedding is vector"),
])
def test_each_mapping_problem_is_one_sentence_naming_the_key(seeds_store, tmp_path, mapping,
                                                             datasets, message):
    with seeds_store.connection() as conn:
        with pytest.raises(AnswersMappingError) as err:
            check_answers_mapping(conn, settings_for(tmp_path, mapping, **(datasets or {})))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_role_that_may_not_read_the_answers_is_told_the_grant(seeds_store, tmp_path):
    role = f"eh_noread_{uuid.uuid4().hex[:8]}"  # roles are per server: a name of its own
    with seeds_store.connection(autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
        try:
            conn.execute(f'GRANT USAGE ON SCHEMA rag TO "{role}"')
            conn.execute(f'SET ROLE "{role}"')
            with pytest.raises(AnswersMappingError, match=(
                    "'quality_gates.answers.relation': this role may not SELECT from "
                    "rag.served_answers; GRANT SELECT ON rag.served_answers")):
                check_answers_mapping(conn, settings_for(tmp_path))
            conn.execute("RESET ROLE")
            conn.execute(f'REVOKE USAGE ON SCHEMA rag FROM "{role}"')
            conn.execute(f'SET ROLE "{role}"')
            with pytest.raises(AnswersMappingError, match="may not use schema rag; GRANT USAGE"):
                check_answers_mapping(conn, settings_for(tmp_path))
        finally:
            conn.execute("RESET ROLE")
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_the_window_is_a_condition_on_the_mapped_relation_itself(seeds_store, tmp_path):
    """The mapped relation is read through a subquery that the planner pulls up, so the daily
    window is an index condition on the RAG table (one day's rows read), not a filter over
    every answer with its sources resolved. Sequential scans are switched off: with four rows
    the planner would otherwise rightly prefer one."""
    from psycopg import sql

    from eval_harness.gates import sql as gate_sql

    window = TimeWindow.day(DAY)
    with seeds_store.connection() as conn:
        conn.execute("CREATE INDEX ON rag.served_answers (served_at)")
        mapped = check_answers_mapping(conn, settings_for(tmp_path))
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(row[0] for row in conn.execute(
            sql.SQL("EXPLAIN ") + gate_sql._pending_query(mapped, window),
            gate_sql._pending_params(window, ["citation_coverage"], ["v"])))
    scan = next(line for line in plan.splitlines() if "served_answers m" in line)
    assert "Index" in scan and "served_answers_served_at_idx" in scan, plan
    assert "Subquery Scan" not in plan, plan


def test_the_main_job_gates_the_days_with_answers_in_the_latest_week(seeds_store, tmp_path):
    from datetime import date

    from eval_harness.gates.sql import recent_answer_days

    with seeds_store.connection() as conn:
        with conn.transaction():
            for answer_id, served_at in ((10, "2025-04-20T23:30:00-02:00"),  # 04-21 UTC
                                         (11, "2025-04-25T00:30:00Z"),
                                         (12, "2025-04-28T10:00:00Z")):
                conn.execute("INSERT INTO rag.served_answers (answer_id, question, response, "
                             "source_ids, served_at) VALUES (%s, 'q', 'a', '{1}', %s)",
                             (answer_id, served_at))
        mapped = check_answers_mapping(conn, settings_for(tmp_path))
        # the week up to 2025-05-01: 04-25 .. 05-01; 04-21 is older
        assert recent_answer_days(conn, mapped, days=7) == [
            date(2025, 4, 25), date(2025, 4, 28), date(2025, 5, 1)]


def test_a_mapping_onto_the_missing_demo_schema_says_where_it_exists(seeds_store, tmp_path):
    mapping = dataclasses.replace(MAPPING, relation=Relation("rag", "answers"))
    settings = dataclasses.replace(settings_for(tmp_path, mapping), demo_rag_schema="rag",
                                   database_url=seeds_store.url)
    with seeds_store.connection() as conn:
        with pytest.raises(AnswersMappingError, match=(
                r"^'quality_gates.answers.relation': rag.answers does not exist in the store: "
                r"the demo schema 'rag' \(store.demo_rag_schema\) is laid out only in the "
                r"embedded store, never in yours")):
            check_answers_mapping(conn, settings)
        embedded = dataclasses.replace(settings, database_url=None)
        with pytest.raises(AnswersMappingError, match=r"`eval-harness run` \(or `attach`\)"):
            check_answers_mapping(conn, embedded)
