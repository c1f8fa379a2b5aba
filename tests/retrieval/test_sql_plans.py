"""The hybrid search's plan stays linear on every supported PostgreSQL (issue #13).

On PostgreSQL 15 one hybrid search took 54 s against 0.02 s on 18: the earlier
``d.id IN (<vector candidates> UNION <keyword candidates>)`` filter references the query row,
and before PostgreSQL 17 such a correlated IN is planned as a SubPlan run once per document
of the corpus, each run an HNSW scan. The statements now join the candidate ids to the
corpus. These tests EXPLAIN the statements exactly as the harness composes them
(:func:`~eval_harness.retrieval.sql.search_statement`,
:func:`~eval_harness.retrieval.sql.candidate_statement`), for an ingested copy and for a
seed-layout live relation, and look at the plan's shape:

* no SubPlan whose subtree scans the corpus (the quadratic shape);
* every scan of the corpus rows joined to the candidates (alias ``d``) is either an index
  probe on its id on the inner side of a nested loop (one per candidate), or one pass under
  a hash (or merge) join with the candidate set; never all rows per candidate;
* the vector side is an Index Scan on the HNSW index ordered by distance (from PostgreSQL
  17 on under an Incremental Sort that orders its equal distances by id: ties at the
  cut-off are broken by id, issue #32; before 17 the index alone orders them, as a second
  sort key would cost the index), and the keyword side reaches the GIN index: with
  ``enable_seqscan = off``
  (the test corpus is small, the point is that the indexes are *usable* by these
  statements).

They run on the test server (PostgreSQL 18) and, when ``EVAL_HARNESS_PG15_URL`` names a
PostgreSQL 15 server with pgvector, there too (the version where the old form goes wrong).
The old IN form is planned the same way as a control: on a server before 17 the checks
must find its SubPlan, so they are able to fail.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest
from psycopg import sql

from beir_factory import write_beir
import second_server
from scratch_databases import scratch_database
from eval_harness.retrieval import sql as search_sql
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.datasets.corpus import INCREMENTAL_KNN_SORT, candidate_ids
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.live import attach_live_dataset
from eval_harness.store.migrate import migrate
from live_store import WORDS, live_config, no_embedder
from own_id_store import build_own_id_store

DOCUMENTS = 3000
QUERIES = 20
DIM = 8
DEPTH = 50


@pytest.fixture(scope="module")
def corpus_folder(tmp_path_factory):
    # A vocabulary wide enough that a query's terms match a few percent of the documents,
    # as in a real corpus (30 words alone would match most of them).
    rng = np.random.default_rng(11)
    vocabulary = list(WORDS) + [f"term{i:04d}" for i in range(1000)]
    docs = {f"doc{i}": " ".join(rng.choice(vocabulary, size=14)) for i in range(DOCUMENTS)}
    queries_ = {f"q{i}": " ".join(rng.choice(vocabulary, size=3)) for i in range(QUERIES)}
    qrels = [(f"q{i}", f"doc{j}", 1) for i in range(QUERIES)
             for j in rng.choice(DOCUMENTS, size=3, replace=False)]
    return write_beir(tmp_path_factory.mktemp("plan") / "beir", docs, queries_, qrels,
                      dim=DIM, seed=5)


@pytest.fixture(scope="module", params=second_server.servers(needs_vector=True))
def planned_store(request, server_url, corpus_folder):
    """A database holding the corpus twice: ingested as ``copy`` and laid out in ``rag``
    like the seeds, attached as ``live``; yields (location, server_version_num)."""
    url = second_server.url(request.param, server_url)
    with scratch_database(url, "eh_plan") as location:
        with location.connection() as conn:
            migrate(conn)
            ingest_beir(conn, corpus_folder, name="copy")
            build_rag_store(conn, corpus_folder, schema="rag")
            attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
            # the same documents with uuid ids, read through the harness's integer ids
            build_own_id_store(conn, "uuid", schema="own")
            attach_live_dataset(conn, own_id_config(), embedder_factory=no_embedder)
            version = int(conn.execute("SHOW server_version_num").fetchone()[0])
        with location.connection(autocommit=True) as conn:
            # what autovacuum does soon after an ingest: the GIN index's pending list (rows
            # inserted after the index was built) is merged, so its cost is the steady one
            conn.execute("VACUUM ANALYZE eval_harness.l2_insights")
        yield location, version


def own_id_config():
    """The uuid-id store of tests/support/own_id_store.py as live dataset ``own``."""
    from dataclasses import replace
    from eval_harness.settings.datasets import GroundTruthMapping, Relation
    cfg = live_config("own", "own")
    return replace(cfg, live=replace(
        cfg.live, corpus=replace(cfg.live.corpus, relation=Relation("own", "docs")),
        ground_truth=GroundTruthMapping(Relation("own", "questions"), "id", "query",
                                        "expected_ids")))


# ------------------------------------------------------------------------------ plan reading

def explain(conn: psycopg.Connection, statement: sql.Composable, params: dict, *,
            steer: bool) -> dict:
    """The JSON plan of ``statement`` with ``params``; ``steer``: with sequential scans
    disabled for this transaction only (the test corpus is small; a production one makes
    the planner prefer the indexes by itself)."""
    with conn.transaction(force_rollback=True):
        if steer:
            conn.execute("SET LOCAL enable_seqscan = off")
        rows = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + statement, params).fetchone()
    plan = rows[0]
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def nodes(plan: dict, parents: tuple = ()):
    """Every node of ``plan`` with the chain of its ancestors (outermost first)."""
    yield plan, parents
    for child in plan.get("Plans", ()):
        yield from nodes(child, parents + (plan,))


def scans_of(plan: dict, relation: str, alias: str):
    """The scans of ``relation`` under ``alias`` (the planner renames a repeated alias d to
    d_1, d_2, ...)."""
    return [(node, parents) for node, parents in nodes(plan)
            if node.get("Relation Name") == relation
            and (node.get("Alias") == alias or node.get("Alias", "").startswith(alias + "_"))]


def correlated_corpus_subplans(plan: dict, relation: str) -> list[str]:
    """The SubPlans (not InitPlans: those run once) whose subtree scans ``relation``."""
    return [node.get("Subplan Name", "?") for node, _ in nodes(plan)
            if node.get("Parent Relationship") == "SubPlan"
            and any(n.get("Relation Name") == relation for n, _ in nodes(node))]


def join_problem(node: dict, parents: tuple) -> str | None:
    """Why this scan of the corpus rows joined to the candidates is not linear, or None.

    Under its nearest join: a hash or merge join reads it once per execution; a nested
    loop must have it on the inner side as an index probe on id (one per candidate), never
    a scan of all rows per candidate (or per document, driving from the outside)."""
    path = parents + (node,)
    for depth in range(len(parents) - 1, -1, -1):
        join = parents[depth]
        if join["Node Type"] in ("Hash Join", "Merge Join"):
            return None
        if join["Node Type"] == "Nested Loop":
            side = path[depth + 1].get("Parent Relationship")
            probe = (node["Node Type"] in ("Index Scan", "Index Only Scan")
                     and node.get("Index Cond", "").startswith("(id = "))
            if side == "Inner" and probe:
                return None
            return (f"{node['Node Type']} of {node['Alias']} on the {side} side of a nested "
                    f"loop (index condition: {node.get('Index Cond')})")
    return f"{node['Node Type']} of {node['Alias']} joined without a join node"


def index_names(conn: psycopg.Connection, schema: str, table: str, method: str) -> set[str]:
    return {name for (name,) in conn.execute(
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "JOIN pg_am a ON a.oid = i.relam WHERE x.indrelid = to_regclass(%s) AND a.amname = %s",
        (f"{schema}.{table}", method))}


def describe(plan: dict) -> str:
    """The plan as an indented outline, for failure messages."""
    lines = []
    for node, parents in nodes(plan):
        target = " ".join(filter(None, (node.get("Relation Name"), node.get("Alias"),
                                        node.get("Index Name"))))
        detail = node.get("Index Cond") or node.get("Order By") or node.get("Filter") or ""
        lines.append(f"{'  ' * len(parents)}{node['Node Type']} {target} "
                     f"[{node.get('Parent Relationship', '')}] {detail}")
    return "\n".join(lines)


def assert_linear(plan: dict, relation: str) -> None:
    """No SubPlan over the corpus, and every corpus row is reached per candidate (see
    :func:`join_problem`)."""
    outline = describe(plan)
    assert correlated_corpus_subplans(plan, relation) == [], outline
    joined = scans_of(plan, relation, "d")
    assert joined, outline
    problems = [join_problem(node, parents) for node, parents in joined]
    assert [p for p in problems if p] == [], outline


def assert_indexes_used(plan: dict, relation: str, *, hnsw: set[str], gin: set[str],
                        semantic: bool = True) -> None:
    """The vector candidates come from an HNSW Index Scan ordered by distance; the keyword
    candidates from a Bitmap Index Scan of the GIN index."""
    outline = describe(plan)
    vector = scans_of(plan, relation, "s")
    if semantic:
        assert vector, outline
        for node, parents in vector:
            assert node["Node Type"] == "Index Scan" and node.get("Index Name") in hnsw \
                and "<=>" in node.get("Order By", ""), outline
            assert_ties_sorted_by_id(node, parents, outline)
    else:
        assert vector == [], outline
    keyword = scans_of(plan, relation, "k")
    assert keyword, outline
    for node, _ in keyword:
        assert node["Node Type"] == "Bitmap Heap Scan", outline
        assert {n.get("Index Name") for n, _ in nodes(node)} & gin, outline


def assert_ties_sorted_by_id(scan: dict, parents: tuple, outline: str) -> None:
    """The HNSW scan's parent is an Incremental Sort presorted by the distance and sorted
    by distance, then id: the index still orders, equal distances go by id. Before
    PostgreSQL 17 the planner cannot keep the index scan under a second sort key, so there
    the search leaves ties to the index (eval_harness.datasets.corpus.on_this_server): the
    scan's parent is the LIMIT itself."""
    sort = parents[-1]
    if SERVER_VERSION[0] < INCREMENTAL_KNN_SORT:
        assert sort["Node Type"] == "Limit", outline
        return
    assert sort["Node Type"] == "Incremental Sort", outline
    keys = sort.get("Sort Key", [])
    assert len(keys) == 2 and "<=>" in keys[0] and keys[1].endswith(".id"), (keys, outline)
    assert sort.get("Presorted Key") == keys[:1], (sort.get("Presorted Key"), outline)


SERVER_VERSION = [0]  # of the server the plans are explained on (plans_of sets it)


def plans_of(location, dataset: str, build):
    """(natural plan, steered plan, corpus relation name, HNSW indexes, GIN indexes)."""
    with location.connection() as conn:
        SERVER_VERSION[0] = conn.info.server_version
        corpus = dataset_info(conn, dataset, with_counts=False).corpus
        schema, table = (corpus.relation if corpus.is_live
                         else ("eval_harness", corpus.relation[0]))
        statement, params = build(corpus)
        return (explain(conn, statement, params, steer=False),
                explain(conn, statement, params, steer=True), table,
                index_names(conn, schema, table, "hnsw"),
                index_names(conn, schema, table, "gin"))


def search(semantic: bool):
    def build(corpus):
        params = search_sql.search_params(
            query_text="aspirin heart dose",
            query_embedding=np.ones(DIM, np.float32) if semantic else None,
            semantic_weight=0.7 if semantic else 0.0, keyword_weight=0.3, k=5)
        return search_sql.search_statement(corpus, DEPTH, semantic=semantic), params
    return build


# ------------------------------------------------------------------------------ the tests

@pytest.mark.parametrize("dataset", ["copy", "live", "own"])
@pytest.mark.parametrize("semantic", [True, False], ids=["hybrid", "keyword-only"])
def test_hybrid_search_plan_is_linear(planned_store, dataset, semantic):
    natural, steered, table, hnsw, gin = plans_of(planned_store[0], dataset, search(semantic))
    assert_linear(natural, table)
    assert_linear(steered, table)
    assert_indexes_used(steered, table, hnsw=hnsw, gin=gin, semantic=semantic)


@pytest.mark.parametrize("dataset", ["copy", "live", "own"])
def test_bulk_candidate_plan_is_linear(planned_store, dataset):
    natural, steered, table, hnsw, gin = plans_of(
        planned_store[0], dataset,
        lambda corpus: (search_sql.candidate_statement(corpus, DEPTH), {"ids": None}))
    assert_linear(natural, table)
    assert_linear(steered, table)
    assert_indexes_used(steered, table, hnsw=hnsw, gin=gin)


def in_form_statement(corpus) -> sql.Composed:
    """The candidate filter as it was before issue #13: ``d.id IN (...)``."""
    return sql.SQL("""
        WITH q AS MATERIALIZED (SELECT %(emb)s::vector({dim}) AS emb,
                                       eh_or_tsquery({lang}::regconfig, %(text)s) AS tsq)
        SELECT {did}, 1 - ({demb} <=> q.emb)
        FROM {d}, q
        WHERE {rows} AND {did} IN ({candidates})""").format(
        dim=sql.Literal(corpus.dim), lang=sql.Literal(corpus.language),
        did=corpus.id_of("d"), demb=corpus.embedding_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d"),
        candidates=candidate_ids(corpus, DEPTH, semantic=True))


def test_the_old_in_form_is_caught_before_postgresql_17(planned_store):
    location, version = planned_store
    if version >= 170000:
        pytest.skip(f"server {version}: PostgreSQL 17 and later turn a correlated IN into a "
                    "join themselves, so the old form is linear there too")
    with location.connection() as conn:
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        plan = explain(conn, in_form_statement(corpus),
                       {"emb": np.ones(DIM, np.float32), "text": "aspirin heart dose"},
                       steer=False)
        assert correlated_corpus_subplans(plan, "l2_insights"), describe(plan)
        with pytest.raises(AssertionError):
            assert_linear(plan, "l2_insights")


def test_union_plan_with_the_keyword_index_is_linear(planned_store):
    """Issue #25: the keyword side given as ids (from the keyword index), the server does the
    semantic top and the union's semantic scores, each corpus row reached by id."""
    location, _ = planned_store
    with location.connection() as conn:
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        qids = [i for (i,) in conn.execute(
            "SELECT id FROM eval_harness.ground_truth WHERE dataset = 'live' ORDER BY id")]
    params = {"qids": qids, "kw": ["{1,2,3,4,5}"] * len(qids)}
    natural, steered, table, hnsw, _ = plans_of(
        location, "live", lambda c: (search_sql.union_statement(c, DEPTH), params))
    assert_linear(natural, table)
    assert_linear(steered, table)
    outline = describe(steered)
    assert scans_of(steered, table, "k") == [], outline  # no keyword ranking on the server
    for node, parents in scans_of(steered, table, "s"):
        assert node["Node Type"] == "Index Scan" and node.get("Index Name") in hnsw, outline
        assert_ties_sorted_by_id(node, parents, outline)
