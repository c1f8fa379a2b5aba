"""Cost of a provider call from its usage and the price table in config.yaml.

Prices are USD per million tokens. A model name is looked up exactly, then by the longest
configured name it starts with (so ``claude-haiku-4-5-20251001`` uses ``claude-haiku-4-5``).

    cost = (uncached_input * input + cached_input_tokens * cached_input
            + output_tokens * output) / 1e6 * (1 - batch_discount if batch else 1)
"""

from __future__ import annotations

from collections.abc import Mapping

from eval_harness.errors import UnknownName
from eval_harness.judges.protocol import ChatRequest, Usage
from eval_harness.settings.judges import Price


class MissingPrice(UnknownName):
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
