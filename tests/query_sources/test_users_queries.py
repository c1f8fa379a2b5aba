"""Users' queries: normalising, merging near-duplicates, sharing a sample out over days, and
``ground-truth from-answers`` through the CLI on imported answers."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from itertools import combinations

import pytest

from cli_runs import run_cli
from eval_harness.query_sources.users_queries import (
    day_shares,
    distinct_queries,
    jaccard,
    normalised,
    stratified_sample,
)

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


def _answers(*texts, day=0):
    return [(f"a{day}-{i}", t, T0 + timedelta(days=day, minutes=i)) for i, t in enumerate(texts)]


def test_normalised_ignores_case_punctuation_and_spaces():
    assert normalised("What  is aspirin?") == normalised("what is ASPIRIN") == "what is aspirin"
    assert normalised("don't stop") == "don't stop"


def test_equal_and_near_duplicate_queries_are_one_with_every_answer_id():
    found = distinct_queries(_answers(
        "Does aspirin reduce heart attack risk?", "does aspirin reduce heart attack risk",
        "Does aspirin reduce the heart attack risk?",   # one word more: Jaccard 6/7
        "Is ibuprofen safe in pregnancy?"), similarity=0.8)
    assert [len(q.answer_ids) for q in found.queries] == [3, 1]
    assert found.queries[0].answer_ids == ["a0-0", "a0-1", "a0-2"]
    assert found.queries[0].text == "Does aspirin reduce heart attack risk?"


def test_prefix_filter_finds_what_comparing_every_pair_finds():
    # the prefix filter must merge exactly as the all-pairs rule would (greedy, in time order)
    import random
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(12)]
    texts = [" ".join(rng.sample(vocabulary, rng.randint(2, 6))) for _ in range(300)]
    found = distinct_queries(_answers(*texts), similarity=0.6)
    reps = [q.words for q in found.queries]
    for a, b in combinations(reps, 2):  # no two kept queries are near-duplicates
        assert jaccard(a, b) < 0.6
    for q in found.queries:  # every merged wording is near its query
        for wording in q.wordings:
            assert jaccard(frozenset(normalised(wording).split()), q.words) >= 0.6 - 1e-9


def test_personal_data_is_skipped_and_counted():
    found = distinct_queries(_answers("mail me at bob@example.org", "call 555 123 4567 now",
                                      "what is aspirin"), similarity=0.8)
    assert [q.text for q in found.queries] == ["what is aspirin"]
    assert found.skipped_personal == 2
    assert found.skipped_reasons == {"an e-mail address": 1, "a phone number": 1}


def test_day_shares_follow_the_days_and_sum_to_n():
    counts = {date(2026, 11, d): c for d, c in ((1, 50), (2, 30), (3, 20))}
    assert day_shares(counts, 10) == {date(2026, 11, 1): 5, date(2026, 11, 2): 3,
                                      date(2026, 11, 3): 2}
    assert sum(day_shares(counts, 7).values()) == 7
    assert day_shares({date(2026, 11, 1): 2}, 9) == {date(2026, 11, 1): 2}


def test_stratified_sample_is_seeded_and_spread_over_days():
    found = distinct_queries(_answers(*(f"question {i} on day zero" for i in range(30)))
                             + _answers(*(f"asked {i} later" for i in range(10)), day=1),
                             similarity=0.99)
    first = stratified_sample(found.queries, 8, seed=3)
    assert first == stratified_sample(found.queries, 8, seed=3)
    assert sorted(q.day.day for q in first) == [1] * 6 + [2] * 2
    assert {q.key for q in stratified_sample(found.queries, 8, seed=4)} != {q.key for q in first}


@pytest.fixture
def answered_dataset(fresh, tmp_path, monkeypatch):
    """A corpus-only dataset and an answers file with repeated, near-duplicate and
    personal queries over three days, imported through the CLI."""
    from corpus_only import corpus_only_folder

    monkeypatch.setenv("DATABASE_URL", fresh.url)
    monkeypatch.chdir(tmp_path)
    folder = corpus_only_folder(tmp_path / "corpus", n_docs=50)
    lines = []
    texts = ["What causes insulin resistance?", "what causes insulin resistance",
             "Is vitamin D linked to bone density?", "email me: ann@example.com about statins",
             "My phone is +44 20 7946 0958, which drug is best?",
             "How do statins lower cholesterol?", "How do statins lower the cholesterol?",
             "Which genes drive breast cancer?", "Does exercise help depression?",
             "Can aspirin prevent colorectal cancer?"]
    for i, text in enumerate(texts):
        created = (T0 + timedelta(days=i % 3, minutes=i)).isoformat()
        lines.append(json.dumps({"id": f"ans-{i}", "query": text, "answer": "See [1].",
                                 "sources": [{"id": "1", "text": "x"}], "created_at": created}))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, answers


def test_from_answers_through_the_cli_stores_distinct_queries_once(answered_dataset, capsys,
                                                                   fresh):
    folder, answers = answered_dataset
    assert run_cli(capsys, "ingest", folder, "--name", "asked")[0] == 0
    assert run_cli(capsys, "answers", "import", answers)[0] == 0
    code, out, err = run_cli(capsys, "ground-truth", "from-answers", "--dataset", "asked",
                             "--queries", "20", "--json")
    assert code == 0, err
    result = json.loads(out)
    texts = sorted(q["text"] for q in result["queries"])
    assert result["skipped_personal_data"] == 2 and result["distinct"] == 6
    assert result["new"] == 6 and len(texts) == 6
    assert "What causes insulin resistance?" in texts
    merged = next(q for q in result["queries"] if q["text"].startswith("How do statins"))
    assert sorted(merged["answer_ids"]) == ["ans-5", "ans-6"]
    with fresh.connection() as conn:
        stored = conn.execute("SELECT origin, answer_ids, cardinality(expected_docs) FROM "
                              "ground_truth WHERE dataset = 'asked'").fetchall()
    assert len(stored) == 6 and {row[0] for row in stored} == {"users"}
    assert {row[2] for row in stored} == {0}
    assert not any("@" in q or "7946" in q for q in texts)
    code, out, _ = run_cli(capsys, "ground-truth", "from-answers", "--dataset", "asked",
                           "--queries", "20")
    assert code == 0 and "0 new" in out and "6 already stored" in out
    assert run_cli(capsys, "ingest", folder, "--name", "asked")[0] == 0  # an ingest keeps them
    with fresh.connection() as conn:
        assert conn.execute("SELECT count(*) FROM ground_truth WHERE dataset = 'asked'"
                            ).fetchone()[0] == 6


def test_from_answers_without_answers_says_what_to_do(answered_dataset, capsys):
    folder, _ = answered_dataset
    assert run_cli(capsys, "ingest", folder, "--name", "silent")[0] == 0
    code, _, err = run_cli(capsys, "ground-truth", "from-answers", "--dataset", "silent",
                           "--queries", "5")
    assert code == 2 and "answers import" in err and "Traceback" not in err


def test_from_answers_reads_the_demo_answers_through_the_shipped_mapping(fresh, tmp_path,
                                                                         monkeypatch, capsys):
    from demo_answers import demo_answers_store
    from paths import REPO

    demo = demo_answers_store(fresh, tmp_path)
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    monkeypatch.chdir(tmp_path)
    shipped = REPO / "config.yaml"
    assert run_cli(capsys, "--config", shipped, "ingest", demo["folder"], "--name",
                   "demo-gt")[0] == 0
    code, out, err = run_cli(capsys, "--config", shipped, "ground-truth", "from-answers",
                             "--dataset", "demo-gt", "--queries", "12", "--json")
    assert code == 0, err
    result = json.loads(out)
    asked = {row["id"]: row["query"] for row in demo["rows"]}
    assert result["answers"] == 30 and result["relation"] == "rag.answers (quality_gates.answers)"
    assert result["days"] == 3 and len(result["queries"]) == min(12, result["distinct"])
    words = lambda text: frozenset(normalised(text).split())  # noqa: E731
    for query in result["queries"]:  # each keeps the answers it was asked in, and only those
        assert query["answer_ids"] and all(
            jaccard(words(asked[a]), words(query["text"])) >= 0.8 for a in query["answer_ids"])
    every = [a for q in result["queries"] for a in q["answer_ids"]]
    assert len(every) == len(set(every))
    by_day = {day: sum(q["day"] == day for q in result["queries"])
              for day in ("2025-03-03", "2025-03-04", "2025-03-05")}
    assert all(n >= 3 for n in by_day.values()), by_day  # shared out over the three days


def test_from_answers_reads_imported_traces(fresh, tmp_path, monkeypatch, capsys):
    from traced_rag import otlp_json_lines, run_rag

    questions = ("Does aspirin lower the risk of heart attacks?",
                 "does aspirin lower the risk of heart attacks",
                 "Do statins lower cholesterol?", "Does sleep help memory? mail sam@example.org")
    spans, expected = run_rag(questions)
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    monkeypatch.chdir(tmp_path)
    from corpus_only import corpus_only_folder
    assert run_cli(capsys, "ingest", corpus_only_folder(tmp_path / "c", n_docs=20),
                   "--name", "traced")[0] == 0
    traces = tmp_path / "spans.jsonl"
    traces.write_text(otlp_json_lines(spans), encoding="utf-8")
    assert run_cli(capsys, "answers", "import", traces)[0] == 0
    code, out, err = run_cli(capsys, "ground-truth", "from-answers", "--dataset", "traced",
                             "--queries", "10", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["answers"] == 4 and result["skipped_personal_data"] == 1
    assert sorted(q["text"] for q in result["queries"]) == [
        "Do statins lower cholesterol?", "Does aspirin lower the risk of heart attacks?"]
    aspirin = next(q for q in result["queries"] if "aspirin" in q["text"])
    assert sorted(aspirin["answer_ids"]) == sorted(e.trace_id for e in expected[:2])
