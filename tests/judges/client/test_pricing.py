"""Prices: matched by the longest model prefix, cached tokens and the batch discount applied,
and the worst case of a request."""

from __future__ import annotations

import pytest

from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.protocol import ChatRequest, Message, Usage
from eval_harness.settings.judges import Price

pytestmark = pytest.mark.unit


def test_prices_match_by_longest_prefix_and_apply_batch_discount():
    table = PriceTable({"claude-haiku-4-5": Price(1.0, 5.0, 0.1),
                        "claude-haiku": Price(9.0, 9.0)})
    usage = Usage(input_tokens=1_000_000, output_tokens=200_000, cached_tokens=400_000)
    # 600k uncached * $1 + 400k cached * $0.10 + 200k out * $5 = 0.6 + 0.04 + 1.0 = $1.64
    assert table.cost("claude-haiku-4-5-20251001", usage) == pytest.approx(1.64)
    assert table.cost("claude-haiku-4-5", usage, batch=True) == pytest.approx(0.82)
    assert table.lookup("gpt-4o") is None
    request = ChatRequest("anthropic", "claude-haiku-4-5", "relevance", "v", "s" * 300,
                          (Message("user", "u" * 600),), 0.0, 100)
    # worst case: 900 chars / 3 + 8 * 2 = 316 input tokens, 100 output tokens
    assert table.worst_case(request) == pytest.approx((316 * 1.0 + 100 * 5.0) / 1e6)
