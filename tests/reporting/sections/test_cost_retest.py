"""The cost report shows test-retest calls (``api_cost_log.purpose = 'retest'``) as their own
line, and says what they cost."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from eval_harness.judges.client.pricing import PriceTable
from eval_harness.reporting.sections.cost import cost_lines, cost_section


def test_retest_calls_are_a_line_of_their_own(settings, conn):
    run = f"retest-cost-{uuid.uuid4().hex[:8]}"
    for purpose, cost in (("label", 0.5), ("label", 0.25), ("retest", 0.125),
                          ("retest", 0.125), ("retest", 0.125)):
        conn.execute("INSERT INTO api_cost_log (run_id, api_name, model, operation, "
                     "input_tokens, output_tokens, estimated_cost, purpose) "
                     "VALUES (%s, 'openai', 'gpt-4o', 'relevance', 10, 1, %s, %s)",
                     (run, cost, purpose))
    lines = cost_lines(conn, PriceTable({}), run_ids=[run])
    assert [(line.operation, line.calls, line.cost_usd) for line in lines] == [
        ("relevance", 2, 0.75), ("relevance (retest)", 3, 0.375)]

    built = cost_section(conn, settings, run, datetime.now(UTC))
    conn.rollback()
    assert built.metrics["retest_calls"] == 3 and built.metrics["retest_cost_usd"] == 0.375
    assert built.metrics["cost_usd"] == 1.125
    text = " ".join(getattr(block, "text", "") for block in built.section.blocks)
    assert "Test-retest (`judge --retest`" in text and "3 call(s) past the reply cache" in text
