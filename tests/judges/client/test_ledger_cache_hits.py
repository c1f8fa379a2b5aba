"""The judge ledger's cache hit log (eval_harness.judges.client.ledger)."""

from __future__ import annotations

import uuid
from dataclasses import replace

from cost_logs import cache_hits_by_model as _hits
from eval_harness.judges.client.ledger import JudgeLedger
from eval_harness.judges.protocol import Completion, Usage


def test_ledger_counts_hits_per_provider_model_and_operation(conn):
    from eval_harness.judges.protocol import ChatRequest, Message

    run_id = f"ledger-{uuid.uuid4().hex[:8]}"
    ledger = JudgeLedger(conn, run_id=run_id)
    request = ChatRequest("openai", "gpt-4o", "relevance", "v", "system",
                          (Message("user", f"q {run_id}"),), 0.0, 100)
    other = replace(request, operation="grounding")
    ledger.record_call(request, Completion("0.5", Usage(10, 2)), cost=0.0001, batch=True)
    ledger.record_cache_hit(request, saved_cost=0.5)   # the batch's own delivery: not counted
    ledger.record_cache_hit(request, saved_cost=0.25)  # a second reader: a real hit
    ledger.record_cache_hit(request, saved_cost=0.25)
    ledger.record_cache_hit(other, saved_cost=1.0)
    ledger.flush()
    assert sorted(_hits(conn, run_id)) == [("openai", "gpt-4o", "grounding", 1, 1.0),
                                           ("openai", "gpt-4o", "relevance", 2, 0.5)]
    ledger.flush()  # nothing pending: no new rows
    assert conn.execute("SELECT count(*) FROM api_cache_hit_log WHERE run_id = %s",
                        (run_id,)).fetchone()[0] == 2
