"""What re-judging the anchor set costs (``judge --dry-run`` with ``judges.anchors`` on): one
request per frozen anchor of each LLM judge, past the cache, priced on its own line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import psycopg

from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.dual import anchor_sql
from eval_harness.judges.protocol import Usage
from eval_harness.settings import Settings


@dataclass
class AnchorEstimate:
    """One judge's anchor requests: every frozen anchor once (none before the set is frozen:
    the run that freezes it takes the run's own scores)."""

    slot: str
    spec: str
    pairs: int
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    max_cost_usd: float = 0.0

    def format(self) -> str:
        head = f"anchors {self.slot} {self.spec}  {self.pairs:,} anchors past the cache"
        if self.spec.startswith("local:"):
            return f"{head}  local judge: not re-judged, $0"
        if not self.pairs:
            return (f"anchors {self.slot} {self.spec}  no anchor set yet: this run freezes "
                    "it from its own scores, $0")
        usd = lambda v: f"${v:,.2f}" if v >= 1 else f"${v:.4f}"  # noqa: E731
        return (f"{head}  to pay {self.requests:,}  ~{self.input_tokens:,} input tokens  "
                f"~{self.output_tokens:,} output tokens  ~{usd(self.cost_usd)} "
                f"(at most {usd(self.max_cost_usd)})")


def anchor_estimates(conn: psycopg.Connection, settings: Settings, prices: PriceTable,
                     specs: Sequence[str], dataset: str) -> list[AnchorEstimate]:
    """Each judge's anchor requests for ``dataset`` (frozen anchors in ``judge_anchors``)."""
    from eval_harness.judges.dual.dry_run import (
        _server, estimated_input_tokens, estimated_output_tokens)
    from eval_harness.judges.llm import LLMJudge

    frozen = anchor_sql.frozen_anchors(conn, dataset)
    out = []
    for number, spec in enumerate(specs, start=1):
        rows = [r for r in frozen if r[0] == number]
        estimate = AnchorEstimate(f"judge{number}", spec, len(rows))
        provider, model = spec.split(":", 1)
        if provider != "local":
            judge = LLMJudge(spec, None, settings.judges, base_url=_server(settings, provider))
            for row in rows:
                request = judge.relevance_request(row[6], row[7])
                estimate.requests += 1
                estimate.input_tokens += estimated_input_tokens(request)
                estimate.output_tokens += estimated_output_tokens(request)
                estimate.max_cost_usd += prices.worst_case(request)
            estimate.cost_usd = prices.cost(model, Usage(estimate.input_tokens,
                                                         estimate.output_tokens))
        out.append(estimate)
    return out
