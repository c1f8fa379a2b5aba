"""The demo store's answers table (eval_harness.datasets.demo_store.build_rag_answers): the bundled
sample answers kept as a RAG system keeps them, citing rag.l2_insights ids, and gated in
place through the shipped config's ``quality_gates.answers`` with the same rule-based
findings as the sample imported into the harness's own table.

The corpus is a small BEIR folder holding the SciFact abstracts the sample cites (verbatim),
so the layout takes a second rather than the full SciFact's index build."""

from __future__ import annotations

from datetime import datetime

import pytest

from answer_files import SAMPLE
from demo_answers import demo_answers_store
from eval_harness.datasets.demo_store import build_rag_answers, build_rag_store
from eval_harness.gates.answers import import_answers, stream_answers
from eval_harness.gates.answers_mapping import check_answers_mapping
from eval_harness.gates.runner import run_quality_gates
from eval_harness.gates.window import TimeWindow
from eval_harness.settings import load_settings
from gate_sources import rule_gates
from paths import REPO

DAYS = ("2025-03-03", "2025-03-04", "2025-03-05")


@pytest.fixture
def demo_store(fresh, tmp_path):
    return demo_answers_store(fresh, tmp_path)


def test_each_source_becomes_the_l2_insights_id_of_its_document(demo_store):
    with demo_store["store"].connection() as conn:
        stored = {answer_id: (query, answer, sources, created_at) for
                  answer_id, query, answer, sources, created_at in conn.execute(
                      "SELECT id, query, answer, sources, created_at FROM rag.answers")}
        beir_id = dict(conn.execute("SELECT id, metadata->>'beir_id' FROM rag.l2_insights"))
        before = conn.execute("SELECT md5(string_agg(a::text, '|' ORDER BY a.id)) "
                              "FROM rag.answers a").fetchone()[0]
        assert build_rag_answers(conn, SAMPLE, schema="rag") == 30  # once: left as it is
        assert conn.execute("SELECT md5(string_agg(a::text, '|' ORDER BY a.id)) "
                            "FROM rag.answers a").fetchone()[0] == before
    for row in demo_store["rows"]:
        query, answer, sources, created_at = stored[row["id"]]
        assert (query, answer) == (row["query"], row["answer"])
        assert [beir_id[i] for i in sources] == [str(s["id"]) for s in row["sources"]]
        assert created_at == datetime.fromisoformat(row["created_at"])


def _failing(store, relation):
    gates = rule_gates()  # format_compliance and citation_coverage
    found = {}
    for day in DAYS:
        report = run_quality_gates(store, TimeWindow.day(day), gates, relation=relation)
        found.update({(day, s.gate): (s.answers, s.failing_answer_ids)
                      for s in report.summaries})
    return found


def test_the_shipped_mapping_gates_the_demo_answers_with_the_samples_findings(demo_store):
    store = demo_store["store"]
    settings = load_settings(REPO / "config.yaml", environ={"DATABASE_URL": store.url})
    with store.connection() as conn:
        mapped = check_answers_mapping(conn, settings)
        sources = conn.execute("SELECT sources FROM rag.answers WHERE id = 'sa-0303-04'"
                               ).fetchone()[0]
        texts = dict(conn.execute("SELECT id, content FROM rag.l2_insights"))
    in_place = _failing(store, mapped)
    with store.connection() as conn:
        import_answers(conn, SAMPLE)  # the same answers, chunks as sources, in `answers`
    imported = _failing(store, "answers")
    assert in_place == imported
    # datasets/answers/README.md: 2025-03-04 fails both rule-based gates, six format defects
    assert in_place[("2025-03-04", "format_compliance")] == (10, (
        "sa-0304-01", "sa-0304-02", "sa-0304-03", "sa-0304-04", "sa-0304-05", "sa-0304-08"))
    assert in_place[("2025-03-05", "citation_coverage")] == (10, ("sa-0305-09",))
    # the texts the gates read are the corpus's whole documents, in citation order
    with store.connection() as conn:
        answer = next(a for a in stream_answers(conn, TimeWindow.day("2025-03-03"),
                                                relation=mapped) if a.id == "sa-0303-04")
    assert [s["text"] for s in answer.sources] == [texts[i] for i in sources]
    assert len(sources) == 2


def test_answers_over_another_corpus_are_one_sentence_and_no_table(fresh, beir_folder):
    from eval_harness.datasets.live_rows import LiveMappingError

    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")  # random words, no SciFact abstract
        with pytest.raises(LiveMappingError, match=r"^'store.demo_rag_answers': .* cites 30 "
                                                   r"documents that are not in the demo corpus"):
            build_rag_answers(conn, SAMPLE, schema="rag")
        assert conn.execute("SELECT to_regclass('rag.answers')").fetchone()[0] is None
