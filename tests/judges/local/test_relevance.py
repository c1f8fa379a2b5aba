"""The offline judges: deterministic, different signals, honest heuristics, never a guess."""

from __future__ import annotations

import asyncio
import csv
import json

import numpy as np
import pytest

from eval_harness.judges.local.relevance import (
    EmbeddingJudge,
    LexicalJudge,
    check_grounding_locally,
    evaluate_answer_locally,
    lexical_relevance,
    lexical_support,
    reflect_locally,
    trigram_support,
)
from eval_harness.judges.protocol import Judge, Outcome, Passage
from eval_harness.metrics.agreement import cohen_kappa
from eval_harness.settings.judges import LocalJudgeSettings
from paths import REPO

SOURCES = ["Aspirin reduces the risk of heart attack by 20% in adults over 50. "
           "It may cause stomach bleeding.",
           "Statins lower LDL cholesterol levels substantially in most patients."]


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture
def lexical():
    return LexicalJudge(LocalJudgeSettings())


@pytest.fixture
def embedding():
    return EmbeddingJudge(LocalJudgeSettings())


@pytest.mark.unit
def test_both_implement_the_judge_protocol(lexical, embedding):
    assert isinstance(lexical, Judge) and isinstance(embedding, Judge)
    assert (lexical.spec, embedding.spec) == ("local:lexical", "local:embedding")


@pytest.mark.unit
def test_the_two_relevance_signals_are_genuinely_different(lexical, embedding):
    same, orthogonal = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    query = Passage("aspirin heart attack", 1, same)
    words_match = Passage("Aspirin and heart attack: aspirin lowers heart attack risk.", 2,
                          orthogonal)
    meaning_match = Passage("Salicylates prevent myocardial infarction.", 3, same)
    lex = [run(lexical.relevance(query, d)).value for d in (words_match, meaning_match)]
    emb = [run(embedding.relevance(query, d)).value for d in (words_match, meaning_match)]
    assert lex[0] > 0.5 > lex[1]  # the words are there / they are not
    assert emb[0] < 0.5 < emb[1]  # the vectors disagree / agree


@pytest.mark.unit
def test_relevance_is_deterministic_and_in_range(lexical):
    first = run(lexical.relevance("aspirin heart", SOURCES[0]))
    second = run(lexical.relevance("aspirin heart", SOURCES[0]))
    assert first.value == second.value and 0.0 <= first.value <= 1.0
    assert first.cost_usd == 0.0 and first.calls == 0 and first.outcome is Outcome.SCORED


@pytest.mark.unit
def test_embedding_ramp_maps_cosine_floor_and_ceiling(embedding):
    query = np.array([1.0, 0.0])

    def score(cosine):
        document = np.array([cosine, np.sqrt(1 - cosine ** 2)])
        return run(embedding.relevance(Passage("q", 1, query), Passage("d", 2, document))).value

    # defaults: floor 0.3 -> 0.0, ceiling 0.9 -> 1.0, the threshold 0.5 at cosine 0.6
    assert score(0.1) == 0.0 and score(0.3) == 0.0 and score(0.95) == 1.0
    assert score(0.6) == pytest.approx(0.5, abs=1e-3)


@pytest.mark.unit
def test_missing_embedding_is_failed_not_guessed(embedding):
    result = run(embedding.relevance(Passage("q", 1, np.ones(3)), Passage("d", 7)))
    assert result.outcome is Outcome.FAILED and result.value is None
    assert "no stored embedding for the document 7" in result.error


@pytest.mark.unit
def test_query_without_content_words_is_failed(lexical):
    result = run(lexical.relevance("the of and", "anything"))
    assert result.outcome is Outcome.FAILED and result.value is None


@pytest.mark.unit
@pytest.mark.parametrize("support, threshold", [(lexical_support, 0.6), (trigram_support, 0.5)])
def test_grounding_supports_paraphrase_and_catches_wrong_numbers(support, threshold):
    answer = ("Aspirin lowers the risk of heart attacks by 20 percent in adults [1]. "
              "Aspirin reduces heart attack risk by 35%. "
              "Vitamin D strengthens bones and prevents fractures.")
    grounding = check_grounding_locally(answer, SOURCES, support, threshold)
    assert [c.supported for c in grounding.claims] == [True, False, False]
    assert grounding.claims[0].source == 1 and grounding.claims[1].source is None
    assert grounding.claims[0].claim.endswith("adults.")  # citation mark removed
    assert grounding.supported_share == pytest.approx(1 / 3)


@pytest.mark.unit
def test_an_answer_without_claims_has_no_grounding_share(lexical):
    result = run(lexical.grounding("Sure!", SOURCES))
    assert result.scored and result.value.claims == () and result.value.supported_share is None


@pytest.mark.unit
def test_evaluation_rewards_a_grounded_answer_and_penalises_an_off_topic_one(lexical,
                                                                             embedding):
    query = "Does aspirin reduce the risk of heart attack?"
    good = "Yes. Aspirin reduces the risk of heart attack by 20% in adults over 50 [1]."
    bad = "Vitamin D strengthens bones. Regular exercise improves sleep quality overall."
    for judge in (lexical, embedding):
        high = run(judge.evaluate_answer(query, SOURCES, good)).value
        low = run(judge.evaluate_answer(query, SOURCES, bad)).value
        assert high.reward > 0.5 > low.reward and low.reward < 0.3  # reflexion threshold
        assert high.reward == pytest.approx(2 * (0.4 * high.relevance + 0.4 * high.accuracy
                                                 + 0.2 * high.completeness) - 1, abs=1e-6)
        assert low.issues and low.improvement_hint
        assert any("not supported" in issue for issue in low.issues)


@pytest.mark.unit
def test_reflexion_turns_issues_into_a_problem_and_a_lesson(lexical):
    evaluation = evaluate_answer_locally(
        "Does aspirin help?", SOURCES, "Aspirin cures cancer in young children quickly.",
        lexical_support, 0.6)
    reflexion = reflect_locally("Does aspirin help?", "...", evaluation.reasoning,
                                evaluation.issues)
    assert "not supported" in reflexion.problem
    assert "sources support" in reflexion.lesson
    via_judge = run(lexical.reflexion("q", "a", "vague answer")).value
    assert via_judge.problem and via_judge.lesson


@pytest.mark.unit
def test_lexical_relevance_saturates():
    assert lexical_relevance("aspirin", "aspirin aspirin aspirin aspirin") == 1.0
    assert lexical_relevance("aspirin statins", "aspirin") < lexical_relevance(
        "aspirin statins", "aspirin statins")


def test_on_scifact_both_local_judges_beat_chance_against_human_labels():
    """Reference check on the bundled data: expected docs + the 5 nearest documents per
    query, each local judge's labels (> 0.5) against the human qrels."""
    root = REPO / "datasets" / "scifact"
    data = np.load(root / "embeddings.npz", allow_pickle=False)
    docs = {}
    with (root / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            docs[doc["_id"]] = f"{doc.get('title', '')}\n{doc['text']}"
    with (root / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = {q["_id"]: q["text"] for q in map(json.loads, lines)}
    relevant: dict[str, set[str]] = {}
    with (root / "qrels" / "test.tsv").open(encoding="utf-8") as rows:
        for query_id, doc_id, _ in list(csv.reader(rows, delimiter="\t"))[1:]:
            relevant.setdefault(query_id, set()).add(doc_id)
    doc_ids = list(data["doc_ids"])
    doc_index = {d: i for i, d in enumerate(doc_ids)}
    query_index = {q: i for i, q in enumerate(data["query_ids"])}
    normed = data["docs"] / np.linalg.norm(data["docs"], axis=1, keepdims=True)
    lexical, embedding = LexicalJudge(LocalJudgeSettings()), EmbeddingJudge(LocalJudgeSettings())
    labels = {"lexical": [], "embedding": [], "human": []}
    for query_id, relevant_ids in list(relevant.items())[:120]:
        vector = data["queries"][query_index[query_id]]
        nearest = [doc_ids[i] for i in np.argsort(-(normed @ vector))[:5]]
        query = Passage(queries[query_id], query_id, vector)
        for doc_id in dict.fromkeys([*relevant_ids, *nearest]):
            document = Passage(docs[doc_id], doc_id, data["docs"][doc_index[doc_id]])
            labels["lexical"].append(int(run(lexical.relevance(query, document)).value > 0.5))
            labels["embedding"].append(int(run(embedding.relevance(query, document)).value > 0.5))
            labels["human"].append(int(doc_id in relevant_ids))
    for judge in ("lexical", "embedding"):
        assert cohen_kappa(labels[judge], labels["human"]).value > 0.15
    between = cohen_kappa(labels["lexical"], labels["embedding"]).value
    assert 0.1 < between < 0.8  # related, but far from the same signal
