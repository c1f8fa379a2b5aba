"""Write small BEIR folders (with embeddings.npz) for tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from eval_harness.datasets.embeddings import PrecomputedEmbeddings, save_precomputed


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


def ingest_aspirin_dataset(conn, folder: Path, prefix: str) -> str:
    """A fresh dataset no other test used: 3 queries, 6 documents, one relevant each; its name."""
    import uuid

    from eval_harness.datasets.ingest import ingest_beir

    tag = uuid.uuid4().hex[:8]
    docs = {f"d{i}": f"document {i} about aspirin and the heart {tag}" for i in range(6)}
    queries = {"q1": f"aspirin heart {tag}", "q2": f"heart attack {tag}",
               "q3": f"aspirin dose {tag}"}
    qrels = [("q1", "d0", 1), ("q2", "d1", 1), ("q3", "d2", 1)]
    vectors = np.eye(len(docs), 8, dtype=np.float32) + 0.05
    write_beir(folder, docs, queries, qrels, doc_vectors=vectors,
               query_vectors=vectors[[0, 1, 2]])
    name = f"{prefix}_{tag}"
    ingest_beir(conn, folder, name=name)
    return name
