"""What test-retest and re-judging the anchor set cost (``judge --dry-run``): the retest
requests of each judge (every pair of the sampled queries, ``repeats`` times), one request
per frozen anchor of each LLM judge, all past the cache, each priced on its own line, and
each step's total against its own budget line (``judges.retest.budget_usd``,
``judges.anchors.budget_usd``), apart from the labels' ``judges.budget_usd``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.dual import anchor_sql
from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.protocol import Passage, Usage
from eval_harness.settings import Settings


def _usd(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


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
                f"~{self.output_tokens:,} output tokens  ~{_usd(self.cost_usd)} "
                f"(at most {_usd(self.max_cost_usd)})")


def anchor_estimates(conn: psycopg.Connection, settings: Settings, prices: PriceTable,
                     specs: Sequence[str], dataset: str) -> list[AnchorEstimate]:
    """Each judge's anchor requests for ``dataset`` (frozen anchors in ``judge_anchors``)."""
    from eval_harness.judges.dual.anchors import human_fingerprint
    from eval_harness.judges.dual.dry_run import (
        _server,
        estimated_input_tokens,
        estimated_output_tokens,
    )
    from eval_harness.judges.llm import LLMJudge
    from eval_harness.judges.local.relevance import LOCAL_PROMPT_VERSION

    frozen = anchor_sql.frozen_anchors(conn, dataset)
    out = []
    for number, spec in enumerate(specs, start=1):
        rows = [r for r in frozen if r[0] == number]
        estimate = AnchorEstimate(f"judge{number}", spec, len(rows))
        provider, model = spec.split(":", 1)
        judge = (None if provider == "local" else
                 LLMJudge(spec, None, settings.judges, base_url=_server(settings, provider)))
        version = (LOCAL_PROMPT_VERSION if judge is None
                   else judge.relevance_request("", "").prompt_version)
        today = (anchor_sql.measured_today(conn, dataset, number, spec, version,
                                           human_fingerprint(rows)) if rows else None)
        if today is not None:  # once per UTC day (eval_harness.judges.dual.anchor_nights)
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


@dataclass
class BudgetLineEstimate:
    """What one budget line (test-retest, anchors) is estimated to spend against its own
    limit (``judges.retest.budget_usd``, ``judges.anchors.budget_usd``; None = no limit)."""

    key: str
    step: str
    budget_usd: float | None
    requests: int
    cost_usd: float
    max_cost_usd: float

    @property
    def verdict(self) -> str:
        if self.budget_usd is None:
            return "no limit"
        if self.max_cost_usd <= self.budget_usd:
            return "fits"
        if self.cost_usd <= self.budget_usd:
            return f"may stop {self.step} early (the run goes on)"
        return f"would stop {self.step} early (the run goes on)"

    def to_dict(self) -> dict:
        return {"key": self.key, "step": self.step, "budget_usd": self.budget_usd,
                "requests": self.requests, "cost_usd": self.cost_usd,
                "max_cost_usd": self.max_cost_usd, "verdict": self.verdict}

    def format(self) -> str:
        limit = "no limit" if self.budget_usd is None else _usd(self.budget_usd)
        return (f"budget line {self.key} ({self.step}): {limit}; {self.requests:,} requests "
                f"~{_usd(self.cost_usd)} (at most {_usd(self.max_cost_usd)}) {self.verdict}")


def budget_lines(settings: Settings, retest: Sequence, anchors: Sequence
                 ) -> list[BudgetLineEstimate]:
    """Each step's estimate against its own budget line (none for a step that is off)."""
    judges = settings.judges
    out = []
    for estimates, key, step, limit in (
            (retest, "judges.retest.budget_usd", "test-retest", judges.retest.budget_usd),
            (anchors, "judges.anchors.budget_usd", "re-judging the anchors",
             judges.anchors.budget_usd)):
        if estimates:
            out.append(BudgetLineEstimate(
                key, step, limit, sum(e.requests for e in estimates),
                sum(e.cost_usd for e in estimates), sum(e.max_cost_usd for e in estimates)))
    return out


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
                f"~{self.output_tokens:,} output tokens  ~{_usd(self.cost_usd)} "
                f"(at most {_usd(self.max_cost_usd)})")


def retest_estimates(settings: Settings, prices: PriceTable, specs: Sequence[str],
                      planned: Sequence[PlannedQuery],
                      documents: dict[int, Passage]) -> list[RetestEstimate]:
    from eval_harness.judges.dual.dry_run import (
        _requests,
        _server,
        estimated_input_tokens,
        estimated_output_tokens,
    )
    from eval_harness.judges.dual.retest import retest_sample
    from eval_harness.judges.llm import LLMJudge

    retest = settings.judges.retest
    sample = retest_sample(planned, queries=retest.queries, seed=retest.seed)
    out = []
    for slot, spec in zip(("judge1", "judge2"), specs):
        estimate = RetestEstimate(slot, spec, len(sample), sum(len(p.doc_ids) for p in sample),
                                  retest.repeats)
        provider, model = spec.split(":", 1)
        if provider != "local":
            judge = LLMJudge(spec, None, settings.judges, base_url=_server(settings, provider))
            for request in _requests(judge, sample, documents):
                estimate.requests += retest.repeats
                estimate.input_tokens += retest.repeats * estimated_input_tokens(request)
                estimate.output_tokens += retest.repeats * estimated_output_tokens(request)
                estimate.max_cost_usd += retest.repeats * prices.worst_case(request)
            estimate.cost_usd = prices.cost(model, Usage(estimate.input_tokens,
                                                         estimate.output_tokens))
        out.append(estimate)
    return out
