"""The cost report shows each budget line of a run: the labels against ``judges.budget_usd``,
the calls marked 'retest' and 'anchor' against their own lines."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from eval_harness.reporting.sections.cost import cost_section
from eval_harness.settings.judges import AnchorSettings, RetestSettings


def test_the_budget_lines_are_shown_with_their_budgets(settings, conn):
    run = f"lines-cost-{uuid.uuid4().hex[:8]}"
    for purpose, cost in (("label", 0.5), ("label", 0.25), ("retest", 0.125),
                          ("anchor", 0.0625), ("anchor", 0.0625)):
        conn.execute("INSERT INTO api_cost_log (run_id, api_name, model, operation, "
                     "input_tokens, output_tokens, estimated_cost, purpose) "
                     "VALUES (%s, 'openai', 'gpt-4o', 'relevance', 10, 1, %s, %s)",
                     (run, cost, purpose))
    config = replace(settings, judges=replace(
        settings.judges, budget_usd=10.0, retest=RetestSettings(True, budget_usd=1.5),
        anchors=AnchorSettings(True)))
    built = cost_section(conn, config, run, datetime.now(UTC))
    conn.rollback()
    assert (built.metrics["anchor_calls"], built.metrics["anchor_cost_usd"]) == (2, 0.125)
    assert (built.metrics["retest_calls"], built.metrics["retest_cost_usd"]) == (1, 0.125)
    text = " ".join(getattr(block, "text", "") for block in built.section.blocks)
    sentence = next(t for t in (getattr(b, "text", "") for b in built.section.blocks)
                    if t.startswith("Budget lines of this run"))
    assert "labels 2 call(s), 0.7500 USD of judges.budget_usd 10.0000 USD" in sentence, sentence
    assert "test-retest 1 call(s), 0.1250 USD of judges.retest.budget_usd 1.5000 USD" in sentence
    assert "anchors 2 call(s), 0.1250 USD of judges.anchors.budget_usd no limit" in sentence
    assert "relevance (anchor)" in str(built.section.blocks) and sentence in text
