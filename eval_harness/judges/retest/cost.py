"""What test-retest costs (``judge --dry-run``): each judge's retest requests, every pair of the
sampled queries ``repeats`` times, past the cache, priced on its own line against its own budget
line ``judges.retest.budget_usd``, apart from the labels' ``judges.budget_usd``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from eval_harness.judges.client.pricing import (PriceTable, estimated_input_tokens,
                                                estimated_output_tokens, usd)
from eval_harness.judges.client.session import planning_judge
from eval_harness.judges.dual.plan import PlannedQuery, relevance_requests
from eval_harness.judges.protocol import Passage, Usage
from eval_harness.judges.retest.self_agreement import retest_sample
from eval_harness.settings import Settings


@dataclass
class RetestEstimate:
    """One judge's test-retest requests (``judges.retest``): every pair of the sampled
    queries, ``repeats`` times, live and past the cache (a re-ask after an unparsable reply
    is not counted: it is rare)."""

    slot: str
    spec: str
    queries: int
    pairs: int
    repeats: int
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    max_cost_usd: float = 0.0

    def format(self) -> str:
        head = (f"retest {self.slot} {self.spec}  {self.queries:,} queries, {self.pairs:,} "
                f"pairs x {self.repeats} repeats past the cache")
        if self.spec.startswith("local:"):
            return f"{head}  local judge: no request, $0"
        return (f"{head}  to pay {self.requests:,}  ~{self.input_tokens:,} input tokens  "
                f"~{self.output_tokens:,} output tokens  ~{usd(self.cost_usd)} "
                f"(at most {usd(self.max_cost_usd)})")


def retest_estimates(settings: Settings, prices: PriceTable, specs: Sequence[str],
                     planned: Sequence[PlannedQuery],
                     documents: dict[int, Passage]) -> list[RetestEstimate]:
    """Each judge's test-retest requests over the seeded sample of ``planned`` the run would
    retest (:func:`~eval_harness.judges.retest.self_agreement.retest_sample`)."""
    retest = settings.judges.retest
    sample = retest_sample(planned, queries=retest.queries, seed=retest.seed)
    out = []
    for slot, spec in zip(("judge1", "judge2"), specs):
        estimate = RetestEstimate(slot, spec, len(sample), sum(len(p.doc_ids) for p in sample),
                                  retest.repeats)
        provider, model = spec.split(":", 1)
        if provider != "local":
            judge = planning_judge(settings, spec)
            for request in relevance_requests(judge, sample, documents):
                estimate.requests += retest.repeats
                estimate.input_tokens += retest.repeats * estimated_input_tokens(request)
                estimate.output_tokens += retest.repeats * estimated_output_tokens(request)
                estimate.max_cost_usd += retest.repeats * prices.worst_case(request)
            estimate.cost_usd = prices.cost(model, Usage(estimate.input_tokens,
                                                         estimate.output_tokens))
        out.append(estimate)
    return out
