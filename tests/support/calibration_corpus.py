"""The calibration tests' small random dataset on the real store, and a config.yaml for it.

``corpus`` is a module-scoped fixture: a test file imports it (``from calibration_corpus
import corpus``) and gets its own copy of the dataset, ingested once for the file.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir


VOCAB = ("protein cell gene cancer therapy risk heart brain blood study trial dose mouse "
         "human virus vaccine immune response tumor growth").split()
# Few folds and resamples: fast, and enough for this dataset.
FAST = {"cv_folds": 3, "bootstrap_resamples": 500}


@pytest.fixture(scope="module")
def corpus(store, tmp_path_factory):
    """60 short random documents over 20 words (ts_rank ties everywhere), 5 exact duplicates
    (both scores tie: only the id decides), 12 queries with 1..6 relevant documents."""
    rng = np.random.default_rng(11)
    docs = {f"doc{i:02d}": " ".join(rng.choice(VOCAB, size=rng.integers(2, 8)))
            for i in range(60)}
    vectors = rng.normal(size=(65, 8)).astype(np.float32)
    for i in range(5):  # doc60..doc64 duplicate doc00..doc04, text and embedding
        docs[f"doc{60 + i}"] = docs[f"doc{i:02d}"]
        vectors[60 + i] = vectors[i]
    queries = {f"q{i}": " ".join(rng.choice(VOCAB, size=2, replace=False)) for i in range(12)}
    query_vectors = vectors[rng.choice(65, 12)] + rng.normal(0, 0.3, (12, 8)).astype(np.float32)
    qrels = [(q, f"doc{j:02d}", int(rng.integers(1, 3)))
             for q in queries for j in rng.choice(65, size=rng.integers(1, 7), replace=False)]
    name = f"c{uuid.uuid4().hex[:8]}"
    folder = write_beir(tmp_path_factory.mktemp("calibration") / "ds", docs, queries, qrels,
                        doc_vectors=vectors, query_vectors=query_vectors)
    with store.connection() as conn:
        ingest_beir(conn, folder, name=name)
        rows = conn.execute("SELECT id, external_id, query, query_embedding FROM ground_truth "
                            "WHERE dataset = %s", (name,)).fetchall()
    return {"name": name, "folder": folder,
            "queries": {qid: (text, emb) for qid, _, text, emb in rows}}


CONFIG = """\
# eval-harness test config; comments must survive calibration
default_dataset: {name}   # the dataset under test

datasets:
  {name}:
    path: {folder}
    language: english

hybrid_search:
  semantic: 0.5         # weight of the normalised cosine similarity
  keyword: 0.5          # weight of the normalised ts_rank
  candidate_depth: 10   # top-N of each retriever

calibration:
  grid: {{start: 0.5, stop: 0.9, step: 0.1}}
  cv_folds: 3
  bootstrap_resamples: 500
  verdict:
    full_success: {full}
    partial_success: {partial}

history:
  duckdb_path: state/history.duckdb

agreement:
  kappa_floor: 0.70     # another team's key, untouched
"""


def write_config(path, corpus, *, full=0.75, partial=0.70, alpha=None):
    """The config; ``alpha``: a ``calibration.decision.alpha`` (12 queries rarely make a gain
    significant at the default 0.05: a permissive alpha lets the tests of the writes write)."""
    text = CONFIG.format(name=corpus["name"], folder=corpus["folder"], full=full,
                         partial=partial)
    if alpha is not None:
        text = text.replace("  verdict:\n", f"  decision: {{alpha: {alpha}}}\n  verdict:\n")
    path.write_text(text)
    return path
