"""Scale of a live dataset: candidate fetch, sweep and statistics over a RAG store in place.

Reads seed-layout stores made by ``benchmarks/make_live_corpus.py`` (``<schema>.l2_insights``
with the RAG system's HNSW and GIN indexes, ``<schema>.ground_truth`` with 300 queries) and,
for each, attaches it as a live dataset (nothing is copied), then measures:

* candidate fetch for every ground-truth query (the bulk statement calibration runs), on one
  connection and on two (one per core of the reference machine), in queries/s;
* the calibration sweep and its statistics on top (seconds, from the calibration result);
* the harness process's peak RSS.

The synthetic ground truth has no query embeddings: each query's vector is the normalised
mean of the vectors of its topic's documents (``metadata->'topic'`` of its first expected
document; the mean of the expected documents alone would make vector search trivially
right) plus noise (seeded), put into the harness's query embedding cache under the model
name ``synthetic-<dim>``, so no embedder runs.

    .venv/bin/python benchmarks/live_scale.py --url postgresql:///postgres?host=... \\
        --schemas rag_5k rag_50k rag
"""

from __future__ import annotations

import argparse
import resource
import threading
import time

import numpy as np

from eval_harness.calibration.run import calibrate_dataset
from eval_harness.settings.datasets import (CorpusMapping, DatasetConfig, GroundTruthMapping,
                                         LiveMapping, Relation)
from eval_harness.retrieval.hybrid import as_vector, candidate_scores
from eval_harness.store import StoreLocation, migrate
from eval_harness.store.live import attach_live_dataset
from eval_harness.store.query_embeddings import cache_query_embeddings


def seed_query_vectors(conn, schema: str, model: str, seed: int) -> int:
    """Cache a vector for each ground-truth query of ``schema`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    rows = conn.execute(f"""
        SELECT g.query, (SELECT avg(d.embedding) FROM {schema}.l2_insights d
                         WHERE d.metadata->'topic' = t.topic)
        FROM {schema}.ground_truth g
        CROSS JOIN LATERAL (SELECT d.metadata->'topic' AS topic FROM {schema}.l2_insights d
                            WHERE d.id = g.expected_docs[1]) t
        ORDER BY g.id""").fetchall()
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


def measure(location: StoreLocation, schema: str, seed: int) -> dict:
    with location.connection() as conn:
        migrate(conn)
        dim = conn.execute(f"SELECT vector_dims(embedding) FROM {schema}.l2_insights "
                           "WHERE embedding IS NOT NULL LIMIT 1").fetchone()[0]
        documents = conn.execute(f"SELECT count(*) FROM {schema}.l2_insights").fetchone()[0]
        model = f"synthetic-{dim}"
        seed_query_vectors(conn, schema, model, seed)
        cfg = DatasetConfig(
            name=f"bench_{schema}", language="english", embedder=f"local:{model}",
            live=LiveMapping(
                CorpusMapping(Relation(schema, "l2_insights"), "id", "content", "embedding",
                              "tsv"),
                GroundTruthMapping(Relation(schema, "ground_truth"), "id", "query",
                                   "expected_docs")))
        started = time.perf_counter()
        report = attach_live_dataset(conn, cfg, embedder_factory=_no_embedder)
        attach = time.perf_counter() - started
        query_ids = [i for (i,) in conn.execute(
            "SELECT id FROM ground_truth WHERE dataset = %s ORDER BY id", (cfg.name,))]
        candidate_scores(conn, cfg.name, query_ids=query_ids[:10])  # warm the caches
        started = time.perf_counter()
        candidate_scores(conn, cfg.name)
        one = time.perf_counter() - started
        result = calibrate_dataset(conn, cfg.name)
    two = fetch_in_parallel(location, cfg.name, query_ids, 2)
    return {"schema": schema, "documents": documents, "queries": report.queries,
            "attach_s": attach, "fetch_1conn_qps": len(query_ids) / one,
            "fetch_2conn_qps": len(query_ids) / two,
            "calibrate_fetch_s": result.seconds["fetch_candidates"],
            "sweep_s": result.seconds["sweep"], "statistics_s": result.seconds["statistics"],
            "p_at_5_best": result.best.p_at_5,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _no_embedder():
    raise RuntimeError("every query vector is cached; no embedder should be needed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server holding the stores")
    parser.add_argument("--schemas", nargs="+", default=["rag_5k", "rag_50k", "rag"])
    parser.add_argument("--harness-schema", default="eval_harness_bench")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    location = StoreLocation(args.url, "benchmark store", schema=args.harness_schema)
    print("| schema | documents | attach s | fetch q/s (1 conn) | fetch q/s (2 conns) | "
          "calibrate fetch s | sweep s | statistics s | best P@5 | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for schema in args.schemas:
        m = measure(location, schema, args.seed)
        print(f"| {m['schema']} | {m['documents']:,} | {m['attach_s']:.2f} | "
              f"{m['fetch_1conn_qps']:.0f} | {m['fetch_2conn_qps']:.0f} | "
              f"{m['calibrate_fetch_s']:.2f} | {m['sweep_s']:.3f} | {m['statistics_s']:.3f} | "
              f"{m['p_at_5_best']:.3f} | {m['peak_rss_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
