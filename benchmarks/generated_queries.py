"""Ground truth from nothing on NFCorpus (issue #38): queries written from the corpus by the
offline writer, how often each one's source document is in the hybrid top 5, and the
offline judges' kappa on the generated queries' pools beside their kappa on NFCorpus's own
test queries.

NFCorpus (read from ``--nfcorpus``, e.g. ../shared/datasets/nfcorpus; academic use only,
nothing is copied into the repository) ships no vectors, so documents and queries get the
hashed bag of words of ``benchmarks/judge_vs_calibrate.py`` (384 dimensions), the generated
queries too, as a user's embedder would embed them (the harness's local model is an optional
extra). Two datasets in one embedded store:

* ``bare``: the corpus alone (no queries.jsonl, no qrels), then ``ground-truth generate
  --queries N`` (offline writer and critic, the embedded default), its queries embedded, then
  ``judge`` (local:lexical and local:embedding) and ``agreement``;
* ``own``: the same corpus with NFCorpus's test queries, judged and agreed the same way, as
  the reference kappa (the judges on the queries people wrote).

Printed: per kind, the queries kept and the share whose source document is in the top 5 (at
the shipped weights, semantic 0.7 / keyword 0.3), the critic's drops by reason, and each
dataset's kappa with its interval, pairs and queries.

    .venv/bin/python benchmarks/generated_queries.py --nfcorpus ../shared/datasets/nfcorpus
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_vs_calibrate import hashed_words, nfcorpus_folder  # noqa: E402

CONFIG = """\
default_dataset: bare
judges: {judge1: "local:lexical", judge2: "local:embedding"}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nfcorpus", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=3633, help="first N documents")
    parser.add_argument("--queries", type=int, default=300, help="generated queries")
    parser.add_argument("--pgdata", type=Path, help="the embedded server's data folder")
    args = parser.parse_args()

    from eval_harness.agreement.dataset_agreement import dataset_agreement
    from eval_harness.datasets import ground_truth
    from eval_harness.datasets.ingest import ingest_beir
    from eval_harness.judges.dual.run import judge_dataset
    from eval_harness.query_sources.generate import generate_queries
    from eval_harness.settings import load_settings
    from eval_harness.store import StoreLocation, migrate
    from eval_harness.store.connection import start_embedded

    work = Path(tempfile.mkdtemp(prefix="generated-queries-"))
    url = start_embedded(args.pgdata or work / "pgdata")
    own, bare = work / "own", work / "bare"
    documents, own_queries = nfcorpus_folder(args.nfcorpus.resolve(), args.docs, own)
    shutil.copytree(own, bare)
    (bare / "queries.jsonl").unlink()
    shutil.rmtree(bare / "qrels")
    (work / "config.yaml").write_text(CONFIG, encoding="utf-8")
    settings = load_settings(work / "config.yaml", environ={"DATABASE_URL": url})
    location = StoreLocation(url, "benchmark store")
    print(f"NFCorpus: {documents:,} documents, {own_queries:,} test queries with a relevant "
          "document among them")
    with location.connection() as conn:
        migrate(conn)
        ingest_beir(conn, own, name="own")
        ingest_beir(conn, bare, name="bare")
        conn.commit()
        started = time.perf_counter()
        report = generate_queries(conn, settings, "bare", n=args.queries)
        seconds = time.perf_counter() - started
        texts = ground_truth.queries_without_embedding(conn, "bare")
        ground_truth.set_query_embeddings(conn, "bare", [(hashed_words(t), t) for t in texts])
        conn.commit()
        # the top-5 figure again, now that the queries have their (hashed) embeddings
        report_embedded = generate_queries(conn, settings, "bare", n=args.queries)
        kinds = Counter(q.kind for q in report.queries)
        print(f"\ngenerate --queries {args.queries} (writer {report.writer}, critic "
              f"{report.critic}): {report.new} stored in {seconds:.1f} s; "
              f"{len(report.dropped)} dropped: "
              + ", ".join(f"{n} {reason}" for reason, n in
                          Counter(d['reason'] for d in report.dropped).most_common()))
        print("kinds kept: " + ", ".join(f"{kinds[k]} {k}" for k in
                                         ("question", "paraphrase", "unanswerable")))
        print(f"source document in the top 5 of its (answerable) query: keyword only "
              f"{report.source_in_top_5:.3f} ({report.source_hits} of "
              f"{kinds['question'] + kinds['paraphrase']}); hybrid 0.7/0.3 with embeddings "
              f"{report_embedded.source_in_top_5:.3f}")
        by_kind = _top5_by_kind(conn, settings, "bare")
        print("  by kind (hybrid): " + ", ".join(f"{k} {v:.3f}" for k, v in by_kind.items()))
        for name in ("bare", "own"):
            started = time.perf_counter()
            judged = judge_dataset(conn, settings, name)
            conn.commit()
            agreement = dataset_agreement(conn, name, settings.agreement,
                                          configured_judges=("local:lexical",
                                                             "local:embedding"))
            f = agreement.summary()
            print(f"\n{name}: judged in {time.perf_counter() - started:.1f} s (complete "
                  f"{judged.complete}); kappa {_num(f['kappa'])} [{_num(f['kappa_ci_low'])}, "
                  f"{_num(f['kappa_ci_high'])}] ({f['landis_koch']}), {f['n_scored']} pairs "
                  f"scored by both of {f['n_pairs']}; Gwet AC1 {_num(f['gwet_ac1'])}")


def _num(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _top5_by_kind(conn, settings, dataset: str) -> dict[str, float]:
    from eval_harness.datasets import ground_truth
    from eval_harness.retrieval.hybrid import as_vector, hybrid_search

    weights = settings.weights_for(dataset)
    rows = ground_truth.generated_queries(conn, dataset)
    vectors = ground_truth.query_embeddings_of(conn, [r[0] for r in rows])
    hits: Counter = Counter()
    totals: Counter = Counter()
    for query_id, _, text, doc_id, kind, _ in rows:
        found = hybrid_search(conn, dataset, query_text=text,
                              query_embedding=as_vector(vectors[query_id]), k=5,
                              semantic_weight=weights.semantic,
                              keyword_weight=weights.keyword,
                              candidate_depth=weights.candidate_depth)
        totals[kind] += 1
        hits[kind] += any(h.id == doc_id for h in found)
    return {kind: hits[kind] / totals[kind] for kind in totals}


if __name__ == "__main__":
    main()
