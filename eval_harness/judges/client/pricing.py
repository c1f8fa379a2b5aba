"""Cost of a provider call from its usage and the price table in config.yaml, and the tokens a
call is expected to use before it is made.

Prices are USD per million tokens. A model name is looked up exactly, then by the longest
configured name it starts with (so ``claude-haiku-4-5-20251001`` uses ``claude-haiku-4-5``).

    cost = (uncached_input * input + cached_input_tokens * cached_input
            + output_tokens * output) / 1e6 * (1 - batch_discount if batch else 1)

Before a call, two estimates of its tokens: the worst case the budget reserves
(:meth:`PriceTable.worst_case`: three characters per token and the full ``max_tokens`` of
output), and the typical figures estimates print (``judge --dry-run``, what staged judging
saved, the retest and anchor lines): :func:`estimated_input_tokens`, ``ceil(characters / 4)``
of the system prompt and messages plus :data:`MESSAGE_OVERHEAD_TOKENS` per message (the system
prompt counts as one), the usual rule of thumb for English text with chat framing (a real
tokenizer can differ by some 10-20% on other languages or code), and
:func:`estimated_output_tokens`, a typical reply (:data:`TYPICAL_REPLY_TOKENS`: a relevance
reply is one number), not the ``max_tokens`` ceiling.
"""

from __future__ import annotations

import math
from typing import Mapping

from eval_harness.settings.judges import Price
from eval_harness.judges.protocol import ChatRequest, Usage

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
TYPICAL_REPLY_TOKENS = {"relevance": 4}  # "0.7" and an end token; other operations: max_tokens
ESTIMATE_BASIS = (f"input ~ characters/{CHARS_PER_TOKEN} + {MESSAGE_OVERHEAD_TOKENS} per "
                  "message; output = a typical reply (one number); at most = the budget's "
                  "worst case (characters/3, full max_tokens)")


class MissingPrice(LookupError):
    """A paid model has no entry in ``judges.prices``; the message says what to add."""


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    def lookup(self, model: str) -> Price | None:
        if model in self._prices:
            return self._prices[model]
        prefixes = [name for name in self._prices if model.startswith(name)]
        return self._prices[max(prefixes, key=len)] if prefixes else None

    def require(self, model: str, spec: str) -> Price:
        price = self.lookup(model)
        if price is None:
            raise MissingPrice(
                f"judges.prices in config.yaml has no entry for model '{model}' (judge {spec}); "
                f"add one with input and output USD per million tokens (zeros for a "
                f"self-hosted server) so cost and budget can be tracked.")
        return price

    def cost(self, model: str, usage: Usage, *, batch: bool = False) -> float:
        price = self.lookup(model)
        if price is None:
            return 0.0  # unreachable for judges built by a session: require() ran first
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_rate = price.input if price.cached_input is None else price.cached_input
        total = ((usage.input_tokens - cached) * price.input + cached * cached_rate
                 + usage.output_tokens * price.output) / 1e6
        return total * (1.0 - price.batch_discount) if batch else total

    def worst_case(self, request: ChatRequest, *, batch: bool = False) -> float:
        """An upper bound of the call's cost before it is made: every estimated input token
        uncached and the full ``max_tokens`` of output."""
        return self.cost(request.model, Usage(request.estimated_input_tokens(),
                                              request.max_tokens), batch=batch)


def estimated_input_tokens(request: ChatRequest) -> int:
    """The input tokens ``request`` is expected to be billed (see the module docstring)."""
    chars = len(request.system) + sum(len(m.content) for m in request.messages)
    messages = len(request.messages) + 1  # the system prompt is a message too
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * messages


def estimated_output_tokens(request: ChatRequest) -> int:
    """A typical reply's tokens for the request's operation, never above its ``max_tokens``."""
    return min(request.max_tokens, TYPICAL_REPLY_TOKENS.get(request.operation,
                                                            request.max_tokens))


def usd(amount: float) -> str:
    """An estimated amount as the estimates print it: cents from a dollar up, else four
    decimals (``$1,234.50``, ``$0.0042``)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"
