"""``judge --grid-pool`` / ``judges.grid_pool`` on a dataset with human labels (the LLM
judges on the fake server): the planned pairs take every calibration grid weight's top 5
(found here by SQL hybrid search, not by the sweep the plan uses), only the new pairs are
paid for, and a rerun pays nothing."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.plan import plan_queries
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.retrieval.hybrid import as_vector, hybrid_search
from eval_harness.retrieval.weights import configured_grid, keyword_weight_for
from eval_harness_pipelines import cli
from fake_llm_server import judge_settings
from judge_corpus import DOCS, LLM, QRELS, QUERIES


@pytest.fixture
def dataset(tmp_path, conn):
    """A fresh labelled dataset whose texts no other test used (the reply cache starts
    empty); its qrels label one or two documents per query, out of eight."""
    tag = uuid.uuid4().hex[:8]
    docs = {k: f"{v} {tag}" for k, v in DOCS.items()}
    vectors = np.eye(len(docs), 8, dtype=np.float32) + 0.05
    queries = {k: f"{v} {tag}" for k, v in QUERIES.items()}
    write_beir(tmp_path / "data", docs, queries, QRELS, doc_vectors=vectors,
               query_vectors=vectors[[0, 1, 4]])
    name = f"pool_{tag}"
    ingest_beir(conn, tmp_path / "data", name=name)
    return {"name": name, "folder": tmp_path / "data"}


def _sql_grid_tops(conn, settings, name) -> dict[int, set[int]]:
    """{query id: the union of SQL hybrid search's top 5 at every calibration grid weight}."""
    depth = settings.weights_for(name).candidate_depth
    rows = conn.execute("SELECT id, query, query_embedding FROM ground_truth WHERE dataset = %s",
                        (name,)).fetchall()
    return {qid: {hit.id for w in configured_grid(settings) for hit in hybrid_search(
                conn, name, query_text=text, query_embedding=as_vector(embedding), k=5,
                semantic_weight=float(w), keyword_weight=keyword_weight_for(w),
                candidate_depth=depth)}
            for qid, text, embedding in rows}


def _judged(conn, name) -> dict[int, list[int]]:
    return dict(conn.execute("SELECT id, judged_docs FROM ground_truth WHERE dataset = %s",
                             (name,)).fetchall())


def test_grid_pool_plans_every_grid_top_5_and_pays_only_for_new_pairs(settings, conn, dataset,
                                                                      fake):
    name = dataset["name"]
    config = judge_settings(settings, fake, hybrid_top_k=0, **LLM)  # expected_docs only
    pooled = replace(config, judges=replace(config.judges, grid_pool=True))
    expected = dict(conn.execute("SELECT id, expected_docs FROM ground_truth WHERE dataset = "
                                 "%s", (name,)).fetchall())
    tops = _sql_grid_tops(conn, config, name)
    plain = {p.query_id: p.doc_ids for p in plan_queries(conn, name, config)}
    plan = {p.query_id: p.doc_ids for p in plan_queries(conn, name, pooled)}
    for qid, docs in plan.items():
        assert list(plain[qid]) == expected[qid]  # without the option: the labels only
        assert list(docs[:len(expected[qid])]) == expected[qid]  # the labels come first
        assert set(docs) == set(expected[qid]) | tops[qid] and len(set(docs)) == len(docs)
    new_pairs = sum(len(set(plan[q]) - set(plain[q])) for q in plan)
    assert new_pairs > 0  # the grid's top 5 holds unlabelled documents

    first = judge_dataset(conn, config, name)
    assert first.complete and first.provider_calls == 2 * first.pairs
    second = judge_dataset(conn, pooled, name)
    assert second.complete and second.pairs == first.pairs + new_pairs
    assert second.provider_calls == 2 * new_pairs  # the labels' pairs were paid once
    assert second.cache_hits == 2 * first.pairs
    judged = _judged(conn, name)
    assert all(tops[q] <= set(judged[q]) for q in judged)
    sent = fake.chat_requests
    third = judge_dataset(conn, pooled, name)
    assert third.provider_calls == 0 and fake.chat_requests == sent
    assert _judged(conn, name) == judged


@pytest.mark.slow
def test_cli_grid_pool_option_plans_the_grid_pool(settings, conn, dataset, fake, store,
                                                 tmp_path, monkeypatch, capsys):
    name = dataset["name"]
    path = tmp_path / "config.yaml"
    path.write_text(f"""
default_dataset: {name}
datasets:
  {name}: {{path: {dataset['folder']}}}
judges: {{judge1: "{LLM['judge1']}", judge2: "{LLM['judge2']}", hybrid_top_k: 0}}
""")
    monkeypatch.setenv("DATABASE_URL", store.url)
    for variable in ("EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2",
                     "EVAL_HARNESS_JUDGE_BUDGET_USD", "EVAL_HARNESS_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-pool-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-pool-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)

    def dry_run(*extra):
        code = cli.main(["--config", str(path), "judge", "--dry-run", "--json", *extra])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    config = judge_settings(settings, fake, hybrid_top_k=0, **LLM)
    with_pool = estimate_judge_run(conn, replace(
        config, judges=replace(config.judges, grid_pool=True)), name)
    conn.rollback()
    plain, pooled = dry_run(), dry_run("--grid-pool")
    assert plain["pairs"] == len(QRELS) < pooled["pairs"] == with_pool.pairs
    code = cli.main(["--config", str(path), "judge", "--grid-pool", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["pairs"] == pooled["pairs"]
    assert dry_run("--grid-pool")["total"]["to_pay"] == 0  # all judged: nothing to pay again
    path.write_text(path.read_text().replace("hybrid_top_k: 0", "hybrid_top_k: 0, "
                                             "grid_pool: true"))
    assert dry_run()["pairs"] == pooled["pairs"]  # judges.grid_pool does what the option does
