"""Write small BEIR folders (with embeddings.npz) for tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from eval_harness.store.embeddings import PrecomputedEmbeddings, save_precomputed


def write_beir(folder: Path, docs: dict[str, str], queries: dict[str, str],
               qrels: list[tuple[str, str, int]], *, dim: int = 8, seed: int = 0,
               doc_vectors: np.ndarray | None = None,
               query_vectors: np.ndarray | None = None, split: str = "test") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc_id, text in docs.items():
            out.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for query_id, text in queries.items():
            out.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    with (folder / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, doc_id, grade in qrels:
            out.write(f"{query_id}\t{doc_id}\t{grade}\n")
    rng = np.random.default_rng(seed)
    if doc_vectors is None:
        doc_vectors = rng.normal(size=(len(docs), dim))
    if query_vectors is None:
        query_vectors = rng.normal(size=(len(queries), dim))
    save_precomputed(folder / "embeddings.npz", PrecomputedEmbeddings(
        model="test-random", doc_ids=list(docs), docs=np.asarray(doc_vectors, np.float32),
        query_ids=list(queries), queries=np.asarray(query_vectors, np.float32)))
    return folder
