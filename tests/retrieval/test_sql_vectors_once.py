"""The candidate union of a live corpus with its vectors read once per statement (issue #25):
when the planner would sort the whole relation for each query's semantic top, ``union_rows``
reads the vectors once instead, and must return exactly the rows of the statement run as it
is, ties at the cut included; when a vector index orders the semantic top, it runs the
statement as it is."""

from __future__ import annotations


import pytest

from eval_harness.retrieval import sql as search_sql
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live import attach_live_dataset
from eval_harness.store import migrate
from live_store import live_config, no_embedder
import second_server
from scratch_databases import scratch_database

DEPTH = 10
TIED = 20  # documents given the first query's own vector: the cut at DEPTH falls among them


@pytest.fixture(params=second_server.servers(needs_vector=True))
def tied_store(request, server_url, beir_folder):
    """The small live store, 20 documents sharing the first query's vector, rewritten in
    descending id order (so the heap's order is not the ids' order); on the test server and
    on PostgreSQL 15 when one is given."""
    url = second_server.url(request.param, server_url)
    with scratch_database(url, "eh_once") as location, location.connection() as conn:
        migrate(conn)
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        qid, emb = conn.execute("SELECT id, query_embedding FROM eval_harness.ground_truth "
                                "WHERE dataset = 'live' ORDER BY id LIMIT 1").fetchone()
        ids = [i for (i,) in conn.execute(
            "SELECT id FROM rag.l2_insights ORDER BY id DESC LIMIT %s", (TIED,))]
        for doc_id in ids:
            conn.execute("UPDATE rag.l2_insights SET embedding = %s::vector WHERE id = %s",
                         (emb, doc_id))
        conn.commit()
        yield location, qid, set(ids)


def _params(conn) -> dict:
    qids = [i for (i,) in conn.execute(
        "SELECT id FROM eval_harness.ground_truth WHERE dataset = 'live' ORDER BY id")]
    return {"qids": qids, "kw": ["{1,2,3}"] * len(qids)}


def test_vectors_read_once_give_the_statement_s_own_rows_ties_included(tied_store):
    location, first, tied = tied_store
    with location.connection() as conn:
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        params = _params(conn)
        plain = conn.execute(search_sql.union_statement(corpus, DEPTH), params).fetchall()
        first_ids = set(dict((r[0], r[1]) for r in plain)[first])
        assert len(first_ids & tied) >= DEPTH - 1  # the cut is among the tied documents
        for copy in ("subvector", "array"):
            once = conn.execute(search_sql.union_statement(corpus, DEPTH, vectors_once=copy),
                                params).fetchall()
            assert once == plain, copy
        assert search_sql.semantic_scan_rows(conn, corpus, DEPTH, params) == 60
        work_mem = conn.execute("SHOW work_mem").fetchone()[0]
        kw = [[1, 2, 3]] * len(params["qids"])
        assert search_sql.union_rows(conn, corpus, DEPTH, params["qids"], kw) == plain
        # the caller's transaction goes on with its own settings
        assert conn.execute("SHOW work_mem").fetchone()[0] == work_mem
        assert conn.execute("SHOW synchronize_seqscans").fetchone()[0] == "on"


def test_an_index_ordered_semantic_top_runs_the_statement_as_it_is(tied_store):
    location, _, _ = tied_store
    with location.connection() as conn:
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        params = _params(conn)
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL enable_seqscan = off")  # the planner takes the HNSW index
            assert search_sql.semantic_scan_rows(conn, corpus, DEPTH, params) is None
            plain = conn.execute(search_sql.union_statement(corpus, DEPTH), params).fetchall()
            kw = [[1, 2, 3]] * len(params["qids"])
            assert search_sql.union_rows(conn, corpus, DEPTH, params["qids"], kw) == plain
