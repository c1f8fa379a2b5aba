"""Documents with no text (Cranfield has two, one in its qrels): kept, findable by id, never
retrieved, and the retrieval metrics still compute (no NaN).

The folder is built here: two empty documents (``"text": ""`` and no ``text`` at all), one
with a title and no text (not empty), and ordinary ones. The precomputed row of the empty
document in the qrels equals its query's vector, so if it were stored and searched it would
be the first semantic hit.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import replace

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.beir import DatasetError, read_beir
from eval_harness.datasets.embeddings import load_precomputed, save_precomputed
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.retrieval.hybrid import candidate_scores, hybrid_search
from eval_harness.retrieval.report import retrieval_report
from eval_harness_pipelines import cli

DOCS = {"d1": "Aspirin reduces the risk of heart attack",
        "d2": "Statins lower cholesterol levels in adults",
        "d3": "Exercise improves heart health and mood",
        "e1": "",                                   # empty, in the qrels of q1
        "t1": ""}                                   # gets a title below: not empty
QUERIES = {"q1": "aspirin heart attack", "q2": "cholesterol statins"}
QRELS = [("q1", "d1", 1), ("q1", "e1", 2), ("q2", "d2", 1)]
TITLE = "Blood pressure and salt"


def dataset_name() -> str:
    return f"e{uuid.uuid4().hex[:8]}"


def write_folder(tmp_path):
    """The BEIR folder described in the module docstring; e2 has no ``text`` key and no row
    in embeddings.npz (an empty document needs none)."""
    vectors = np.eye(5, 8, dtype=np.float32)
    vectors[3] = vectors[0] + 0.5  # e1: its row would rank first for q1
    folder = write_beir(tmp_path / "cranfield-like", DOCS, QUERIES, QRELS,
                        doc_vectors=vectors, query_vectors=vectors[[3, 1]])
    lines = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    for record in lines:
        if record["_id"] == "t1":
            record["title"] = TITLE
    lines.append({"_id": "e2", "title": ""})
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


@pytest.mark.unit
def test_reading_keeps_empty_documents_and_a_title_alone_is_not_empty(tmp_path):
    data = read_beir(write_folder(tmp_path))
    assert data.empty_documents == ["e1", "e2"]
    title_only = next(d for d in data.documents if d.external_id == "t1")
    assert not title_only.is_empty and title_only.content == TITLE + "\n"  # title, newline, text
    assert [q.relevance for q in data.queries if q.external_id == "q1"] == [{"d1": 1, "e1": 2}]


@pytest.mark.parametrize("line, message", [
    ('{"title": "no id", "text": "x"}', r"corpus\.jsonl:7: missing field '_id'"),
    ('{"_id": "d9", "text": "cut off', r"corpus\.jsonl:7: not valid JSON"),
])
def test_only_a_missing_id_or_broken_json_stops_the_ingest(conn, tmp_path, line, message):
    folder = write_folder(tmp_path)
    with (folder / "corpus.jsonl").open("a") as out:
        out.write(line + "\n")
    name = dataset_name()
    with pytest.raises(DatasetError, match=message):
        ingest_beir(conn, folder, name=name)
    assert conn.execute("SELECT count(*) FROM l2_insights WHERE dataset = %s",
                        (name,)).fetchone()[0] == 0


def test_empty_documents_are_stored_without_embedding_and_reported(conn, tmp_path):
    name = dataset_name()
    report = ingest_beir(conn, write_folder(tmp_path), name=name)
    assert report.empty_documents == ("e1", "e2") and report.documents.inserted == 6
    assert report.empty_documents_note == ("2 documents have no text (e1, e2); kept, findable "
                                           "by id, never retrieved by text")
    rows = {r[0]: r[1:] for r in conn.execute(
        "SELECT external_id, content, embedding IS NULL, tsv = ''::tsvector, id "
        "FROM l2_insights WHERE dataset = %s", (name,))}
    assert rows["e1"][:3] == ("", True, True) and rows["e2"][:3] == ("", True, True)
    assert rows["t1"][:3] == (TITLE + "\n", False, False) and rows["d1"][1] is False
    expected = conn.execute("SELECT expected_docs, relevance_grades FROM ground_truth "
                            "WHERE dataset = %s AND external_id = 'q1'", (name,)).fetchone()
    assert expected == ([rows["d1"][3], rows["e1"][3]], [1, 2])  # ground truth keeps e1
    again = ingest_beir(conn, write_folder(tmp_path), name=name)
    assert not again.changed and again.documents.unchanged == 6


@pytest.mark.parametrize("index_scans", ["on", "off"])
def test_search_never_returns_an_empty_document_and_scores_stay_finite(conn, tmp_path,
                                                                       index_scans):
    name = dataset_name()
    ingest_beir(conn, write_folder(tmp_path), name=name)
    # with index scans off the planner sorts every row by distance: NULL distances come
    # last, and without the filter an empty document would become a candidate
    conn.execute("SELECT set_config('enable_indexscan', %s, false)", (index_scans,))
    query_vector = conn.execute("SELECT query_embedding FROM ground_truth WHERE dataset = %s "
                                "AND external_id = 'q1'", (name,)).fetchone()[0]
    hits = hybrid_search(conn, name, query_text="aspirin heart attack",
                         query_embedding=query_vector, k=10, candidate_depth=50)
    assert {h.external_id for h in hits} == {"d1", "d2", "d3", "t1"}
    assert all(math.isfinite(v) for h in hits for v in (h.score, h.semantic, h.keyword))
    by_title = hybrid_search(conn, name, query_text="salt and blood pressure",
                             query_embedding=None, semantic_weight=0.0, k=1)
    assert [h.external_id for h in by_title] == ["t1"]  # a title alone is searchable text
    for candidates in candidate_scores(conn, name, candidate_depth=50):
        assert len(candidates.doc_ids) == 4
        assert np.isfinite(candidates.semantic).all() and np.isfinite(candidates.keyword).all()
    report = retrieval_report(conn, name, semantic_weight=0.7, keyword_weight=0.3,
                              candidate_depth=50)
    assert report.documents == 6 and report.queries == 2
    assert all(math.isfinite(v) and 0 <= v <= 1 for v in report.metrics.values())
    # q1: d1 (grade 1) is found, e1 (grade 2) never is: recall 1/2; q2: recall 1
    assert report.metrics["recall_at_5"] == pytest.approx(0.75)
    conn.execute("RESET enable_indexscan")


def test_a_document_whose_text_is_removed_loses_its_embedding(conn, tmp_path):
    name = dataset_name()
    folder = write_folder(tmp_path)
    ingest_beir(conn, folder, name=name)
    corpus = (folder / "corpus.jsonl").read_text().replace(
        '"text": "Exercise improves heart health and mood"', '"text": "  "')
    (folder / "corpus.jsonl").write_text(corpus)
    report = ingest_beir(conn, folder, name=name)
    assert report.documents.updated == 1 and report.empty_documents == ("d3", "e1", "e2")
    assert conn.execute("SELECT content, embedding IS NULL FROM l2_insights WHERE dataset = %s "
                        "AND external_id = 'd3'", (name,)).fetchone() == ("", True)


def test_an_all_zero_row_for_a_document_with_text_is_refused(conn, tmp_path):
    folder = write_folder(tmp_path)
    stored = load_precomputed(folder / "embeddings.npz")
    docs = stored.docs.copy()
    docs[stored.doc_ids.index("d2")] = 0.0
    save_precomputed(folder / "embeddings.npz", replace(stored, docs=docs))
    name = dataset_name()
    with pytest.raises(DatasetError, match="embedding of document 'd2' is all zeros"):
        ingest_beir(conn, folder, name=name)
    assert conn.execute("SELECT count(*) FROM datasets WHERE name = %s",
                        (name,)).fetchone()[0] == 0


class RecordingEmbedder:
    """Embeds by text length; records every text it is given."""

    model = "test-length-4"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return np.array([[len(t), 1.0, 2.0, 3.0] for t in texts], dtype=np.float32)


def test_computed_embeddings_never_embed_an_empty_document(conn, tmp_path):
    folder = write_folder(tmp_path)
    (folder / "embeddings.npz").unlink()
    embedder = RecordingEmbedder()
    name = dataset_name()
    report = ingest_beir(conn, folder, name=name, embedder_factory=lambda: embedder)
    assert "" not in embedder.texts and len(embedder.texts) == 4 + 2  # 4 documents, 2 queries
    assert report.embeddings == "computed by test-length-4 for 6 texts"
    again = ingest_beir(conn, folder, name=name, embedder_factory=lambda: embedder)
    assert again.embeddings.endswith("for 0 texts, 6 unchanged texts keep their stored vectors")
    assert conn.execute("SELECT count(*) FROM l2_insights WHERE dataset = %s AND embedding IS "
                        "NULL", (name,)).fetchone()[0] == 2


def test_ingest_command_says_how_many_documents_have_no_text(store, tmp_path, monkeypatch,
                                                             capsys):
    folder = write_folder(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text("default_dataset: none\n")
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    code = cli.main(["--config", str(config), "ingest", str(folder), "--name", dataset_name()])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert ("2 documents have no text (e1, e2); kept, findable by id, never retrieved by text"
            in out.splitlines())


def test_local_judges_score_an_empty_expected_document_zero_and_do_not_fail(conn, settings,
                                                                            tmp_path):
    from eval_harness.judges.dual.run import judge_dataset

    name = dataset_name()
    ingest_beir(conn, write_folder(tmp_path), name=name)
    local = replace(settings, openai_api_key=None, anthropic_api_key=None)
    summary = judge_dataset(conn, local, name)
    assert summary.failed == 0 and summary.complete
    docs, score1, score2 = conn.execute(
        "SELECT judged_docs, judge1_score, judge2_score FROM ground_truth g WHERE dataset = %s "
        "AND external_id = 'q1'", (name,)).fetchone()
    empty_id = conn.execute("SELECT id FROM l2_insights WHERE dataset = %s AND external_id = "
                            "'e1'", (name,)).fetchone()[0]
    at = docs.index(empty_id)
    assert (score1[at], score2[at]) == (0.0, 0.0)
