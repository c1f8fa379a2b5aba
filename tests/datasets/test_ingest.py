"""Ingest: idempotent, malformed input named by file and line, all or nothing, text-search
languages, datasets side by side."""

from __future__ import annotations

import json
import uuid

import pytest

from beir_factory import write_beir
from eval_harness.datasets.beir import DatasetError
from eval_harness.datasets import ingest as ingest_module
from eval_harness.datasets.ingest import ingest_beir

DOCS = {"d1": "Aspirin reduces the risk of heart attack",
        "d2": "Statins lower cholesterol levels in adults",
        "d3": "Exercise improves heart health and mood",
        "d4": "Vitamin D supplements and bone density"}
QUERIES = {"q1": "aspirin heart attack", "q2": "cholesterol statins", "q3": "no labels"}
QRELS = [("q1", "d1", 1), ("q1", "d3", 2), ("q2", "d2", 1), ("q3", "d4", 0)]


def dataset_name() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def counts(conn, name):
    return conn.execute("""SELECT (SELECT count(*) FROM l2_insights WHERE dataset = %(n)s),
                                  (SELECT count(*) FROM ground_truth WHERE dataset = %(n)s)""",
                        {"n": name}).fetchone()


def test_ingest_twice_changes_nothing(conn, tmp_path):
    name = dataset_name()
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    first = ingest_beir(conn, folder, name=name)
    ids_before = conn.execute("SELECT id, external_id, created_at FROM l2_insights "
                              "WHERE dataset = %s ORDER BY id", (name,)).fetchall()
    second = ingest_beir(conn, folder, name=name)
    ids_after = conn.execute("SELECT id, external_id, created_at FROM l2_insights "
                             "WHERE dataset = %s ORDER BY id", (name,)).fetchall()
    assert (first.documents.inserted, first.queries.inserted) == (4, 2)
    assert first.skipped_queries == 1  # q3 has only a grade-0 label
    assert not second.changed
    assert (second.documents.unchanged, second.queries.unchanged) == (4, 2)
    assert ids_before == ids_after
    assert counts(conn, name) == (4, 2)


def test_ground_truth_maps_external_ids_and_grades(conn, tmp_path):
    name = dataset_name()
    ingest_beir(conn, write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS), name=name)
    row = conn.execute("""
        SELECT array(SELECT d.external_id FROM unnest(g.expected_docs) WITH ORDINALITY e(id, o)
                     JOIN l2_insights d ON d.id = e.id ORDER BY e.o), g.relevance_grades
        FROM ground_truth g WHERE g.dataset = %s AND g.external_id = 'q1'""", (name,)).fetchone()
    assert row == (["d1", "d3"], [1, 2])


def test_reingest_changed_folder_updates_and_removes(conn, tmp_path):
    name = dataset_name()
    ingest_beir(conn, write_beir(tmp_path / "v1", DOCS, QUERIES, QRELS), name=name)
    docs = dict(DOCS, d2="Statins lower LDL cholesterol")  # changed
    del docs["d4"]  # removed
    docs["d5"] = "Sleep and memory consolidation"  # new
    qrels = [("q1", "d1", 1), ("q2", "d2", 1)]
    report = ingest_beir(conn, write_beir(tmp_path / "v2", docs, QUERIES, qrels), name=name)
    # write_beir draws vectors by position with a fixed seed: d1..d3 keep theirs.
    assert report.documents == ingest_module.MergeCounts(inserted=1, updated=1, deleted=1,
                                                         unchanged=2)
    assert report.queries == ingest_module.MergeCounts(inserted=0, updated=1, deleted=0,
                                                       unchanged=1)
    assert counts(conn, name) == (4, 2)
    content = conn.execute("SELECT content FROM l2_insights WHERE dataset = %s AND "
                           "external_id = 'd2'", (name,)).fetchone()[0]
    assert content == "Statins lower LDL cholesterol"


def test_malformed_line_names_file_and_line_and_writes_nothing(conn, tmp_path):
    name = dataset_name()
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    lines = (folder / "corpus.jsonl").read_text().splitlines()
    lines[2] = '{"_id": "d3", "text": "broken'
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:3: not valid JSON"):
        ingest_beir(conn, folder, name=name)
    assert counts(conn, name) == (0, 0)


@pytest.mark.parametrize("qrels_line, message", [
    ("q1\tnope\t1", r"test\.tsv:2: unknown document id 'nope'"),
    ("q9\td1\t1", r"test\.tsv:2: unknown query id 'q9'"),
    ("q1\td1\thigh", r"test\.tsv:2: score 'high' is not an integer"),
    ("q1\td1", r"test\.tsv:2: expected 3 tab-separated fields"),
])
def test_bad_qrels_are_reported_with_line(conn, tmp_path, qrels_line, message):
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels_line + "\n")
    with pytest.raises(DatasetError, match=message):
        ingest_beir(conn, folder, name=dataset_name())


def test_failure_mid_ingest_leaves_store_as_it_was(conn, tmp_path, monkeypatch):
    name = dataset_name()
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    ingest_beir(conn, folder, name=name)
    before = conn.execute("SELECT external_id, content FROM l2_insights WHERE dataset = %s "
                          "ORDER BY 1", (name,)).fetchall()
    changed = write_beir(tmp_path / "v2", dict(DOCS, d1="changed text"), QUERIES, QRELS)

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ingest_module, "_merge_queries", explode)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest_beir(conn, changed, name=name)
    after = conn.execute("SELECT external_id, content FROM l2_insights WHERE dataset = %s "
                         "ORDER BY 1", (name,)).fetchall()
    assert after == before


def test_missing_embedding_for_a_document_is_an_error(conn, tmp_path):
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    with (folder / "corpus.jsonl").open("a") as out:
        out.write(json.dumps({"_id": "d9", "text": "not embedded"}) + "\n")
    with pytest.raises(DatasetError, match="no embedding for document 'd9'"):
        ingest_beir(conn, folder, name=dataset_name())


def test_unknown_language_is_refused(conn, tmp_path):
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    with pytest.raises(DatasetError, match="Unknown text-search language 'klingon'"):
        ingest_beir(conn, folder, name=dataset_name(), language="klingon")


def test_bad_dataset_name_is_refused(conn, tmp_path):
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    with pytest.raises(DatasetError, match="not allowed"):
        ingest_beir(conn, folder, name="bad name; drop table")


def test_german_text_search_stems_german(conn, tmp_path):
    name = dataset_name()
    docs = {"a": "Die Hunde liefen durch die Gärten", "b": "Ein Haus am See"}
    folder = write_beir(tmp_path / "de", docs, {"q": "Hund Garten"}, [("q", "a", 1)])
    ingest_beir(conn, folder, name=name, language="german")
    lexemes = conn.execute("SELECT tsvector_to_array(tsv) FROM l2_insights WHERE dataset = %s "
                           "AND external_id = 'a'", (name,)).fetchone()[0]
    assert "hund" in lexemes and "die" not in lexemes  # stemmed, stop word removed
    matches = conn.execute("SELECT external_id FROM l2_insights WHERE dataset = %s AND "
                           "tsv @@ eh_or_tsquery('german', 'Hund')", (name,)).fetchall()
    assert matches == [("a",)]


def test_simple_language_keeps_every_word(conn, tmp_path):
    name = dataset_name()
    folder = write_beir(tmp_path / "s", {"a": "Die Hunde"}, {"q": "die"}, [("q", "a", 1)])
    ingest_beir(conn, folder, name=name, language="simple")
    lexemes = conn.execute("SELECT tsvector_to_array(tsv) FROM l2_insights WHERE dataset = %s",
                           (name,)).fetchone()[0]
    assert sorted(lexemes) == ["die", "hunde"]


def test_or_tsquery_quotes_awkward_lexemes(conn):
    query = conn.execute("SELECT eh_or_tsquery('simple', %s)::text",
                         ("O'Reilly back\\slash plain",)).fetchone()[0]
    assert query is not None and "'plain'" in query
    assert conn.execute("SELECT eh_or_tsquery('english', 'the and of')").fetchone()[0] is None


def test_datasets_live_side_by_side(conn, tmp_path):
    a, b = dataset_name(), dataset_name()
    ingest_beir(conn, write_beir(tmp_path / "a", DOCS, QUERIES, QRELS), name=a)
    ingest_beir(conn, write_beir(tmp_path / "b", {"x": "other"}, {"q": "other"},
                                 [("q", "x", 1)], dim=4), name=b)
    assert counts(conn, a) == (4, 2)
    assert counts(conn, b) == (1, 1)
    dims = dict(conn.execute("SELECT name, embedding_dim FROM datasets WHERE name IN (%s, %s)",
                             (a, b)).fetchall())
    assert dims == {a: 8, b: 4}


def test_embeddings_file_outside_the_folder(conn, tmp_path):
    folder = write_beir(tmp_path / "ds", DOCS, QUERIES, QRELS)
    elsewhere = tmp_path / "cache" / "vectors.npz"
    elsewhere.parent.mkdir()
    (folder / "embeddings.npz").rename(elsewhere)
    name = dataset_name()
    report = ingest_beir(conn, folder, name=name, embeddings=elsewhere)
    assert report.documents.inserted == 4 and "vectors.npz" in report.embeddings
    with pytest.raises(DatasetError, match="embeddings file not found"):
        ingest_beir(conn, folder, name=name, embeddings=tmp_path / "missing.npz")
