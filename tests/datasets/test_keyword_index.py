"""The keyword index of a live dataset with ``tsvector: null`` (issue #25): built at the
first attach, refreshed at every later one with only the changed, added and removed rows,
built again when the language or mapping changes, and read by the candidate fetch with the
very values the search's own SQL gives. The RAG relations are never written."""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.retrieval import sql as search_sql
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.retrieval.keyword_candidates import indexed_candidate_rows
from eval_harness.settings.datasets import DatasetConfig, Relation
from eval_harness.datasets import keyword_index
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live import attach_live_dataset
from live_store import live_config, no_embedder, rag_checksum

DEPTH = 10  # below the 60 documents, so the keyword top is a real cut


def _assert_fetch_is_the_search_s_own(conn, dataset: str = "live") -> None:
    corpus = dataset_info(conn, dataset, with_counts=False).corpus
    indexed = indexed_candidate_rows(conn, corpus, DEPTH, query_ids=None)
    assert indexed is not None, "the keyword index was not used"
    plain = search_sql.candidate_rows(conn, corpus, DEPTH, query_ids=None)
    assert len(indexed) == len(plain) > 0
    for (qid, ids, sem, kw), (pqid, pids, psem, pkw) in zip(indexed, plain):
        assert qid == pqid
        assert ids == list(pids or [])
        assert sem == list(psem or [])
        assert kw == list(pkw or [])  # float4 ts_rank to the last bit


def _attach(conn, **corpus):
    return attach_live_dataset(conn, live_config(**corpus), embedder_factory=no_embedder)


def test_attach_builds_then_refreshes_only_what_changed(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        first = _attach(conn).keyword
        assert first.rebuilt == "first build" and first.documents == 60
        _assert_fetch_is_the_search_s_own(conn)
        before = rag_checksum(conn)
        again = _attach(conn).keyword
        assert (again.added, again.changed, again.removed, again.rebuilt) == (0, 0, 0, None)
        assert "unchanged (60 documents checked" in str(again)
        assert rag_checksum(conn) == before  # refreshing read the RAG relations only
        with conn.transaction():  # the RAG system changes its corpus
            conn.execute("UPDATE rag.l2_insights SET content = 'aspirin aspirin stroke dose' "
                         "WHERE id = 3")
            conn.execute("UPDATE rag.l2_insights SET embedding = NULL WHERE id = 4")
            conn.execute("DELETE FROM rag.l2_insights WHERE id = (SELECT min(d.id) FROM "
                         "rag.l2_insights d WHERE d.id > 6 AND NOT EXISTS (SELECT 1 FROM "
                         "rag.ground_truth g WHERE d.id = ANY(g.expected_docs)))")
            conn.execute("INSERT INTO rag.l2_insights (id, content, embedding) "
                         "SELECT 1000, 'aspirin heart stroke stroke', embedding "
                         "FROM rag.l2_insights WHERE id = 6")
        changed = _attach(conn).keyword
        assert (changed.added, changed.changed, changed.removed) == (1, 2, 1)
        assert "1 added, 2 changed, 1 removed of 60 documents" in str(changed)
        _assert_fetch_is_the_search_s_own(conn)
        segments = conn.execute("SELECT count(DISTINCT segment) FROM "
                                "eval_harness.keyword_postings").fetchone()[0]
        assert segments == 2  # the first build's and the refresh's; nothing rewritten


def test_a_changed_language_or_mapping_builds_again(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        _attach(conn)
        cfg = live_config()
        simple = DatasetConfig(name=cfg.name, language="simple", embedder=cfg.embedder,
                               live=cfg.live)
        report = attach_live_dataset(conn, simple, embedder_factory=no_embedder).keyword
        assert report.rebuilt == "the language changed from english to simple"
        _assert_fetch_is_the_search_s_own(conn)
        # a stored tsvector column: the search reads it, the index is dropped
        conn.execute("ALTER TABLE rag.l2_insights ADD COLUMN tsv tsvector GENERATED ALWAYS "
                     "AS (to_tsvector('english', content)) STORED")
        conn.commit()
        assert _attach(conn, tsvector="tsv").keyword is None
        assert conn.execute("SELECT count(*) FROM eval_harness.keyword_sources").fetchone()[0] == 0


def test_a_view_is_refreshed_by_the_md5_of_its_text(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        conn.execute("CREATE VIEW rag.docs AS SELECT id, content, embedding FROM rag.l2_insights")
        conn.commit()
        view = dict(relation=Relation("rag", "docs"))
        assert _attach(conn, **view).keyword.rebuilt == "first build"
        marker = conn.execute("SELECT marker FROM eval_harness.keyword_sources").fetchone()[0]
        assert marker == "md5"
        conn.execute("UPDATE rag.l2_insights SET metadata = '{\"x\": 1}'")  # text unchanged
        conn.execute("UPDATE rag.l2_insights SET content = content || ' insulin' WHERE id < 3")
        conn.commit()
        report = _attach(conn, **view).keyword
        assert (report.added, report.changed, report.removed) == (0, 2, 0)
        _assert_fetch_is_the_search_s_own(conn)


def test_without_a_current_index_the_fetch_runs_the_search_s_statement(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        _attach(conn)
        conn.execute("DELETE FROM eval_harness.keyword_sources")
        conn.commit()
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        assert indexed_candidate_rows(conn, corpus, DEPTH, query_ids=None) is None


def test_an_interrupted_build_keeps_its_finished_batches(fresh, beir_folder, monkeypatch):
    derive, calls = keyword_index._derive_batch, []

    def stopped_at_the_second_batch(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        derive(*args)

    monkeypatch.setattr(keyword_index, "BATCH_DOCUMENTS", 25)
    monkeypatch.setattr(keyword_index, "_derive_batch", stopped_at_the_second_batch)
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        with pytest.raises(KeyboardInterrupt):
            _attach(conn)
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        assert indexed_candidate_rows(conn, corpus, DEPTH, query_ids=None) is None  # unfinished
        resumed = _attach(conn).keyword
        assert (resumed.rebuilt, resumed.added, resumed.changed) == (None, 35, 0)
        _assert_fetch_is_the_search_s_own(conn)
