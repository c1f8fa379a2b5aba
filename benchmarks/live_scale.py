"""Scale of a live dataset: candidate fetch, sweep and statistics over a RAG store in place.

Reads seed-layout stores made by ``benchmarks/make_live_corpus.py`` (``<schema>.l2_insights``
with the RAG system's HNSW and GIN indexes, ``<schema>.ground_truth`` with 300 queries) and,
for each, attaches it as a live dataset (nothing is copied), then measures:

* candidate fetch for every ground-truth query (the bulk statement calibration runs), on one
  connection and on two (one per core of the reference machine), in queries/s;
* the calibration sweep and its statistics on top (seconds, from the calibration result);
* the same fetch again (the candidate cache answers a rerun) and the calibration's fetch cold
  and on a rerun (``--connections`` gives the connection counts, the cache is emptied first);
* where a query's time goes (``--split-queries``, default 60): the semantic top 50 and the
  keyword top 50 (the search's own statement) timed alone, how many documents the
  OR-tsquery matches (medians), and with a keyword index the keyword side as the fetch runs
  it from the index (postings read and ranked in numpy);
* the harness process's peak RSS;
* attach: the first (with a keyword index: its build), again on the unchanged store, and with
  ``--change-percent P`` after P % of the rows got new text (this writes the benchmark store).

The "before" figures of issue #25 ran this script on the code before the keyword index
(``git archive 7249e07 eval_harness | tar -x -C /tmp/before`` and ``PYTHONPATH=/tmp/before``).

A store without a ``tsv`` column (``make_live_corpus.py --tsvector-null``) is mapped with
``tsvector: null``.

The synthetic ground truth has no query embeddings: each query's vector is the normalised
mean of the vectors of its topic's documents (``metadata->'topic'`` of its first expected
document; the mean of the expected documents alone would make vector search trivially
right) plus noise (seeded), put into the harness's query embedding cache under the model
name ``synthetic-<dim>``, so no embedder runs.

    .venv/bin/python benchmarks/live_scale.py --url postgresql:///postgres?host=... \\
        --schemas rag_5k rag_50k rag
    .venv/bin/python benchmarks/live_scale.py --url 'postgresql:///postgres?host=/work/scratch&port=55432&user=postgres' \\
        --schemas rag_null_5k rag_null_50k rag_null_500k --connections 2 3 4
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
import time

import numpy as np
from psycopg import sql

from eval_harness.calibration.run import calibrate_dataset
from eval_harness.settings.datasets import (CorpusMapping, DatasetConfig, GroundTruthMapping,
                                         LiveMapping, Relation)
from eval_harness.retrieval import hybrid
from eval_harness.retrieval.candidate_cache import clear as clear_candidate_cache
from eval_harness.retrieval.hybrid import as_vector, candidate_scores, dataset_info
try:  # the keyword index (issue #25); absent when measuring the code before it
    from eval_harness.retrieval.keyword_rank import query_items, rank_query
    from eval_harness.datasets import keyword_index
except ImportError:
    keyword_index = None
from eval_harness.datasets.corpus import candidate_ids
from eval_harness.store import StoreLocation, migrate
from eval_harness.datasets.live import attach_live_dataset
from eval_harness.datasets.query_embeddings import cache_query_embeddings


NAN = float("nan")


def seed_query_vectors(conn, schema: str, model: str, seed: int) -> int:
    """Cache a vector for each ground-truth query of ``schema`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    topics = [(query, topic) for query, topic in conn.execute(f"""
        SELECT g.query, d.metadata->'topic' FROM {schema}.ground_truth g
        JOIN {schema}.l2_insights d ON d.id = g.expected_docs[1] ORDER BY g.id""")]
    wanted = sorted({topic for _, topic in topics})
    means = dict(conn.execute(f"""
        SELECT d.metadata->'topic', avg(d.embedding) FROM {schema}.l2_insights d
        WHERE (d.metadata->'topic')::int = ANY(%s) GROUP BY 1""", (wanted,)))  # one pass
    rows = [(query, means[topic]) for query, topic in topics]
    vectors = {}
    for query, mean in rows:
        mean = as_vector(mean)
        noisy = mean / np.linalg.norm(mean) + rng.normal(scale=0.03, size=mean.shape)
        vectors[query] = (noisy / np.linalg.norm(noisy)).astype(np.float32)
    cache_query_embeddings(conn, model, vectors)
    conn.commit()
    return len(vectors)


def fetch_in_parallel(location: StoreLocation, dataset: str, query_ids: list[int],
                      workers: int) -> float:
    """Seconds to fetch the candidates of ``query_ids`` split over ``workers`` connections."""
    parts = [query_ids[i::workers] for i in range(workers)]
    errors: list[BaseException] = []

    def work(ids):
        try:
            with location.connection() as conn:
                candidate_scores(conn, dataset, query_ids=ids)
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p,)) for p in parts]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def has_tsv_column(conn, schema: str) -> bool:
    """True for a store with a stored ``tsv`` column, False for the ``--tsvector-null``
    layout (GIN on the expression)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE "
                        "table_schema = %s AND table_name = 'l2_insights' AND "
                        "column_name = 'tsv')", (schema,)).fetchone()[0]


def split_ms(conn, dataset: str, queries: int, depth: int = 50) -> dict:
    """Where a query's time goes, median milliseconds over the first ``queries`` ground-truth
    queries, each part timed alone: the semantic top ``depth`` (HNSW), the keyword top
    ``depth`` (the search's own keyword subquery), and the number of documents the OR-tsquery
    matches."""
    info = dataset_info(conn, dataset, with_counts=False)
    corpus = info.corpus
    rows = conn.execute(
        "SELECT query_embedding::text, query FROM ground_truth WHERE dataset = %s "
        "ORDER BY id LIMIT %s", (dataset, queries)).fetchall()
    semantic = sql.SQL(
        "SELECT count(*) FROM (SELECT {sid} FROM {s} WHERE {emb_col} IS NOT NULL "
        "ORDER BY {emb} <=> %s::vector({dim}), {sid} LIMIT {depth}) x").format(
        sid=corpus.id_of("s"), s=corpus.table("s"), emb_col=corpus.embedding_column("s"),
        emb=corpus.embedding_of("s"), dim=sql.Literal(corpus.dim), depth=sql.Literal(depth))
    keyword = sql.SQL("WITH q AS MATERIALIZED (SELECT eh_or_tsquery({lang}::regconfig, %s) "
                      "AS tsq) SELECT count(*) FROM q CROSS JOIN LATERAL ({c}) c").format(
        lang=sql.Literal(corpus.language), c=candidate_ids(corpus, depth, semantic=False))
    matches = sql.SQL("SELECT count(*) FROM {k} WHERE {tsv} @@ eh_or_tsquery({lang}::regconfig,"
                      " %s)").format(k=corpus.table("k"), tsv=corpus.tsvector_of("k"),
                                     lang=sql.Literal(corpus.language))
    hybrid.sql.set_hnsw_ef_search(conn, max(100, 2 * depth))
    sem, kw, found = [], [], []
    for vector, text in rows:
        for statement, param, out in ((semantic, vector, sem), (keyword, text, kw)):
            started = time.perf_counter()
            conn.execute(statement, (param,)).fetchall()
            out.append(1000 * (time.perf_counter() - started))
        found.append(conn.execute(matches, (text,)).fetchone()[0])
    conn.rollback()
    out = {"semantic_ms": statistics.median(sem), "keyword_ms": statistics.median(kw),
           "matches": statistics.median(found)}
    source = (keyword_index.current_source(conn, corpus)
              if keyword_index is not None and keyword_index.serves(corpus) else None)
    if source is not None:  # the keyword side as the fetch runs it now: from the keyword index
        started = time.perf_counter()
        documents = keyword_index.indexed_documents(conn, source)
        out["index_load_ms"] = 1000 * (time.perf_counter() - started)
        indexed = []
        for qid, lexemes in hybrid.sql.query_lexemes(conn, corpus, None)[:queries]:
            started = time.perf_counter()
            items = query_items(lexemes)
            ranked = rank_query(documents, items, keyword_index.postings(conn, source, items))
            ranked.top(depth)
            indexed.append(1000 * (time.perf_counter() - started))
        out["indexed_keyword_ms"] = statistics.median(indexed)
        conn.rollback()
    return out


def change_rows(conn, schema: str, percent: float) -> int:
    """Give ``percent`` % of the documents (every n-th id, n = 100 / percent) the text of the
    next document: what a RAG system re-ingesting a few documents does. Each run changes
    them again (the text moves one document further)."""
    step = max(1, round(100 / percent))
    return conn.execute(f"""
        UPDATE {schema}.l2_insights t SET content = n.content
        FROM {schema}.l2_insights n WHERE n.id = t.id + 1 AND t.id % {step} = 0""").rowcount


def measure(location: StoreLocation, schema: str, seed: int, connections: list[int],
            split_queries: int, limit: int | None = None, change_percent: float = 0) -> dict:
    with location.connection() as conn:
        migrate(conn)
        dim = conn.execute(f"SELECT vector_dims(embedding) FROM {schema}.l2_insights "
                           "WHERE embedding IS NOT NULL LIMIT 1").fetchone()[0]
        documents = conn.execute(f"SELECT count(*) FROM {schema}.l2_insights").fetchone()[0]
        tsvector = "tsv" if has_tsv_column(conn, schema) else None
        model = f"synthetic-{dim}"
        seed_query_vectors(conn, schema, model, seed)
        cfg = DatasetConfig(
            name=f"bench_{schema}", language="english", embedder=f"local:{model}",
            live=LiveMapping(
                CorpusMapping(Relation(schema, "l2_insights"), "id", "content", "embedding",
                              tsvector),
                GroundTruthMapping(Relation(schema, "ground_truth"), "id", "query",
                                   "expected_docs")))
        started = time.perf_counter()
        report = attach_live_dataset(conn, cfg, embedder_factory=_no_embedder)
        conn.commit()
        attach = time.perf_counter() - started
        if getattr(report, "keyword", None) is not None:  # tsvector: null: the keyword index
            print(f"{schema}: {report.keyword}", flush=True)
        started = time.perf_counter()
        attach_live_dataset(conn, cfg, embedder_factory=_no_embedder)  # nothing changed
        conn.commit()
        attach_again = time.perf_counter() - started
        query_ids = [i for (i,) in conn.execute(
            "SELECT id FROM ground_truth WHERE dataset = %s ORDER BY id", (cfg.name,))]
        query_ids = query_ids[:limit] if limit else query_ids
        candidate_scores(conn, cfg.name, query_ids=query_ids[:10])  # warm the caches
        clear_candidate_cache(conn, cfg.name)
        conn.commit()
        started = time.perf_counter()
        candidate_scores(conn, cfg.name, query_ids=query_ids)
        conn.commit()
        one = time.perf_counter() - started
        started = time.perf_counter()
        candidate_scores(conn, cfg.name, query_ids=query_ids)  # a rerun: the cache answers
        rerun = time.perf_counter() - started
        clear_candidate_cache(conn, cfg.name)
        conn.commit()
        cold = warm = None
        if not limit:  # calibration searches every query
            cold = calibrate_dataset(conn, cfg.name)
            conn.commit()
            warm = calibrate_dataset(conn, cfg.name)
        split = split_ms(conn, cfg.name, split_queries) if split_queries else {}
    refresh = changed = None
    if change_percent:
        with location.connection() as conn:
            changed = change_rows(conn, schema, change_percent)
            conn.commit()
            started = time.perf_counter()
            attach_live_dataset(conn, cfg, embedder_factory=_no_embedder)
            conn.commit()
            refresh = time.perf_counter() - started
    parallel = {}
    for n in connections:
        with location.connection(autocommit=True) as conn:
            clear_candidate_cache(conn, cfg.name)
        parallel[n] = len(query_ids) / fetch_in_parallel(location, cfg.name, query_ids, n)
    return {"schema": schema, "documents": documents, "queries": report.queries,
            "tsvector": tsvector, "attach_s": attach, "attach_again_s": attach_again,
            "refresh_s": refresh, "changed": changed, "fetch_1conn_qps": len(query_ids) / one,
            "rerun_s": rerun, "parallel_qps": parallel,
            "calibrate_fetch_s": cold.seconds["fetch_candidates"] if cold else NAN,
            "calibrate_fetch_rerun_s": warm.seconds["fetch_candidates"] if warm else NAN,
            "sweep_s": cold.seconds["sweep"] if cold else NAN,
            "statistics_s": cold.seconds["statistics"] if cold else NAN,
            "p_at_5_best": cold.best.p_at_5 if cold else NAN, "fetched": len(query_ids), **split,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _no_embedder():
    raise RuntimeError("every query vector is cached; no embedder should be needed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server holding the stores")
    parser.add_argument("--schemas", nargs="+", default=["rag_5k", "rag_50k", "rag"])
    parser.add_argument("--harness-schema", default="eval_harness_bench")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--connections", type=int, nargs="+", default=[2],
                        help="fetch over this many connections too (e.g. 2 3 4)")
    parser.add_argument("--queries", type=int, default=0,
                        help="fetch only the first N ground-truth queries and skip the "
                             "calibration (for a slow store; 0: all)")
    parser.add_argument("--change-percent", type=float, default=0,
                        help="then change this %% of the documents' text (it writes the "
                             "benchmark store) and time the attach that refreshes (0: skip)")
    parser.add_argument("--split-queries", type=int, default=60,
                        help="queries timed part by part (0: skip)")
    args = parser.parse_args()
    location = StoreLocation(args.url, "benchmark store", schema=args.harness_schema)
    conns = " | ".join(f"fetch q/s ({n} conns)" for n in args.connections)
    print(f"| schema | documents | tsvector | attach s | fetch q/s (1 conn) | {conns} | "
          "rerun fetch s | calibrate fetch s (cold / rerun) | sweep s | statistics s | "
          "best P@5 | semantic ms | keyword ms | matches | peak RSS MB |")
    print("|---|---:|---|---:|---:|" + "---:|" * len(args.connections)
          + "---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for schema in args.schemas:
        m = measure(location, schema, args.seed, args.connections, args.split_queries,
                    args.queries, args.change_percent)
        par = " | ".join(f"{m['parallel_qps'][n]:.1f}" for n in args.connections)
        if "indexed_keyword_ms" in m:
            print(f"{m['schema']}: keyword side from the keyword index "
                  f"{m['indexed_keyword_ms']:.1f} ms per query (median; loading the index's "
                  f"documents once per fetch {m['index_load_ms']:.0f} ms)")
        print(f"{m['schema']}: attach {m['attach_s']:.2f} s, again unchanged "
              f"{m['attach_again_s']:.2f} s" + (f", after {m['changed']:,} rows changed "
              f"{m['refresh_s']:.2f} s" if m['refresh_s'] is not None else ""))
        print(f"| {m['schema']} ({m['fetched']} queries) | {m['documents']:,} | {m['tsvector'] or 'null'} | "
              f"{m['attach_s']:.2f} | {m['fetch_1conn_qps']:.1f} | {par} | {m['rerun_s']:.3f} | "
              f"{m['calibrate_fetch_s']:.2f} / {m['calibrate_fetch_rerun_s']:.3f} | "
              f"{m['sweep_s']:.3f} | {m['statistics_s']:.3f} | {m['p_at_5_best']:.3f} | "
              f"{m.get('semantic_ms', float('nan')):.1f} | {m.get('keyword_ms', float('nan')):.1f}"
              f" | {m.get('matches', float('nan')):,.0f} | {m['peak_rss_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
