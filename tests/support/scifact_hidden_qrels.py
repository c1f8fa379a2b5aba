"""SciFact's test queries with their qrels hidden from the harness, judged by two biased
``local:lexical`` judges: the per-query judge P@5 beside the qrels P@5 (at the default
weights). The setup of tests/metrics/test_ppi_coverage.py and benchmarks/ppi_width.py."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import numpy as np

from eval_harness.judges.dual.run import judge_dataset
from eval_harness.retrieval.hybrid import as_vector, hybrid_search
from eval_harness.settings import load_settings
from eval_harness.datasets.ingest import ingest_beir

SCIFACT = Path(__file__).resolve().parents[2] / "datasets" / "scifact"


def _hidden_qrels() -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = {}
    lines = (SCIFACT / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    for line in lines:
        query, doc, grade = line.split("\t")
        if int(grade) >= 1:
            relevant.setdefault(query, set()).add(doc)
    return relevant


def hidden_qrels_p_at_5(store, folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(judge P@5, qrels P@5) of every SciFact test query at the default weights, judged by
    two ``local:lexical`` judges with the qrels hidden (``store``: a migrated StoreLocation;
    ``folder``: an empty scratch folder)."""
    for name in ("corpus.jsonl", "embeddings.npz"):
        shutil.copy(SCIFACT / name, folder / name)
    qrels = _hidden_qrels()
    # only the test split's queries: without qrels every query in the file is kept
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as source, \
            (folder / "queries.jsonl").open("w", encoding="utf-8") as target:
        target.writelines(line for line in source if json.loads(line)["_id"] in qrels)
    config = folder / "config.yaml"
    name = f"hidden{uuid.uuid4().hex[:6]}"
    config.write_text(f"""\
default_dataset: {name}
datasets:
  {name}: {{path: {folder}, language: english}}
judges: {{judge1: local:lexical, judge2: local:lexical, hybrid_top_k: 5}}
calibration: {{grid: {{start: 0.7, stop: 0.7, step: 0.1}}}}
""", encoding="utf-8")
    settings = load_settings(config, environ={"DATABASE_URL": store.url})
    with store.connection() as conn:
        ingest_beir(conn, folder, name=name)
        rows = conn.execute("SELECT id, external_id, query, query_embedding FROM ground_truth "
                            "WHERE dataset = %s ORDER BY id", (name,)).fetchall()
        test_queries = [r for r in rows if r[1] in qrels]
        judge_dataset(conn, settings, name)
        scores = {(qid, doc): (s1, s2) for qid, docs, j1, j2 in conn.execute(
            "SELECT id, judged_docs, judge1_score, judge2_score FROM ground_truth "
            "WHERE dataset = %s", (name,)) for doc, s1, s2 in zip(docs, j1, j2)}
        threshold = settings.agreement.relevance_threshold
        judge, human = [], []
        for qid, external_id, text, embedding in test_queries:
            hits = hybrid_search(conn, name, query_text=text, query_embedding=as_vector(embedding),
                                 k=5, semantic_weight=0.7, keyword_weight=0.3)
            judged = [scores.get((qid, h.id), (None, None)) for h in hits]
            judge.append(sum(1 for s1, s2 in judged
                             if s1 is not None and s2 is not None and s1 > threshold
                             and s2 > threshold) / 5)
            human.append(sum(1 for h in hits if h.external_id in qrels[external_id]) / 5)
    return np.asarray(judge), np.asarray(human)
