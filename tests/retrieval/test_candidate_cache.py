"""The candidate cache: a rerun reads it, each kind of change invalidates what it should,
and what it returns is what a fresh fetch returns."""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.retrieval import candidate_cache, hybrid
from eval_harness.retrieval.hybrid import candidate_scores
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.settings.datasets import Relation
from eval_harness.datasets.live import attach_live_dataset
from live_store import live_config, no_embedder


@pytest.fixture
def fetches(monkeypatch):
    """The query ids of every bulk candidate fetch that reached the corpus."""
    calls: list[list[int] | None] = []
    real = hybrid._fetch_candidate_rows  # the search: keyword index or bulk statement

    def counted(conn, corpus, depth, query_ids):
        calls.append(None if query_ids is None else sorted(query_ids))
        return real(conn, corpus, depth, query_ids)

    monkeypatch.setattr(hybrid, "_fetch_candidate_rows", counted)
    return calls


def query_ids(conn, dataset="live") -> list[int]:
    return [i for (i,) in conn.execute(
        "SELECT id FROM ground_truth WHERE dataset = %s ORDER BY id", (dataset,))]


def fresh_fetch(conn, dataset="live", depth=10):
    """What the search returns with no cache at all."""
    candidate_cache.clear(conn, dataset)
    return candidate_scores(conn, dataset, candidate_depth=depth)


def same(a, b) -> bool:
    return [q.query_id for q in a] == [q.query_id for q in b] and all(
        np.array_equal(x.doc_ids, y.doc_ids) and np.array_equal(x.semantic, y.semantic)
        and np.array_equal(x.keyword, y.keyword) for x, y in zip(a, b))


def test_a_rerun_reads_the_cache_and_returns_what_a_fresh_fetch_does(live, fetches):
    first = candidate_scores(live, "live", candidate_depth=10)
    assert len(fetches) == 1 and len(fetches[0]) == 15
    again = candidate_scores(live, "live", candidate_depth=10)
    some = candidate_scores(live, "live", candidate_depth=10, query_ids=query_ids(live)[3:6])
    assert len(fetches) == 1                       # neither reached the corpus
    assert same(again, first) and same(some, first[3:6])
    assert any(q.keyword.any() for q in first) and all(q.doc_ids.size for q in first)
    deeper = candidate_scores(live, "live", candidate_depth=20)
    assert len(fetches) == 2 and not same(deeper, first)  # another depth: its own entries


def test_a_changed_query_invalidates_its_own_entry_only(live, fetches):
    candidate_scores(live, "live", candidate_depth=10)
    changed = query_ids(live)[4]
    live.execute("UPDATE ground_truth SET query = query || ' vaccine' WHERE id = %s", (changed,))
    after = candidate_scores(live, "live", candidate_depth=10)
    assert fetches[1:] == [[changed]]
    other, donor = query_ids(live)[5], query_ids(live)[0]
    live.execute("UPDATE ground_truth SET query_embedding = (SELECT query_embedding FROM "
                 "ground_truth WHERE id = %s) WHERE id = %s", (donor, other))
    after = candidate_scores(live, "live", candidate_depth=10)
    assert fetches[2:] == [[other]]
    assert same(after, fresh_fetch(live))


@pytest.mark.parametrize("change", [
    "UPDATE rag.l2_insights SET content = content || ' aspirin aspirin' WHERE id = 7",
    "DELETE FROM rag.l2_insights WHERE id = (SELECT min(d.id) FROM rag.l2_insights d WHERE "
    "NOT EXISTS (SELECT 1 FROM rag.ground_truth g WHERE d.id = ANY(g.expected_docs)))",
    "INSERT INTO rag.l2_insights (id, content, embedding) "
    "SELECT 1000, 'aspirin heart dose', embedding FROM rag.l2_insights WHERE id = 2",
    "UPDATE rag.l2_insights SET embedding = (SELECT embedding FROM rag.l2_insights WHERE id = 1)"
    " WHERE id = 9",
])
def test_any_changed_document_invalidates_every_entry(live, fetches, change):
    before = candidate_scores(live, "live", candidate_depth=10)
    live.execute(change)
    attach_live_dataset(live, live_config(), embedder_factory=no_embedder)  # as commands do
    after = candidate_scores(live, "live", candidate_depth=10)
    assert len(fetches) == 2 and len(fetches[1]) == 15
    assert same(after, fresh_fetch(live))
    assert not same(after, before)                 # the change did change some candidates


def test_a_changed_language_or_mapping_invalidates_every_entry(live, fetches):
    candidate_scores(live, "live", candidate_depth=10)
    live.execute("UPDATE datasets SET language = 'simple' WHERE name = 'live'")
    simple = candidate_scores(live, "live", candidate_depth=10)
    assert len(fetches) == 2 and len(fetches[1]) == 15
    assert same(simple, fresh_fetch(live))
    live.execute("UPDATE datasets SET corpus_mapping = corpus_mapping || jsonb_build_object("
                 "'typed', NOT (corpus_mapping->>'typed')::boolean) WHERE name = 'live'")
    candidate_scores(live, "live", candidate_depth=10)
    assert len(fetches[3]) == 15                   # fetches[2]: the fresh fetch above


def test_an_ingested_copy_is_cached_and_a_reingest_invalidates_it(fresh, beir_folder, fetches):
    with fresh.connection(autocommit=True) as conn:
        ingest_beir(conn, beir_folder, name="copy")
        first = candidate_scores(conn, "copy", candidate_depth=10)
        assert same(candidate_scores(conn, "copy", candidate_depth=10), first)
        assert len(fetches) == 1
        conn.execute("UPDATE l2_insights SET content = content || ' aspirin aspirin' "
                     "WHERE dataset = 'copy' AND external_id = 'doc5'")
        after = candidate_scores(conn, "copy", candidate_depth=10)
        assert len(fetches) == 2 and same(after, fresh_fetch(conn, "copy"))


def test_a_view_is_never_cached(live, fetches):
    live.execute("CREATE VIEW rag.docs AS SELECT * FROM rag.l2_insights")
    attach_live_dataset(live, live_config("view", relation=Relation("rag", "docs")),
                        embedder_factory=no_embedder)
    candidate_scores(live, "view", candidate_depth=10)
    candidate_scores(live, "view", candidate_depth=10)
    assert len(fetches) == 2
    assert live.execute("SELECT count(*) FROM candidate_cache WHERE dataset = 'view'"
                        ).fetchone()[0] == 0


def test_a_second_connection_never_waits_for_an_uncommitted_writer(fresh, beir_folder, fetches):
    """Two connections of one process: the first has written entries and not committed; the
    second fetches the same queries and must neither wait nor cache (it used to block)."""
    with fresh.connection(autocommit=True) as setup:
        build_rag_store(setup, beir_folder, schema="rag")
        attach_live_dataset(setup, live_config(), embedder_factory=no_embedder)
    with fresh.connection() as first, fresh.connection() as second:
        second.execute("SET lock_timeout = '5s'")
        one = candidate_scores(first, "live", candidate_depth=10)      # not committed
        two = candidate_scores(second, "live", candidate_depth=10)
        assert same(one, two) and len(fetches) == 2
        second.commit()
        first.commit()
        assert same(candidate_scores(second, "live", candidate_depth=10), one)
        assert len(fetches) == 2                                        # the first's entries
