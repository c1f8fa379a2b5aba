"""A corpus without ground truth: the first documents of the bundled SciFact, in a BEIR
folder without queries.jsonl or qrels/, with their precomputed embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from eval_harness.datasets.embeddings import (
    PrecomputedEmbeddings,
    load_precomputed,
    save_precomputed,
)
from paths import REPO

SCIFACT = REPO / "datasets" / "scifact"


def corpus_only_folder(folder: Path, *, n_docs: int = 300) -> Path:
    """``folder`` holding SciFact's first ``n_docs`` documents and their embeddings only."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:n_docs]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ids = [str(json.loads(line)["_id"]) for line in lines]
    stored = load_precomputed(SCIFACT / "embeddings.npz")
    rows = {doc_id: i for i, doc_id in enumerate(stored.doc_ids)}
    save_precomputed(folder / "embeddings.npz", PrecomputedEmbeddings(
        model=stored.model, doc_ids=ids, docs=np.asarray([stored.docs[rows[i]] for i in ids]),
        query_ids=[], queries=np.zeros((0, stored.docs.shape[1]), np.float32)))
    return folder
