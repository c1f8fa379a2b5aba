"""A RAG system's own store for the live-dataset tests: its words, mapping and checksum.

Loaded as a plugin by the root conftest: the ``beir_folder`` fixture writes the small BEIR
corpus (60 documents, 15 queries, 8 dimensions) that ``build_rag_store`` lays out in a
``rag`` schema; ``live_config`` maps that schema as a live dataset; ``rag_checksum`` proves
the RAG relations did not change by a byte.
"""

from __future__ import annotations

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.settings.datasets import (CorpusMapping, DatasetConfig, GroundTruthMapping,
                                            LiveMapping, Relation)

WORDS = ("aspirin heart attack dose risk blood pressure stroke vitamin diet sleep exercise "
         "insulin glucose liver kidney fever vaccine virus cell gene protein cancer tumor "
         "lung smoking alcohol coffee brain memory").split()


def no_embedder():
    raise AssertionError("the query vectors are cached: no embedder may be built")


def live_config(name: str = "live", schema: str = "rag", **corpus) -> DatasetConfig:
    mapping = dict(relation=Relation(schema, "l2_insights"), id="id", content="content",
                   embedding="embedding", tsvector=None)
    mapping.update(corpus)
    return DatasetConfig(
        name=name, language="english", embedder="local:test-random",
        live=LiveMapping(CorpusMapping(**mapping),
                         GroundTruthMapping(Relation(schema, "ground_truth"), "id", "query",
                                            "expected_docs")))


@pytest.fixture
def beir_folder(tmp_path):
    rng = np.random.default_rng(7)
    docs = {f"doc{i}": " ".join(rng.choice(WORDS, size=12)) for i in range(60)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=4)) for i in range(15)}
    qrels = [(f"q{i}", f"doc{j}", 1) for i in range(15)
             for j in rng.choice(60, size=3, replace=False)]
    return write_beir(tmp_path / "beir", docs, queries, qrels, dim=8, seed=3)


def rag_checksum(conn, schema: str = "rag") -> str:
    """md5 over every row of every RAG relation, in id order."""
    parts = []
    for table in ("l2_insights", "ground_truth", "api_cost_log"):
        parts.append(conn.execute(
            f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) "
            f"FROM {schema}.{table} t").fetchone()[0])
    return ":".join(parts)
