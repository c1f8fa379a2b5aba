"""``ground-truth generate`` through the CLI on a corpus without queries: offline (the
embedded default) and with LLM writer, critic and judges on the fake provider."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from cli_runs import run_cli
from eval_harness.query_sources.generate import kind_sequence
from eval_harness.query_sources.offline_writer import TermStatistics, critique, write_query


def test_kind_sequence_keeps_the_shares():
    kinds = list(islice(kind_sequence({"question": 0.6, "paraphrase": 0.3,
                                       "unanswerable": 0.1}), 100))
    assert (kinds.count("question"), kinds.count("paraphrase"),
            kinds.count("unanswerable")) == (60, 30, 10)
    assert "unanswerable" in kinds[:10]


def test_offline_critic_drops_a_query_that_gives_the_answer_away():
    document = "Aspirin lowers the risk of a second heart attack by 25 percent in older men."
    stats = TermStatistics([document, "Statins lower cholesterol.", "Insulin and diabetes."])
    assert "gives the answer away" in critique(
        document, "does aspirin lower the risk of a second heart attack", "question", stats)
    assert "number 25" in critique(document, "aspirin heart attack 25", "question", stats)
    assert "not answerable" in critique(document, "What about glaciers?", "question", stats)
    written = write_query(document, "question", stats, seed=0, doc_key="d1")
    assert written.text and critique(document, written.text, "question", stats) is None


@pytest.fixture
def corpus(fresh, tmp_path, monkeypatch):
    from corpus_only import corpus_only_folder

    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_CONFIG",
                     "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return corpus_only_folder(tmp_path / "corpus", n_docs=300)


def _stored(location, dataset):
    with location.connection() as conn:
        return conn.execute("""
            SELECT g.external_id, g.query, g.origin, g.query_kind, d.external_id,
                   cardinality(g.expected_docs)
            FROM ground_truth g JOIN l2_insights d ON d.id = g.source_document
            WHERE g.dataset = %s ORDER BY g.id""", (dataset,)).fetchall()


def test_offline_generate_stores_50_distinct_queries_each_naming_its_document(
        corpus, capsys, fresh):
    code, out, err = run_cli(capsys, "ingest", corpus, "--name", "bare")
    assert code == 0, err
    code, out, err = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                             "--queries", "50", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["new"] == 50 and result["writer"] == "local:offline"
    rows = _stored(fresh, "bare")
    assert len(rows) == 50 and len({r[1].lower() for r in rows}) == 50
    assert {r[2] for r in rows} == {"generated"} and {r[5] for r in rows} == {0}
    assert {r[3] for r in rows} == {"question", "paraphrase", "unanswerable"}
    listed = {q["id"]: q for q in result["queries"]}
    assert all(listed[r[0]]["source_document"] == r[4] for r in rows)
    assert all(d["reason"] for d in result["dropped"])
    assert 0.3 < result["source_in_top_5"] <= 1.0
    # a rerun adds none; a re-ingest keeps them; more queries extend the same set
    code, out, _ = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                           "--queries", "50", "--json")
    assert code == 0 and json.loads(out)["new"] == 0
    assert run_cli(capsys, "ingest", corpus, "--name", "bare")[0] == 0
    assert _stored(fresh, "bare") == rows
    code, out, _ = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                           "--queries", "60", "--json")
    assert json.loads(out)["new"] == 10 and _stored(fresh, "bare")[:50] == rows
    code, out, _ = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                           "--queries", "70", "--dry-run")
    assert code == 0 and "10 queries to write" in out and "$0" in out
    assert len(_stored(fresh, "bare")) == 60


def test_generate_refuses_an_unknown_dataset_in_one_sentence(corpus, capsys):
    code, _, err = run_cli(capsys, "ground-truth", "generate", "--dataset", "nowhere",
                           "--queries", "5")
    assert code == 2 and "not in the store" in err and "Traceback" not in err


def test_llm_generate_then_judge_and_calibrate_on_the_generated_queries(
        corpus, capsys, fresh, fake, monkeypatch, tmp_path):
    from judge_cli_env import judge_cli_environment

    judge_cli_environment(monkeypatch, fresh, fake, tag="gen")
    # not a test of the rates: at the shipped token limits (openai 30,000/min) the judging
    # alone takes 30 s
    (tmp_path / "config.yaml").write_text(
        "default_dataset: bare\njudges:\n  rate_limits:\n"
        "    openai: {requests_per_minute: 6000, tokens_per_minute: 10000000}\n"
        "    anthropic: {requests_per_minute: 6000, tokens_per_minute: 10000000}\n",
        encoding="utf-8")
    assert run_cli(capsys, "ingest", corpus, "--name", "bare")[0] == 0
    code, out, err = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                             "--queries", "4", "--dry-run", "--json")
    assert code == 0, err
    priced = json.loads(out)
    assert priced["to_pay"] == 8 and priced["max_cost_usd"] > 0 and fake.chat_requests == 0
    code, out, err = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                             "--queries", "4", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["writer"] == "openai:gpt-4o" and result["critic"] == "anthropic:claude-haiku-4-5"
    assert result["new"] == 4 and result["cost_usd"] > 0
    sent = fake.chat_requests
    assert sent >= 8
    with fresh.connection() as conn:
        purposes = conn.execute("SELECT DISTINCT purpose FROM api_cost_log").fetchall()
    assert purposes == [("ground_truth",)]
    # a rerun asking for the same 4 sends nothing
    code, out, _ = run_cli(capsys, "ground-truth", "generate", "--dataset", "bare",
                           "--queries", "4", "--json")
    assert json.loads(out)["new"] == 0 and fake.chat_requests == sent
    code, out, err = run_cli(capsys, "judge", "--dataset", "bare")
    assert code == 0, err
    code, out, err = run_cli(capsys, "calibrate", "--dataset", "bare", "--labels", "judges",
                             "--no-write")
    assert code in (0, 1), err
    assert "Labels: judges" in out and "queries: 4 generated" in out
    code, _, err = run_cli(capsys, "report", "--dataset", "bare")
    assert code == 2 and "4 generated queries" in err and "--labels judges" in err


def test_report_on_human_labels_leaves_generated_queries_out(corpus, capsys, tmp_path):
    from beir_factory import write_beir

    words = ["aspirin", "statin", "insulin", "vitamin", "ibuprofen", "melatonin"]
    docs = {f"d{i}": f"{w} dosage trial outcomes in adults {w} cohort" for i, w in
            enumerate(words)}
    folder = write_beir(tmp_path / "labelled", docs,
                        {"q1": "aspirin dosage", "q2": "statin trial"},
                        [("q1", "d0", 1), ("q2", "d1", 1)])
    assert run_cli(capsys, "ingest", folder, "--name", "mixed")[0] == 0
    code, out, _ = run_cli(capsys, "report", "--dataset", "mixed", "--json")
    before = json.loads(out)
    code, out, err = run_cli(capsys, "ground-truth", "generate", "--dataset", "mixed",
                             "--queries", "3", "--json")
    assert code == 0, err
    assert json.loads(out)["new"] == 3
    code, out, err = run_cli(capsys, "report", "--dataset", "mixed", "--json")
    assert code == 0, err
    after = json.loads(out)
    assert after["queries"] == before["queries"] == 2
    assert after["metrics"] == before["metrics"]
    assert after["unlabelled_origins"] == {"generated": 3}
    code, out, _ = run_cli(capsys, "report", "--dataset", "mixed")
    assert "3 generated queries are left out" in out
    written = (tmp_path / "reports" / "latest.md").read_text(encoding="utf-8")
    assert "the dataset's 3 generated queries have none and are left out" in written
