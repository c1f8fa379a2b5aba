"""Documents tied at the semantic cut-off are kept by id, not by row order (issue #32 item 7).

Six documents share one embedding, at ranks 48 to 53 of the query's semantic ranking; the
candidate depth is 50, so three of them are candidates and three are not. The same BEIR
folder is ingested as a copy and laid out as a RAG store (ids 1..n in the file's order, as
the copy numbers its rows); the RAG system then rewrites the tied rows, highest id first, so
they lie in the relation in the reverse of their id order. Whatever the plan (the small
relation's exact scan and sort, the live corpus's once-read vectors, or the HNSW index), the
candidates of the live store and the copy are the same documents, and they are the reference
order computed here: the server's own distances sorted by (distance, id).
"""

from __future__ import annotations

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.retrieval import candidate_cache
from eval_harness.retrieval.hybrid import candidate_scores, hybrid_search
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.live import attach_live_dataset
from eval_harness.store.migrate import migrate
from eval_harness.settings.datasets import (CorpusMapping, DatasetConfig, GroundTruthMapping,
                                            LiveMapping, Relation)
from live_store import live_config, no_embedder
from own_id_store import build_own_id_store
from scratch_databases import scratch_database

DIM = 8
DEPTH = 50
NEAR = 47                            # documents closer than the tied ones: ranks 1..47
TIED_AT = (5, 17, 30, 44, 61, 70)    # file positions of the six identical embeddings
DOCUMENTS = 80


def _unit(angle: float, axis: int) -> np.ndarray:
    vector = np.zeros(DIM)
    vector[0], vector[axis] = np.cos(angle), np.sin(angle)
    return vector


@pytest.fixture(scope="module")
def tied_store(tmp_path_factory, server_url):
    """A database of its own with the folder ingested as ``copy_ties`` and laid out in
    ``rag_ties``, attached as ``live_ties``."""
    angles = iter(np.concatenate([np.linspace(0.05, 0.5, NEAR),           # nearer
                                  np.linspace(0.7, 1.4, DOCUMENTS - NEAR - len(TIED_AT))]))
    vectors = np.array([_unit(0.6, 1) if i in TIED_AT else _unit(next(angles), 1 + i % 7)
                        for i in range(DOCUMENTS)])
    docs = {f"doc{i}": f"aspirin heart dose note {i}" for i in range(DOCUMENTS)}
    # the query's words match no document: the keyword side is empty, the union is the
    # semantic top 50 alone
    queries = {"q0": "zebra quartz", "q1": "violin harbour"}
    qrels = [("q0", "doc1", 1), ("q1", "doc2", 1)]
    folder = write_beir(tmp_path_factory.mktemp("ties") / "beir", docs, queries, qrels,
                        dim=DIM, doc_vectors=vectors,
                        query_vectors=np.array([_unit(0.0, 1), _unit(0.02, 2)]))
    with scratch_database(server_url, "eh_ties") as location:
        with location.connection() as conn:
            migrate(conn)
            _load(conn, folder)
        yield location


def _load(conn, folder) -> None:
    ingest_beir(conn, folder, name="copy_ties")
    build_rag_store(conn, folder, schema="rag_ties")
    with conn.transaction():  # the RAG system rewrites the tied rows, highest id first
        for position in sorted(TIED_AT, reverse=True):
            conn.execute("UPDATE rag_ties.l2_insights SET content = content || ' ' "
                         "WHERE id = %s", (position + 1,))
    attach_live_dataset(conn, live_config("live_ties", schema="rag_ties"),
                        embedder_factory=no_embedder)
    # the same documents with text ids (doc-001 ...), the tied rows last in the relation
    build_own_id_store(conn, "text", schema="own_ties", source="rag_ties")
    attach_live_dataset(conn, DatasetConfig(
        name="own_ties", language="english", embedder="local:test-random",
        live=LiveMapping(CorpusMapping(Relation("own_ties", "docs"), "id", "content",
                                       "embedding", None),
                         GroundTruthMapping(Relation("own_ties", "questions"), "id", "query",
                                            "expected_ids"))), embedder_factory=no_embedder)


def _beir_ids(conn, dataset: str, doc_ids) -> list[str]:
    """The BEIR ids of documents given by the dataset's ids."""
    if dataset == "copy_ties":
        rows = conn.execute("SELECT id, external_id FROM eval_harness.l2_insights "
                            "WHERE dataset = 'copy_ties' AND id = ANY(%s)", (list(doc_ids),))
    else:
        rows = conn.execute("SELECT id, metadata->>'beir_id' FROM rag_ties.l2_insights "
                            "WHERE id = ANY(%s)", (list(doc_ids),))
    names = dict(rows.fetchall())
    return [names[int(i)] for i in doc_ids]


def _reference(conn, dataset: str, query_text: str) -> list[str]:
    """The semantic top 50 by (the server's distance, id), sorted here."""
    if dataset == "copy_ties":
        rows = conn.execute(
            "SELECT d.id, d.embedding::vector(8) <=> g.query_embedding::vector(8) "
            "FROM eval_harness.l2_insights d, eval_harness.ground_truth g "
            "WHERE d.dataset = 'copy_ties' AND g.dataset = 'copy_ties' AND g.query = %s",
            (query_text,)).fetchall()
    else:
        rows = conn.execute(
            "SELECT d.id, d.embedding <=> g.query_embedding::vector(8) "
            "FROM rag_ties.l2_insights d, eval_harness.ground_truth g "
            "WHERE g.dataset = 'live_ties' AND g.query = %s", (query_text,)).fetchall()
    ranked = sorted(rows, key=lambda row: (row[1], row[0]))[:DEPTH]
    return _beir_ids(conn, dataset, [doc_id for doc_id, _ in ranked])


def _candidates(conn, dataset: str) -> dict[int, list[str]]:
    """{query row: its candidates' BEIR ids, sorted}, fetched afresh (no cached entry)."""
    candidate_cache.clear(conn, dataset)
    found = candidate_scores(conn, dataset, candidate_depth=DEPTH)
    return {c.query_id: sorted(_beir_ids(conn, dataset, c.doc_ids)) for c in found}


@pytest.mark.parametrize("plan", ["natural", "index"])
def test_ties_at_the_cut_off_are_kept_by_id_in_the_live_store_and_the_copy(tied_store, plan):
    with tied_store.connection() as conn:
        if plan == "index":  # the vector index orders the scan: HNSW + Incremental Sort
            conn.execute("SET enable_seqscan = off")
        tied = {f"doc{i}" for i in TIED_AT}
        reference = _reference(conn, "copy_ties", "zebra quartz")
        assert set(reference[NEAR:]) < tied and len(reference) == DEPTH  # the cut is in a tie
        assert reference[NEAR:] == ["doc5", "doc17", "doc30"]  # the three smallest ids
        assert _reference(conn, "live_ties", "zebra quartz") == reference
        copy, live = _candidates(conn, "copy_ties"), _candidates(conn, "live_ties")
        assert sorted(copy.values()) == sorted(live.values())
        assert sorted(reference) in copy.values()
        for dataset in ("copy_ties", "live_ties"):  # the search itself: semantic weight 1
            hits = hybrid_search(conn, dataset, query_text="zebra quartz",
                                 query_embedding=_unit(0.0, 1).astype(np.float32),
                                 semantic_weight=1.0, k=DEPTH, candidate_depth=DEPTH)
            assert _beir_ids(conn, dataset, [h.id for h in hits]) == reference
        conn.rollback()


@pytest.mark.parametrize("plan", ["natural", "index"])
def test_ties_at_the_cut_off_in_a_store_with_text_ids_are_kept_by_own_id(tied_store, plan):
    # the candidate subquery ranks the relation itself and breaks ties by its own id (byte
    # order, as attach numbers them): the same three documents as the integer store keeps
    with tied_store.connection() as conn:
        if plan == "index":
            conn.execute("SET enable_seqscan = off")
        order = [r[0] for r in conn.execute("SELECT id FROM own_ties.docs").fetchall()]
        tied_own = [f"doc-{i + 1:03d}" for i in TIED_AT]
        assert order[-len(TIED_AT):] == tied_own[::-1]  # the tied rows lie in reverse order
        candidate_cache.clear(conn, "own_ties")
        (found, *_) = [c for c in candidate_scores(conn, "own_ties", candidate_depth=DEPTH)
                       if len(c.doc_ids)]
        own = dict(conn.execute(
            "SELECT doc_id, own_id FROM eval_harness.document_ids WHERE dataset = 'own_ties' "
            "AND doc_id = ANY(%s)", (list(map(int, found.doc_ids)),)).fetchall())
        kept = sorted(own[int(i)] for i in found.doc_ids)
        assert len(kept) == DEPTH and set(tied_own) & set(kept) == set(tied_own[:3])
        conn.rollback()
