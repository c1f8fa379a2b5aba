"""A judge-labelled dataset whose judges are biased towards one weight's top 5 (issue #22).

Query k owns seven documents and nothing else is near it (its vector is one axis; its
documents lie at cosine 0.95, 0.90, 0.85, 0.80, 0.75, 0.40, 0.35 from it, every other query
at cosine 0), and its two words are its own. Documents k_0, k_5 and k_6 carry the query's
words, so the keyword-heavy weight 0.2 ranks k_0, k_5, k_6, k_1, k_2 in its top 5 while the
semantic-heavy 0.9 (and the weights in force, 0.7) rank k_0..k_4.

The hidden qrels: k_0 is relevant, k_1..k_4 with probability 0.5, k_5 and k_6 with 0.15, so
0.9 truly beats 0.2 by about 0.14 P@5. The judges (scores written straight into ground_truth,
both judges alike) call every document carrying the query's words relevant, and the others
as the qrels with 10% errors: on their labels 0.2 beats 0.9 by about 0.2. The harness never
sees the qrels (expected_docs are emptied): people's verdicts on a human sample come from
them (:func:`label_sample`).
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.agreement.sample import export_sample_csv, import_sample_csv
from review_store import read_csv, set_scores, write_csv

N_QUERIES, PER_QUERY, DIM = 60, 7, 128
COSINES = (0.95, 0.90, 0.85, 0.80, 0.75, 0.40, 0.35)
WORDY = (0, 5, 6)  # documents carrying the query's words
CONFIG = """\
default_dataset: {name}
datasets:
  {name}:
    path: {folder}
    language: english
hybrid_search: {{semantic: {semantic}, keyword: {keyword}, candidate_depth: {per_query}}}
calibration:
  grid: {{start: 0.2, stop: 0.9, step: 0.7}}
  cv_folds: 2
  bootstrap_resamples: 200
"""


def _dataset(folder, tag, honest=False):
    rng = np.random.default_rng(22)
    docs, queries, qrels, doc_vectors, query_vectors, judged = {}, {}, [], [], [], {}
    for k in range(N_QUERIES):
        words = f"kestrel{k}x{tag} marsh{k}y{tag}"
        queries[f"q{k}"] = words
        axis = np.zeros(DIM)
        axis[k] = 1.0
        query_vectors.append(axis)
        scores = []
        for j, cosine in enumerate(COSINES):
            relevant = j == 0 or rng.random() < (0.5 if j < 5 else 0.15)
            doc = f"d{k}_{j}"
            docs[doc] = (f"a field note on {words} counts" if j in WORDY
                         else f"clinical evidence summary number {j}")
            away = rng.normal(size=DIM)
            away[:64] = 0.0  # no component on any query's axis
            away /= np.linalg.norm(away)
            doc_vectors.append(cosine * axis + np.sqrt(1 - cosine ** 2) * away)
            # honest judges: the qrels with 10% errors on every document (same draws)
            biased = j in WORDY and not honest
            judge_says = biased or (relevant != (rng.random() < 0.1))
            score = 0.9 if judge_says else 0.1
            scores.append((doc, score, score))
            if relevant:
                qrels.append((f"q{k}", doc, 1))
        judged[f"q{k}"] = scores
    write_beir(folder, docs, queries, qrels, doc_vectors=np.asarray(doc_vectors),
               query_vectors=np.asarray(query_vectors))
    return qrels, judged


@pytest.fixture
def gain_scenario(db, store, tmp_path, monkeypatch):
    """The dataset ingested and judged, its qrels hidden, a config.yaml for it (weights in
    force 0.7 / 0.3)."""
    return _scenario(db, store, tmp_path, monkeypatch, honest=False, semantic=0.7)


@pytest.fixture
def honest_gain_scenario(db, store, tmp_path, monkeypatch):
    """The same corpus judged by judges without the bias (the qrels with 10% errors), the
    weights in force the keyword-heavy 0.2 / 0.8, which the qrels truly lose to 0.7 and 0.9
    by about 0.14 P@5."""
    return _scenario(db, store, tmp_path, monkeypatch, honest=True, semantic=0.2)


def _scenario(db, store, tmp_path, monkeypatch, *, honest, semantic):
    from eval_harness.datasets.ingest import ingest_beir

    tag = uuid.uuid4().hex[:6]
    name = f"gain{tag}"
    qrels, judged = _dataset(tmp_path / "data", tag, honest=honest)
    ingest_beir(db, tmp_path / "data", name=name)
    db.execute("UPDATE ground_truth SET expected_docs = '{}', relevance_grades = '{}' "
               "WHERE dataset = %s", (name,))  # the harness never sees the qrels
    set_scores(db, name, judged)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(name=name, folder=tmp_path / "data", per_query=PER_QUERY,
                                    semantic=semantic, keyword=round(1 - semantic, 10)))
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    return {"name": name, "config": config, "tmp": tmp_path,
            "relevant": {(q, d) for q, d, _ in qrels},
            "judged_relevant": {(q, d) for q, rows in judged.items() for d, s, _ in rows
                                if s > 0.5}}


def label_sample(db, scenario, *, n: int, seed: int = 3) -> list[str]:
    """Draw a human sample of ``n`` queries and label every row from the hidden qrels; the
    sampled queries' external ids."""
    path = scenario["tmp"] / "sample.csv"
    export_sample_csv(db, scenario["name"], path, n=n, seed=seed)
    rows = read_csv(path)
    for row in rows:
        pair = (row["query_external_id"], row["doc_external_id"])
        row["verdict"] = "relevant" if pair in scenario["relevant"] else "not relevant"
    write_csv(path, rows)
    import_sample_csv(db, None, path)
    return sorted({row["query_external_id"] for row in rows})
