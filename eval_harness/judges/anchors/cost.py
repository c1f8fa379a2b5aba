"""What re-judging the anchor set costs (``judge --dry-run``): one request per frozen anchor of
each LLM judge, past the cache, priced on its own line (none before the set is frozen, and
none for a judge another run re-judged today: :mod:`.nightly`), against its own budget line
``judges.anchors.budget_usd``, apart from the labels' ``judges.budget_usd``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import psycopg

from eval_harness.judges.anchors import sql
from eval_harness.judges.anchors.anchor_set import human_fingerprint
from eval_harness.judges.client.pricing import (PriceTable, estimated_input_tokens,
                                                estimated_output_tokens, usd)
from eval_harness.judges.client.session import planning_judge
from eval_harness.judges.local.relevance import LOCAL_PROMPT_VERSION
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
    measured_by: str | None = None  # the run that re-judged them today (nothing to pay)

    def format(self) -> str:
        head = f"anchors {self.slot} {self.spec}  {self.pairs:,} anchors past the cache"
        if not self.pairs:
            return (f"anchors {self.slot} {self.spec}  no anchor set yet: this run freezes "
                    "it from its own scores, $0")
        if self.measured_by:
            return (f"anchors {self.slot} {self.spec}  {self.pairs:,} anchors re-judged "
                    f"today by run {self.measured_by}: used again, $0")
        if self.spec.startswith("local:"):
            return f"{head}  local judge: re-judged, no request, $0"
        return (f"{head}  to pay {self.requests:,}  ~{self.input_tokens:,} input tokens  "
                f"~{self.output_tokens:,} output tokens  ~{usd(self.cost_usd)} "
                f"(at most {usd(self.max_cost_usd)})")


def anchor_estimates(conn: psycopg.Connection, settings: Settings, prices: PriceTable,
                     specs: Sequence[str], dataset: str) -> list[AnchorEstimate]:
    """Each judge's anchor requests for ``dataset`` (frozen anchors in ``judge_anchors``)."""
    frozen = sql.frozen_anchors(conn, dataset)
    out = []
    for number, spec in enumerate(specs, start=1):
        rows = [r for r in frozen if r[0] == number]
        estimate = AnchorEstimate(f"judge{number}", spec, len(rows))
        provider, model = spec.split(":", 1)
        judge = None if provider == "local" else planning_judge(settings, spec)
        version = (LOCAL_PROMPT_VERSION if judge is None
                   else judge.relevance_request("", "").prompt_version)
        today = (sql.measured_today(conn, dataset, number, spec, version,
                                    human_fingerprint(rows)) if rows else None)
        if today is not None:  # once per UTC day (eval_harness.judges.anchors.nightly)
            estimate.measured_by = today[0]
        elif judge is not None:
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
