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


@pytest.fixture
def live(fresh, beir_folder):
    """An autocommit connection to a fresh database whose ``rag`` schema holds
    ``beir_folder`` laid out as a RAG store, attached as the live dataset ``live``."""
    from eval_harness.datasets.demo_store import build_rag_store
    from eval_harness.datasets.live import attach_live_dataset

    with fresh.connection(autocommit=True) as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        yield conn


def rag_checksum(conn, schema: str = "rag") -> str:
    """md5 over every row of every RAG relation, in id order."""
    parts = []
    for table in ("l2_insights", "ground_truth", "api_cost_log"):
        parts.append(conn.execute(
            f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) "
            f"FROM {schema}.{table} t").fetchone()[0])
    return ":".join(parts)


def seeds_config_yaml(name: str = "prod", schema: str = "rag", *,
                      embedder: str = "local:test-random", local_judges: bool = True) -> str:
    """A config.yaml whose default dataset ``name`` maps ``schema``'s seeds-layout tables
    with ``tsvector: null``, as README "Evaluate your own store (live datasets)" writes one;
    ``local_judges``: both judges offline."""
    text = (f"default_dataset: {name}\n"
            "datasets:\n"
            f"  {name}:\n"
            "    language: english\n"
            f"    embedder: {embedder}\n"
            "    live:\n"
            f"      corpus: {{relation: {schema}.l2_insights, id: id, content: content,\n"
            "               embedding: embedding, tsvector: null}\n"
            f"      ground_truth: {{relation: {schema}.ground_truth, id: id, query: query,\n"
            "                     expected_docs: expected_docs}\n")
    return text + ('judges: {judge1: "local:lexical", judge2: "local:embedding"}\n'
                   if local_judges else "")


PROJECT_ENVIRONMENT = ("DAGSTER_HOME", "EVAL_HARNESS_CONFIG", "OPENAI_API_KEY",
                       "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2",
                       "DAGSTER_POSTGRES_URL")


def seeds_project(location, tmp_path, monkeypatch, config: str, *, seed: int):
    """A seeds-layout store in ``public`` of ``location`` (40 documents, 8 queries, 384
    dimensions, their query vectors cached under all-MiniLM-L6-v2, as after a first attach
    with that model) and a project folder ``rag-eval`` holding ``config`` as its
    config.yaml, made the working directory, with DATABASE_URL pointing at the store and
    none of the harness's other variables set. Returns the folder."""
    rng = np.random.default_rng(seed)
    docs = {f"d{i}": " ".join(rng.choice(WORDS, size=12)) for i in range(40)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=4)) for i in range(8)}
    qrels = [(f"q{i}", f"d{j}", 1) for i in range(8) for j in rng.choice(40, 2, replace=False)]
    from eval_harness.datasets.demo_store import build_rag_store

    with location.connection() as conn:
        build_rag_store(conn, write_beir(tmp_path / "beir", docs, queries, qrels, dim=384),
                        schema="public")
        conn.execute("UPDATE query_embeddings SET model = 'all-MiniLM-L6-v2'")
        conn.commit()
    project = tmp_path / "rag-eval"
    project.mkdir()
    (project / "config.yaml").write_text(config, encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.setenv("DATABASE_URL", location.url)
    for variable in PROJECT_ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    return project
