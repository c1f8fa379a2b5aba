"""``judge --dry-run`` beside a ``calibrate`` rerun on a ``tsvector: null`` live store (issue #32
item 3): both through the CLI, alternating, and the ratio of their medians.

Every command that ranks takes one candidate path (the batched candidate fetch, the keyword
index attach keeps, the candidate cache); the judges' plan used to search each query again
with ``ts_rank(to_tsvector(...))`` (31 s against calibrate's 1.9 s on 1,400 documents). The
target: the dry run takes at most 1.5x a calibrate rerun.

Two stores, each laid out like the seeds (``l2_insights`` without a tsvector column, GIN index
on ``to_tsvector('english', content)``, HNSW on the embedding; ``ground_truth`` with
expected_docs) and mapped with the README's own-store config (``tsvector: null``):

* ``--nfcorpus PATH``: the first ``--docs`` (1,400) documents of NFCorpus (BEIR layout, read
  from PATH, e.g. /work/shared/datasets/nfcorpus; nothing is copied into the repository) and
  the test queries with a relevant document among them (qrels cut to those documents).
  NFCorpus ships no vectors, so documents and queries get a hashed bag of words (384
  dimensions: each lower-cased word adds +-1 at an md5-chosen dimension, normalised): cheap,
  deterministic, and neighbours share words, as with a real embedder;
* ``--synthetic N``: ``benchmarks/make_live_corpus.py --docs N --tsvector-null`` (300 queries),
  query vectors as ``benchmarks/live_scale.py`` seeds them.

Per store: ``attach``, one untimed ``calibrate`` (the first fetch fills the candidate cache)
and ``judge --dry-run`` (imports warm), then ``--rounds`` times ``calibrate`` then
``judge --dry-run``, each timed around ``eval_harness_pipelines.cli.main`` in this process.

    .venv/bin/python benchmarks/judge_vs_calibrate.py --nfcorpus ../shared/datasets/nfcorpus
    .venv/bin/python benchmarks/judge_vs_calibrate.py --synthetic 50000 --pgdata /work/scratch/pg50k

Without ``--url`` an embedded PostgreSQL runs in ``--pgdata`` (default: a temporary folder;
a folder kept between runs keeps the built store).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
DIM = 384
WORD = re.compile(r"[a-z0-9]+")

CONFIG = """\
default_dataset: bench
datasets:
  bench:
    language: english
    embedder: local:{model}
    live:
      corpus: {{relation: {schema}.l2_insights, id: id, content: content, embedding: embedding,
               tsvector: null}}
      ground_truth: {{relation: {schema}.ground_truth, id: id, query: query,
                     expected_docs: expected_docs}}
"""


def hashed_words(text: str) -> np.ndarray:
    """A hashed bag of words (see the module docstring), normalised; a wordless text: e_0."""
    vector = np.zeros(DIM, dtype=np.float32)
    for word in WORD.findall(text.lower()):
        digest = hashlib.md5(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % DIM] += 1.0 if digest[4] & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    if norm == 0:
        vector[0] = 1.0
        return vector
    return vector / norm


def nfcorpus_folder(source: Path, docs: int, target: Path) -> tuple[int, int]:
    """A BEIR folder in ``target`` of NFCorpus's first ``docs`` documents and the test queries
    with a relevant one among them, with hashed-word vectors; (documents, queries)."""
    from eval_harness.datasets.embeddings import PrecomputedEmbeddings, save_precomputed

    corpus = []
    with (source / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            corpus.append(json.loads(line))
            if len(corpus) == docs:
                break
    kept = {doc["_id"] for doc in corpus}
    qrels: dict[str, list[tuple[str, str]]] = {}
    with (source / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
        next(lines)
        for line in lines:
            query, doc, grade = line.rstrip("\n").split("\t")
            if doc in kept:
                qrels.setdefault(query, []).append((doc, grade))
    queries = [q for q in map(json.loads, (source / "queries.jsonl").open(encoding="utf-8"))
               if q["_id"] in qrels]
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    with (target / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc in corpus:
            out.write(json.dumps({"_id": doc["_id"], "title": doc.get("title", ""),
                                  "text": doc["text"]}) + "\n")
    with (target / "queries.jsonl").open("w", encoding="utf-8") as out:
        for query in queries:
            out.write(json.dumps({"_id": query["_id"], "text": query["text"]}) + "\n")
    with (target / "qrels" / "test.tsv").open("w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query in queries:
            for doc, grade in qrels[query["_id"]]:
                out.write(f"{query['_id']}\t{doc}\t{grade}\n")
    save_precomputed(target / "embeddings.npz", PrecomputedEmbeddings(
        model="hashed-words-384", doc_ids=[d["_id"] for d in corpus],
        docs=np.stack([hashed_words(f"{d.get('title', '')} {d['text']}") for d in corpus]),
        query_ids=[q["_id"] for q in queries],
        queries=np.stack([hashed_words(q["text"]) for q in queries])))
    return len(corpus), len(queries)


def build_nfcorpus(url: str, source: Path, docs: int, schema: str) -> str:
    """The NFCorpus store in ``schema`` (built once); the embedding model's name."""
    from eval_harness.store import StoreLocation, migrate
    from eval_harness.datasets.demo_store import build_rag_store

    location = StoreLocation(url, "benchmark store")
    with location.connection() as conn, tempfile.TemporaryDirectory() as folder:
        migrate(conn)
        made = nfcorpus_folder(source, docs, Path(folder))
        store = build_rag_store(conn, folder, schema=schema)
        conn.commit()
        print(f"NFCorpus subset: {made[0]:,} documents, {made[1]:,} test queries with a "
              f"relevant one among them ({'built' if store.created else 'already there'})")
    return "hashed-words-384"


def build_synthetic(url: str, docs: int, schema: str) -> str:
    """make_live_corpus.py's store of ``docs`` documents in ``schema`` (built once), its query
    vectors cached as live_scale.py does; the embedding model's name."""
    from eval_harness.store import StoreLocation, migrate

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from live_scale import seed_query_vectors

    with psycopg.connect(url) as conn:
        there = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                             (f"{schema}.ground_truth",)).fetchone()[0]
    if not there:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_live_corpus.py"),
                        "--url", url, "--docs", str(docs), "--schema", schema,
                        "--tsvector-null"], check=True)
    location = StoreLocation(url, "benchmark store")
    with location.connection() as conn:
        migrate(conn)
        seed_query_vectors(conn, schema, "synthetic-384", 0)
    print(f"synthetic store {schema}: {docs:,} documents "
          f"({'built' if not there else 'already there'})")
    return "synthetic-384"


def run(argv: list[str]) -> float:
    """Seconds ``eval-harness ARGV`` takes in this process (its output swallowed)."""
    from eval_harness_pipelines import cli

    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli.main(argv)
    seconds = time.perf_counter() - started
    if code not in (0, 1):
        sys.exit(f"eval-harness {' '.join(argv)} exited {code}:\n{out.getvalue()}\n"
                 f"{err.getvalue()}")
    return seconds


def measure(url: str, schema: str, model: str, rounds: int) -> dict:
    project = Path(tempfile.mkdtemp(prefix="judge-vs-calibrate-"))
    (project / "config.yaml").write_text(CONFIG.format(model=model, schema=schema),
                                         encoding="utf-8")
    os.chdir(project)
    os.environ["DATABASE_URL"] = url
    for variable in ("EVAL_HARNESS_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        os.environ.pop(variable, None)
    with psycopg.connect(url) as conn:  # a pristine cache: the first calibrate fetches
        if conn.execute("SELECT to_regclass('eval_harness.candidate_cache') IS NOT NULL"
                        ).fetchone()[0]:
            conn.execute("DELETE FROM eval_harness.candidate_cache WHERE dataset = 'bench'")
    attach = run(["attach", "--dataset", "bench"])
    first = run(["calibrate"])
    warm = run(["judge", "--dry-run"])
    calibrate, dry_run = [], []
    for _ in range(rounds):
        calibrate.append(run(["calibrate"]))
        dry_run.append(run(["judge", "--dry-run"]))
    with psycopg.connect(url) as conn:
        documents, queries, cached = conn.execute(
            f"SELECT (SELECT count(*) FROM {schema}.l2_insights), "
            f"(SELECT count(*) FROM {schema}.ground_truth), (SELECT count(*) FROM "
            "eval_harness.candidate_cache WHERE dataset = 'bench')").fetchone()
    return {"documents": documents, "queries": queries, "attach_s": attach,
            "first_calibrate_s": first, "first_dry_run_s": warm, "calibrate_s": calibrate,
            "dry_run_s": dry_run, "cache_entries": cached,
            "ratio": statistics.median(dry_run) / statistics.median(calibrate)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--nfcorpus", type=Path, help="NFCorpus's BEIR folder (read only)")
    source.add_argument("--synthetic", type=int, metavar="N",
                        help="a make_live_corpus.py store of N documents")
    parser.add_argument("--docs", type=int, default=1400, help="NFCorpus documents kept")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", help="a PostgreSQL with pgvector (default: embedded)")
    parser.add_argument("--pgdata", type=Path, help="the embedded server's data folder")
    parser.add_argument("--schema", help="the store's schema (default: by its source)")
    args = parser.parse_args()

    url = args.url
    if url is None:
        from eval_harness.store.connection import start_embedded

        url = start_embedded(args.pgdata or Path(tempfile.mkdtemp(prefix="judge-vs-cal-pg-")))
    if args.nfcorpus:
        schema = args.schema or f"nfcorpus_{args.docs}"
        model = build_nfcorpus(url, args.nfcorpus.resolve(), args.docs, schema)
    else:
        schema = args.schema or f"rag_null_{args.synthetic}"
        model = build_synthetic(url, args.synthetic, schema)
    result = measure(url, schema, model, args.rounds)
    print(f"machine: {os.uname().machine}, {os.cpu_count()} cpus; load average "
          f"{os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{schema}: {result['documents']:,} documents, {result['queries']:,} queries; attach "
          f"{result['attach_s']:.1f} s; first calibrate {result['first_calibrate_s']:.2f} s "
          f"(fills the cache: {result['cache_entries']:,} entries), first dry run "
          f"{result['first_dry_run_s']:.2f} s")
    print("calibrate rerun s: " + ", ".join(f"{s:.2f}" for s in result["calibrate_s"]))
    print("judge --dry-run s: " + ", ".join(f"{s:.2f}" for s in result["dry_run_s"]))
    print(f"ratio of medians (dry run / calibrate rerun): {result['ratio']:.2f} "
          f"(target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
