"""Ingest SciFact into a fresh embedded store and measure hybrid-search throughput.

    .venv/bin/python benchmarks/ingest.py [--dataset datasets/scifact] [--rounds 3]

Prints: ingest wall time (first load and an unchanged re-ingest), single-query hybrid search
throughput over all ground-truth queries (one connection, sequential, as a RAG service would
call it), and the bulk candidate fetch used by calibration. Record results in RESULTS.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_harness.retrieval.hybrid import candidate_scores, hybrid_search  # noqa: E402
from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402
from eval_harness.datasets.ingest import ingest_beir  # noqa: E402


def concurrent_throughput(store: StoreLocation, queries, depth: int, workers: int) -> float:
    """Queries/s with ``workers`` connections each searching every query once."""
    barrier = threading.Barrier(workers + 1)

    def work():
        with store.connection() as conn:
            for text, emb in queries[:20]:
                hybrid_search(conn, "bench", query_text=text, query_embedding=emb, k=10,
                              candidate_depth=depth)
            barrier.wait()
            for text, emb in queries:
                hybrid_search(conn, "bench", query_text=text, query_embedding=emb, k=10,
                              candidate_depth=depth)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return workers * len(queries) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="datasets/scifact")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2,
                        help="connections searching concurrently (one per core)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eh-bench-") as tmp:
        store = StoreLocation(start_embedded(Path(tmp) / "pgdata"), "benchmark")
        with store.connection() as conn:
            migrate(conn)
            started = time.perf_counter()
            first = ingest_beir(conn, args.dataset, name="bench")
            ingest_s = time.perf_counter() - started
            started = time.perf_counter()
            again = ingest_beir(conn, args.dataset, name="bench")
            reingest_s = time.perf_counter() - started
            queries = conn.execute("SELECT query, query_embedding FROM ground_truth "
                                   "WHERE dataset = 'bench' ORDER BY id").fetchall()
            for text, emb in queries[:20]:  # warm caches and the prepared statement
                hybrid_search(conn, "bench", query_text=text, query_embedding=emb, k=10,
                              candidate_depth=args.depth)
            rates = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                for text, emb in queries:
                    hybrid_search(conn, "bench", query_text=text, query_embedding=emb, k=10,
                                  candidate_depth=args.depth)
                rates.append(len(queries) / (time.perf_counter() - started))
            started = time.perf_counter()
            candidate_scores(conn, "bench", candidate_depth=args.depth)
            bulk_s = time.perf_counter() - started
        concurrent_rate = concurrent_throughput(store, queries, args.depth, args.workers)
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"python {platform.python_version()}")
    print(f"ingest {args.dataset}: {first.documents.inserted} docs, "
          f"{first.queries.inserted} queries in {ingest_s:.2f} s (target < 10 s)")
    print(f"re-ingest unchanged: {reingest_s:.2f} s, changed={again.changed}")
    print(f"hybrid search, {len(queries)} queries x {args.rounds} rounds, depth {args.depth}: "
          f"median {statistics.median(rates):.0f} queries/s (min {min(rates):.0f}, "
          f"max {max(rates):.0f}; target >= 100)")
    print(f"hybrid search with {args.workers} concurrent connections: "
          f"{concurrent_rate:.0f} queries/s")
    print(f"bulk candidates for {len(queries)} queries: {bulk_s:.2f} s "
          f"({len(queries) / bulk_s:.0f} queries/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
