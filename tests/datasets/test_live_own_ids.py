"""Live corpora whose ids are text or uuid (issue #32 item 1): accepted, given the harness's
integer ids once (eval_harness.datasets.document_ids), unknown expected ids named in the
store's own ids, write-back by own id; a column of another type refused in one sentence.
The CLI walk is tests/cli/test_cli_own_ids.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eval_harness.judges.dual.run import judge_dataset
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.settings.datasets import (CorpusMapping, DatasetConfig, GroundTruthMapping,
                                            LiveMapping, Relation)
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live import LiveMappingError, attach_live_dataset, write_back_judge_scores
from eval_harness.datasets.live_mapping import check_mapping
from live_store import no_embedder
from own_id_store import build_own_id_store, own_doc_id, own_query_id, own_store_checksum


def own_config(name: str = "own", schema: str = "own", *, write: bool = False,
               expected: str = "expected_ids") -> DatasetConfig:
    return DatasetConfig(
        name=name, language="english", embedder="local:test-random",
        live=LiveMapping(CorpusMapping(Relation(schema, "docs"), "id", "content", "embedding",
                                       None),
                         GroundTruthMapping(Relation(schema, "questions"), "id", "query",
                                            expected),
                         write_judge_scores=write))


@pytest.fixture(params=["text", "uuid"])
def own_store(request, fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        build_own_id_store(conn, request.param, schema="own")
    return request.param


def harness_ids(conn, dataset: str = "own") -> dict[str, int]:
    return dict(conn.execute("SELECT own_id, doc_id FROM document_ids WHERE dataset = %s",
                             (dataset,)).fetchall())


def test_own_ids_are_given_once_and_kept_across_attaches(fresh, own_store):
    kind = own_store
    with fresh.connection() as conn:
        report = attach_live_dataset(conn, own_config(), embedder_factory=no_embedder)
        assert report.queries == 15 and not report.notices
        first = harness_ids(conn)
        assert set(first) == {own_doc_id(kind, n) for n in range(1, 61)}
        assert sorted(first.values()) == list(range(1, 61))
        # the mirrored ground truth holds the harness's ids of the expected own ids
        expected = dict(conn.execute("SELECT id::text, expected_ids::text[] FROM own.questions"))
        for external_id, docs in conn.execute("SELECT external_id, expected_docs "
                                              "FROM ground_truth WHERE dataset = 'own'"):
            assert docs == [first[e] for e in expected[external_id]]
        assert {own_query_id(kind, n) for n in range(1, 16)} == set(expected)
        with conn.transaction():  # the RAG system adds a document and removes one
            conn.execute("INSERT INTO own.docs SELECT %s, content, embedding FROM own.docs "
                         "LIMIT 1", (own_doc_id(kind, 61),))
            removed = conn.execute("SELECT id::text FROM own.docs d WHERE d.id <> ALL("
                                   "SELECT unnest(expected_ids) FROM own.questions) "
                                   "ORDER BY d.id LIMIT 1").fetchone()[0]
            conn.execute("CREATE TABLE own.removed AS SELECT * FROM own.docs "
                         "WHERE id::text = %s", (removed,))
            conn.execute("DELETE FROM own.docs WHERE id::text = %s", (removed,))
        # before the next attach the added one is not read, the removed one is gone
        assert dataset_info(conn, "own").documents == 59
        again = attach_live_dataset(conn, own_config(), embedder_factory=no_embedder)
        assert (again.inserted, again.updated, again.removed) == (0, 0, 0)
        assert dataset_info(conn, "own").documents == 60  # one added, one removed
        now = harness_ids(conn)
        assert {k: now[k] for k in first} == first and now[own_doc_id(kind, 61)] == 61
        with conn.transaction():  # the removed document comes back: its id is the same
            conn.execute("INSERT INTO own.docs SELECT * FROM own.removed")
        attach_live_dataset(conn, own_config(), embedder_factory=no_embedder)
        assert harness_ids(conn) == now and dataset_info(conn, "own").documents == 61
        documents = conn.execute("SELECT count(*) FROM ground_truth WHERE dataset = 'own'")
        assert documents.fetchone()[0] == 15


def test_unknown_expected_ids_are_named_as_the_store_writes_them(fresh, own_store):
    kind = own_store
    unknown = "doc-999" if kind == "text" else "00000000-0000-4000-8000-000000000999"
    with fresh.connection() as conn:
        with conn.transaction():
            conn.execute("UPDATE own.questions SET expected_ids = expected_ids || %s "
                         "WHERE id = %s", ([unknown], own_query_id(kind, 3)))
        before = own_store_checksum(conn, "own")
        with pytest.raises(LiveMappingError) as caught:
            attach_live_dataset(conn, own_config(), embedder_factory=no_embedder)
        message = str(caught.value)
        assert message == (
            f"'datasets.own.live.ground_truth.expected_docs': 1 ids are not documents of "
            f"own.docs (e.g. {unknown}, expected by queries {own_query_id(kind, 3)}); fix the "
            "ground truth or the corpus mapping.")
        assert conn.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM document_ids").fetchone()[0] == 0
        assert own_store_checksum(conn, "own") == before


def test_judge_scores_are_written_back_by_own_id(fresh, settings, own_store):
    cfg = own_config(write=True)
    with fresh.connection() as conn:
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        run_settings = replace(settings, database_url=fresh.url, datasets={cfg.name: cfg},
                               default_dataset=cfg.name, openai_api_key=None,
                               anthropic_api_key=None)
        written = judge_dataset(conn, run_settings, "own").write_back  # the run writes back
        assert written == ("judge scores written back to own.questions (judge1_score, "
                           "judge2_score, judge1_model, judge2_model, kappa): 15 rows changed")
        mirrored = dict(conn.execute("SELECT external_id, judge1_score FROM ground_truth "
                                     "WHERE dataset = 'own'"))
        live = dict(conn.execute("SELECT id::text, judge1_score FROM own.questions"))
        assert live == mirrored and all(v is not None for v in live.values())
        assert write_back_judge_scores(conn, cfg).rows == 0  # already holds them


@pytest.mark.parametrize("column_type", ["jsonb", "float8", "timestamptz"])
def test_an_id_column_of_another_type_is_refused_in_one_sentence(fresh, beir_folder,
                                                                 column_type):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        build_own_id_store(conn, "text", schema="own")
        with conn.transaction():
            conn.execute(f"CREATE TABLE own.other (id {column_type}, content text, "
                         "embedding vector(8))")
        cfg = own_config()
        cfg = replace(cfg, live=replace(cfg.live, corpus=replace(
            cfg.live.corpus, relation=Relation("own", "other"))))
        with pytest.raises(LiveMappingError) as caught:
            check_mapping(conn, cfg)
    shown = {"float8": "double precision", "timestamptz": "timestamp with time zone"}
    message = str(caught.value)
    assert message.startswith(f"'datasets.own.live.corpus.id': column own.other.id is "
                              f"{shown.get(column_type, column_type)}; it must be smallint or "
                              "integer or bigint or text or character varying or character "
                              "or uuid.")
    assert "\n" not in message and message.count(".") >= 1


def test_text_ids_need_expected_ids_the_corpus_can_hold(fresh, own_store):
    """A text or uuid corpus takes its expected ids as text (any id array); an integer corpus
    still needs integer arrays, and another type is refused in one sentence."""
    with fresh.connection() as conn:
        check_mapping(conn, own_config())  # the old refusal is gone: text and uuid ids pass
        with conn.transaction():
            conn.execute("ALTER TABLE own.questions ADD COLUMN wrong jsonb")
        with pytest.raises(LiveMappingError, match=(
                r"^'datasets.own.live.ground_truth.expected_docs': column own.questions.wrong "
                r"is jsonb; it must be .* or uuid\[\] \(the ids of own.docs.id\)\.$")):
            check_mapping(conn, own_config(expected="wrong"))
