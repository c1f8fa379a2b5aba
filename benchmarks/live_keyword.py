"""The live store with ``tsvector: null`` before and after the keyword index (issue #25).

Lays out the bundled SciFact (5,183 documents, 300 test queries with their precomputed
query vectors) like the seeds in a schema of its own, with no tsvector column (GIN index on
``to_tsvector('english', content)``), maps it as a live dataset with ``tsvector: null`` and
measures, on one connection, warm (one untimed pass first):

* the candidate fetch of every ground-truth query as the bulk statement runs it, parsing
  every matching document again ("before"), and through the keyword index ("after"); the
  two must return the same rows, scores to the last bit;
* the keyword side alone per query: the search's keyword subquery (GIN + ts_rank over
  ``to_tsvector``) against the numpy ranking from the index (postings read included);
* attach: the first build of the index, an attach with nothing changed, and one after 1% of
  the rows changed; the index's size on disk; the process's peak RSS.

    .venv/bin/python benchmarks/live_keyword.py [--url URL] [--schema rag_kw] [--copy]
        [--no-before]

Without ``--url`` an embedded PostgreSQL runs in a temporary folder.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from eval_harness.retrieval import sql as search_sql
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.retrieval.keyword_candidates import indexed_candidate_rows
from eval_harness.retrieval.keyword_cost import _ranking, or_tsquery_text
from eval_harness.retrieval.keyword_rank import query_items, rank_query
from eval_harness.settings.datasets import (CorpusMapping, DatasetConfig, GroundTruthMapping,
                                            LiveMapping, Relation)
from eval_harness.datasets import keyword_index
from eval_harness.store import StoreLocation, migrate
from eval_harness.store.connection import start_embedded
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.live import attach_live_dataset

ROOT = Path(__file__).resolve().parents[1]
DEPTH = 50


def _no_embedder():
    raise RuntimeError("every query vector is cached; no embedder should be needed")


def _config(schema: str) -> DatasetConfig:
    return DatasetConfig(
        name=f"kw_{schema}", language="english", embedder="local:all-MiniLM-L6-v2",
        live=LiveMapping(
            CorpusMapping(Relation(schema, "l2_insights"), "id", "content", "embedding", None),
            GroundTruthMapping(Relation(schema, "ground_truth"), "id", "query", "expected_docs")))


def _attach(conn, cfg):
    return _timed(lambda: attach_live_dataset(conn, cfg, embedder_factory=_no_embedder))


def _timed(call):
    started = time.perf_counter()
    value = call()
    return value, time.perf_counter() - started


def measure(location: StoreLocation, schema: str, *, before: bool, copy: bool) -> None:
    cfg = _config(schema)
    with location.connection() as conn:
        migrate(conn)
        build_rag_store(conn, ROOT / "datasets" / "scifact", schema=schema, tsvector=None)
        conn.commit()
        first, seconds = _attach(conn, cfg)
        print(f"attach, first build: {seconds:.1f} s; {first.keyword}", flush=True)
        again, seconds = _attach(conn, cfg)
        print(f"attach, nothing changed: {seconds:.2f} s; {again.keyword}", flush=True)
        conn.execute(f"UPDATE {schema}.l2_insights SET content = content || ' revised' "
                     f"WHERE id % 100 = 0")
        conn.commit()
        changed, seconds = _attach(conn, cfg)
        print(f"attach, 1% of rows changed: {seconds:.2f} s; {changed.keyword}", flush=True)
        corpus = dataset_info(conn, cfg.name, with_counts=False).corpus
        source = keyword_index.current_source(conn, corpus)
        size = keyword_index.disk_bytes(conn, source) / 2**20
        print(f"keyword index on disk: {size:.1f} MB", flush=True)
        search_sql.set_hnsw_ef_search(conn, 100)
        n = len(search_sql.query_lexemes(conn, corpus, None))
        indexed_candidate_rows(conn, corpus, DEPTH, query_ids=None)  # warm
        after, after_s = _timed(lambda: indexed_candidate_rows(conn, corpus, DEPTH,
                                                               query_ids=None))
        print(f"candidate fetch, {n} queries, keyword index: {after_s:.2f} s "
              f"({n / after_s:.0f} q/s, {1000 * after_s / n:.1f} ms/query)", flush=True)
        if copy:
            ingest_beir(conn, ROOT / "datasets" / "scifact", name="kw_copy")
            conn.commit()
            copied = dataset_info(conn, "kw_copy", with_counts=False).corpus
            search_sql.candidate_rows(conn, copied, DEPTH, query_ids=None)  # warm
            _, copy_s = _timed(lambda: search_sql.candidate_rows(conn, copied, DEPTH,
                                                                 query_ids=None))
            print(f"candidate fetch, {n} queries, the ingested copy: {copy_s:.2f} s "
                  f"({n / copy_s:.0f} q/s, {1000 * copy_s / n:.1f} ms/query)", flush=True)
        if not before:
            print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
            return
        search_sql.candidate_rows(conn, corpus, DEPTH, query_ids=None)  # warm
        rows, before_s = _timed(lambda: search_sql.candidate_rows(conn, corpus, DEPTH,
                                                                  query_ids=None))
        same = len(after) == len(rows) and all(
            a[0] == b[0] and a[1] == list(b[1] or []) and a[2] == list(b[2] or [])
            and a[3] == list(b[3] or []) for a, b in zip(after, rows))
        print(f"candidate fetch, {n} queries, the search's statement (before): "
              f"{before_s:.2f} s ({n / before_s:.1f} q/s, {1000 * before_s / n:.1f} "
              f"ms/query); identical rows: {same}", flush=True)
        texts = [t for (t,) in conn.execute("SELECT query FROM ground_truth WHERE dataset = %s "
                                            "ORDER BY id", (cfg.name,))]
        statement = _ranking(corpus, DEPTH)
        sql_ms, index_ms = [], []
        documents = keyword_index.indexed_documents(conn, source)
        for text in texts:
            tsquery = or_tsquery_text(conn, "english", text)
            if tsquery is None:
                continue
            _, seconds = _timed(lambda: conn.execute(statement, (tsquery,)).fetchall())
            sql_ms.append(1000 * seconds)
            lexemes = conn.execute("SELECT tsvector_to_array(to_tsvector('english', %s))",
                                   (text,)).fetchone()[0]

            def ranked():
                items = query_items(lexemes)
                return rank_query(documents, items, keyword_index.postings(conn, source, items)
                                  ).top(DEPTH)
            _, seconds = _timed(ranked)
            index_ms.append(1000 * seconds)
        conn.rollback()
        print(f"keyword side alone, median of {len(sql_ms)} queries: search's SQL "
              f"{statistics.median(sql_ms):.1f} ms; keyword index "
              f"{statistics.median(index_ms):.2f} ms")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a server with pgvector (default: embedded)")
    parser.add_argument("--schema", default="rag_kw")
    parser.add_argument("--harness-schema", default="eval_harness_kw")
    parser.add_argument("--no-before", action="store_true",
                        help="skip the slow part: the search's own statement (minutes)")
    parser.add_argument("--copy", action="store_true",
                        help="also ingest SciFact as a copy and time its candidate fetch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.url or start_embedded(Path(folder) / "pgdata")
        measure(StoreLocation(url, "benchmark store", schema=args.harness_schema), args.schema,
                before=not args.no_before, copy=args.copy)


if __name__ == "__main__":
    main()
