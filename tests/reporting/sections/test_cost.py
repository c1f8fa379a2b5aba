"""The run report's cost section (eval_harness.reporting.sections.cost): cache hits logged
with the list price they saved, batch savings, and the cost of related runs (real SDKs
against the local fake server)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import date

import numpy as np
import pytest

from beir_factory import write_beir
from cost_logs import cache_hits_by_model as _hits
from cost_logs import calls_and_cost as _cost
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.dual.run import judge_dataset_async
from eval_harness.judges.protocol import Usage
from eval_harness.reporting.run_report import build_run_report
from eval_harness.reporting.sections.cost import cost_lines
from fake_llm_server import FakeTime, judge_settings

# --------------------------------------------------------------------------- cache hit log

def test_cache_hits_are_logged_with_the_list_price_they_saved(settings, conn, fake, tmp_path):
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical")
    query = f"aspirin heart attack risk {uuid.uuid4().hex}"
    documents = ["aspirin lowers heart attack risk", "statins lower cholesterol"]
    fake.latency = 0.05  # long enough for identical requests to meet in flight

    async def judge(run_id, copies):
        async with JudgeSession(config, conn, run_id=run_id, **FakeTime().options()) as s:
            return await asyncio.gather(*(s.judge1.relevance(query, document)
                                          for document in documents for _ in range(copies)))

    first, second = f"hits-{uuid.uuid4().hex[:8]}", f"hits-{uuid.uuid4().hex[:8]}"
    asyncio.run(judge(first, copies=2))  # 2 billed calls, each shared by one identical call
    calls, paid = _cost(conn, first)
    assert calls == fake.chat_requests == 2
    # shared in flight: the list price of what each shared reply cost (live = list price)
    [(api, model, operation, hits, saved)] = _hits(conn, first)
    assert (api, model, operation, hits) == ("openai", "gpt-4o", "relevance", 2)
    assert saved == pytest.approx(paid)

    asyncio.run(judge(second, copies=1))  # a rerun: every reply from the cache
    assert fake.chat_requests == 2 and _cost(conn, second) == (0, 0)
    [(_, _, _, hits, saved)] = _hits(conn, second)
    assert hits == 2 and saved == pytest.approx(paid) and saved > 0

    report = build_run_report(conn, replace(config, history_duckdb_path=tmp_path / "h.duckdb"),
                              run_id=second, dataset="none", days=[date(2001, 1, 1)],
                              out_dir=tmp_path / "r")
    assert (report.metrics["calls"], report.metrics["cost_usd"]) == (0, 0.0)
    assert report.metrics["cache_hits"] == 2
    assert report.metrics["cache_saved_usd"] == pytest.approx(paid)


def test_a_batch_reply_reaching_its_judge_is_not_a_cache_hit(settings, conn, fake, tmp_path):
    tag = uuid.uuid4().hex[:8]
    docs = {"d1": f"aspirin lowers heart attack risk {tag}", "d2": f"statins {tag}",
            "d3": f"sleep improves memory {tag}"}
    queries = {"q1": f"aspirin heart attack {tag}", "q2": f"memory sleep {tag}"}
    vectors = np.eye(3, 8, dtype=np.float32) + 0.05
    write_beir(tmp_path / "beir", docs, queries, [("q1", "d1", 1), ("q2", "d3", 1)],
               doc_vectors=vectors, query_vectors=vectors[[0, 2]])
    ingest_beir(conn, tmp_path / "beir", name=f"rrb_{tag}")
    config = judge_settings(settings, fake, judge1="openai:gpt-4o",
                            judge2="anthropic:claude-haiku-4-5")
    fake.batch_polls, fake.batch_errors = 1, 0
    summary = asyncio.run(judge_dataset_async(conn, config, f"rrb_{tag}", batch=True,
                                              session_options=FakeTime().options()))
    assert summary.complete and summary.batch.succeeded == 2 * summary.pairs
    assert _hits(conn, summary.run_id) == []  # each batch reply was delivered, not saved

    report = build_run_report(conn, replace(config, history_duckdb_path=tmp_path / "h.duckdb"),
                              run_id=summary.run_id, dataset=f"rrb_{tag}", days=[],
                              out_dir=tmp_path / "r")
    prices = PriceTable(config.judges.prices)
    rows = conn.execute("SELECT model, input_tokens, output_tokens, cached_tokens, "
                        "estimated_cost FROM api_cost_log WHERE run_id = %s AND batch",
                        (summary.run_id,)).fetchall()
    # saved = list price - paid, row by row; with a 50% discount it equals what was paid
    saved = sum(prices.cost(model, Usage(i, o, c)) - paid for model, i, o, c, paid in rows)
    assert len(rows) == 2 * summary.pairs
    assert report.metrics["batch_saved_usd"] == pytest.approx(saved)
    assert saved == pytest.approx(sum(row[4] for row in rows))
    assert report.metrics["batch_calls"] == len(rows) and report.metrics["cache_hits"] == 0


def test_cost_of_related_runs_counts_as_the_runs_own(store, conn):
    """`eval-harness run` passes its gate runs as related: their judge cost is the run's."""
    tag = uuid.uuid4().hex[:8]
    for run, cost in ((f"nightly-{tag}", 0.25), (f"gates-{tag}", 0.5), (f"other-{tag}", 4.0)):
        conn.execute("INSERT INTO api_cost_log (run_id, api_name, model, operation, "
                     "input_tokens, output_tokens, estimated_cost) "
                     "VALUES (%s, 'anthropic', 'claude-haiku-4-5', 'grounding', 10, 5, %s)",
                     (run, cost))
    prices = PriceTable({})
    own = cost_lines(conn, prices, run_ids=[f"nightly-{tag}"])
    both = cost_lines(conn, prices, run_ids=[f"nightly-{tag}", f"gates-{tag}"])
    assert [line.cost_usd for line in own] == [0.25]
    assert [(line.calls, line.cost_usd) for line in both] == [(2, 0.75)]
