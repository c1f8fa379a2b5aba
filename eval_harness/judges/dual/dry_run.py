"""``eval-harness judge --dry-run``: what a judge run would send and roughly what it would cost,
without sending or writing anything.

The pairs are planned by the same :func:`~eval_harness.judges.dual.plan.plan_queries` a real
run uses, kept to the same shard (``--shard``:
:func:`~eval_harness.judges.dual.shards.queries_of_shard`), and every paid judge's request is built
by the same
:meth:`LLMJudge.relevance_request <eval_harness.judges.llm.LLMJudge.relevance_request>` (same
prompt, same server in the cache key), so "cached" means exactly "the real run would answer
it from ``judge_cache``". No provider client is built: the judge gets no pipeline, only the
normalised base URL its provider would talk to. The store is only read.

Per judge (after the same key fallback a real run does):

* ``pairs``: the (query, document) pairs it would judge;
* ``cached``: pairs whose request is in the reply cache (free);
* ``repeated``: pairs whose request another uncached pair of the run already asks (identical
  query and document text): the real run pays once and answers the others from that reply;
* ``in_open_batch`` (``--batch`` only): requests a still-running provider batch holds; the
  run collects them instead of submitting them again (their cost is counted when that batch
  ends, not in this estimate);
* ``to_pay``: the distinct requests the run would send and pay for: the number of first asks.
  A reply that does not parse is asked once more (a second paid call), which no estimate can
  foresee; ``--retry-unscored`` re-asks are not estimated either.

Estimates, for the requests to pay for only (the rules are
:mod:`eval_harness.judges.client.pricing`'s):

* input tokens: ``ceil(characters / 4)`` of the system prompt and messages plus
  :data:`~eval_harness.judges.client.pricing.MESSAGE_OVERHEAD_TOKENS` per message (the system
  prompt counts as one), the usual rule of thumb for English text with chat framing; a real
  tokenizer can differ by some 10-20% on other languages or code;
* output tokens: a typical reply
  (:data:`~eval_harness.judges.client.pricing.TYPICAL_REPLY_TOKENS`: a relevance reply is one
  number), not the ``max_tokens`` ceiling;
* ``cost_usd``: those tokens at the model's price in ``judges.prices`` (the batch discount
  with ``--batch``), none of them assumed served from the provider's prompt cache;
* ``max_cost_usd``: the upper bound the run's budget reserves per call
  (:meth:`PriceTable.worst_case <eval_harness.judges.client.pricing.PriceTable.worst_case>`: three
  characters per token and the full ``max_tokens`` of output).

Local judges send nothing and cost 0.

With staged judging (``judges.staged``) judge 2 is asked for a growing seeded sample of
queries until kappa's lower bound on it clears the floor, which depends on the replies: its
figures are then a range, ``at_least`` its first sample (the staged run's own order,
:func:`~eval_harness.judges.staging.staged.sample_order`), the figures themselves every query
(the bound never clears). A staged batch run asks judge 2 live: so is it priced.

With test-retest on (``judges.retest`` or ``judge --retest``), each judge's retest requests
(every pair of the seeded query sample, ``repeats`` times, live, past the cache) are priced on
a line of their own, ``retest judge1 ...`` (:mod:`eval_harness.judges.retest.cost`), and
counted in the total. With ``judges.anchors`` on, re-judging the frozen anchor set is priced
the same way, one request per anchor and LLM judge, on lines ``anchors judge1 ...`` (none
before the set is frozen; :mod:`eval_harness.judges.anchors.cost`). Each of the two steps'
totals is set against its own budget line (``judges.retest.budget_usd``,
``judges.anchors.budget_usd``: :class:`BudgetLineEstimate`), apart from the labels'
``judges.budget_usd``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import psycopg

from eval_harness.judges.anchors.cost import anchor_estimates
from eval_harness.judges.client import sql
from eval_harness.judges.client.pricing import (ESTIMATE_BASIS, PriceTable,
                                                estimated_input_tokens,
                                                estimated_output_tokens, usd)
from eval_harness.judges.client.reply_cache import cache_key, cached_keys_among
from eval_harness.judges.client.session import (FallbackNotices, planning_judge,
                                               resolve_judge_specs)
from eval_harness.judges.dual.plan import (PlannedQuery, load_documents, plan_queries,
                                           relevance_requests)
from eval_harness.judges.dual.shards import queries_of_shard
from eval_harness.judges.protocol import Passage, Usage
from eval_harness.judges.retest.cost import retest_estimates
from eval_harness.judges.staging.staged import first_sample, stop_rule
from eval_harness.settings import Settings


@dataclass
class JudgeEstimate:
    """What one judge of the run would do and cost (see the module docstring)."""

    slot: str
    spec: str
    pairs: int = 0
    cached: int = 0
    repeated: int = 0
    in_open_batch: int = 0
    to_pay: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    max_cost_usd: float = 0.0
    # judge 2 under judges.staged: the same figures for its first sample, the least it asks
    # (the fields above are the most: every query, when kappa's bound never clears the floor)
    at_least: "JudgeEstimate | None" = None
    sample_queries: tuple[int, int] | None = None  # (first sample, every query) with at_least

    @property
    def local(self) -> bool:
        return self.spec.startswith("local:")

    def format(self) -> str:
        if self.at_least is not None:
            return self._format_range()
        head = f"{self.slot} {self.spec}  pairs {self.pairs:,}"
        if self.local:
            return f"{head}  local judge: no request, $0"
        return (f"{head} ({self._free()})  to pay {self.to_pay:,}  "
                f"~{self.input_tokens:,} input tokens  ~{self.output_tokens:,} output tokens  "
                f"~{usd(self.cost_usd)} (at most {usd(self.max_cost_usd)})")

    def _free(self) -> str:
        free = [f"{self.cached:,} cached"]
        if self.repeated:
            free.append(f"{self.repeated:,} repeated")
        if self.in_open_batch:
            free.append(f"{self.in_open_batch:,} in an open batch")
        return ", ".join(free)

    def _format_range(self) -> str:
        """Staged judge 2: what it asks depends on kappa as the sample grows, so a range."""
        low, (first, every) = self.at_least, self.sample_queries
        head = (f"{self.slot} {self.spec}  staged: a sample of at least {first:,} and at most "
                f"{every:,} queries, pairs at least {low.pairs:,}, at most {self.pairs:,}")
        if self.local:
            return f"{head}  local judge: no request, $0"
        return (f"{head} ({self._free()} of the most)  to pay at least {low.to_pay:,}, at most "
                f"{self.to_pay:,}  ~{low.input_tokens:,}..{self.input_tokens:,} input tokens  "
                f"~{low.output_tokens:,}..{self.output_tokens:,} output tokens  "
                f"~{usd(low.cost_usd)}..{usd(self.cost_usd)} "
                f"(at most {usd(self.max_cost_usd)})")


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
        limit = "no limit" if self.budget_usd is None else usd(self.budget_usd)
        return (f"budget line {self.key} ({self.step}): {limit}; {self.requests:,} requests "
                f"~{usd(self.cost_usd)} (at most {usd(self.max_cost_usd)}) {self.verdict}")


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
class DryRunReport:
    """A judge run's plan and cost estimate; nothing was sent or written."""

    dataset: str
    mode: str                      # "live" | "batch"
    queries: int
    pairs: int
    judges: list[JudgeEstimate]
    notices: tuple[str, ...] = ()
    budget_usd: float | None = None
    estimate_basis: str = ESTIMATE_BASIS
    by_provider: dict[str, dict] = field(default_factory=dict)
    shard: str | None = None       # "i/n": only that shard's queries are planned
    staged: dict | None = None     # judges.staged when on: seed, first_queries, step, floor,
                                   # the stop rule (looks, look_confidence, stop_rule)
    retest: list = field(default_factory=list)  # judges.retest / --retest: RetestEstimate
    anchors: list = field(default_factory=list)  # judges.anchors: AnchorEstimate per judge
    budget_lines: list = field(default_factory=list)  # BudgetLineEstimate: retest, anchors

    @property
    def _extra(self) -> list:
        return [*self.retest, *self.anchors]  # past the cache: retests and anchors

    @property
    def _retest_to_pay(self) -> int:
        return sum(r.requests for r in self._extra)

    @property
    def to_pay(self) -> int:
        """Requests to pay for; with staged judging, the most (judge 2 on every query)."""
        return sum(j.to_pay for j in self.judges) + self._retest_to_pay

    @property
    def to_pay_at_least(self) -> int:
        """Requests to pay for at least (judge 2 stops after its first sample)."""
        return sum((j.at_least or j).to_pay for j in self.judges) + self._retest_to_pay

    @property
    def cost_usd(self) -> float:
        return sum(j.cost_usd for j in self.judges) + sum(r.cost_usd for r in self._extra)

    @property
    def cost_usd_at_least(self) -> float:
        return (sum((j.at_least or j).cost_usd for j in self.judges)
                + sum(r.cost_usd for r in self._extra))

    @property
    def max_cost_usd(self) -> float:
        return (sum(j.max_cost_usd for j in self.judges)
                + sum(r.max_cost_usd for r in self._extra))

    def to_dict(self) -> dict:
        """Strict JSON. With staged judging, a judge's and the total's figures are the most
        the run can ask; ``at_least`` / ``to_pay_at_least`` the least."""
        return {"dry_run": True, "dataset": self.dataset, "mode": self.mode,
                "shard": self.shard, "staged": self.staged,
                "queries": self.queries, "pairs": self.pairs,
                "judges": [dict(asdict(j), local=j.local) for j in self.judges],
                "by_provider": self.by_provider,
                "retest": [asdict(r) for r in self.retest],
                "anchors": [asdict(a) for a in self.anchors],
                "budget_lines": [line.to_dict() for line in self.budget_lines],
                "total": {"to_pay": self.to_pay, "to_pay_at_least": self.to_pay_at_least,
                          "input_tokens": sum(j.input_tokens for j in self.judges),
                          "output_tokens": sum(j.output_tokens for j in self.judges),
                          "cost_usd": self.cost_usd,
                          "cost_usd_at_least": self.cost_usd_at_least,
                          "max_cost_usd": self.max_cost_usd},
                "budget_usd": self.budget_usd, "notices": list(self.notices),
                "estimate_basis": self.estimate_basis}

    def format(self) -> str:
        shard = f", shard {self.shard}" if self.shard else ""
        lines = [f"dry run of judging dataset '{self.dataset}'{shard} ({self.mode} mode): "
                 f"{self.queries:,} queries, {self.pairs:,} pairs; nothing sent, nothing written"]
        if self.staged:
            staged = self.staged
            lines.append(
                f"staged judging: judge 2 is asked for a seeded sample of "
                f"{staged['first_queries']} queries, {staged['step_queries']} more per step "
                f"until the {staged['stop_rule']} on it reaches {staged['kappa_floor']:.2f}; "
                "how many steps that takes depends on the replies, so judge 2's figures are a "
                "range")
        lines += [judge.format() for judge in self.judges]
        lines += [r.format() for r in self._extra]
        lines += [line.format() for line in self.budget_lines]
        if self.to_pay_at_least != self.to_pay:
            total = (f"total  to pay at least {self.to_pay_at_least:,}, at most "
                     f"{self.to_pay:,} requests  ~{usd(self.cost_usd_at_least)}.."
                     f"{usd(self.cost_usd)} (at most {usd(self.max_cost_usd)})")
        else:
            total = (f"total  to pay {self.to_pay:,} requests  ~{usd(self.cost_usd)} "
                     f"(at most {usd(self.max_cost_usd)})")
        if self.budget_usd is not None:  # the labels' budget: retests and anchors have lines
            labels = sum(j.max_cost_usd for j in self.judges)
            fits = "fits" if labels <= self.budget_usd else (
                "may stop the run early" if sum(j.cost_usd for j in self.judges)
                <= self.budget_usd else "would stop the run early")
            total += (f"; budget {usd(self.budget_usd)} per run (judges.budget_usd, the "
                      f"labels) {fits}")
        lines += [total, f"estimates: {self.estimate_basis}"]
        lines += [f"note: {notice}" for notice in self.notices]
        return "\n".join(lines)


def estimate_judge_run(conn: psycopg.Connection, settings: Settings, dataset: str, *,
                       limit: int | None = None, batch: bool = False,
                       shard: tuple[int, int] | None = None) -> DryRunReport:
    """Plan ``dataset``'s judge run like :func:`~eval_harness.judges.dual.run.judge_dataset` and
    estimate it per judge (see the module docstring). Only reads the store.

    ``shard=(i, n)`` plans only that shard's queries, as ``judge --shard i/n`` does. With
    ``judges.staged`` on, judge 2's figures are a range: at least its first sample (in the
    staged run's seeded order), at most every query; with ``batch`` it is asked live, as the
    staged batch run asks it.

    Raises :class:`~eval_harness.judges.client.session.JudgeUnavailable` or
    :class:`~eval_harness.judges.client.pricing.MissingPrice` where the real run would.
    """
    spec1, spec2, notices = resolve_judge_specs(settings, notices=FallbackNotices())
    planned = queries_of_shard(plan_queries(conn, dataset, settings, limit=limit), shard)
    documents = load_documents(conn, dataset, [d for p in planned for d in p.doc_ids],
                               with_embeddings=False)
    staged = settings.judges.staged
    prices = PriceTable(settings.judges.prices)
    seen: set[str] = set()  # uncached keys an earlier pair (of either judge) already asks
    estimates = []
    first = first_sample(planned, staged) if staged.enabled else planned
    for slot, spec in (("judge1", spec1), ("judge2", spec2)):
        sampled = staged.enabled and slot == "judge2"
        by_batch = batch and not sampled  # a staged batch run asks judge 2 live
        if sampled and len(first) < len(planned):
            low = _estimate(conn, settings, prices, slot, spec, first, documents,
                            batch=by_batch, seen=set(seen))
        estimate = _estimate(conn, settings, prices, slot, spec, planned, documents,
                             batch=by_batch, seen=seen)
        if sampled and len(first) < len(planned):
            estimate.at_least, estimate.sample_queries = low, (len(first), len(planned))
        estimates.append(estimate)
    report = DryRunReport(dataset, "batch" if batch else "live", len(planned),
                          sum(len(p.doc_ids) for p in planned), estimates, notices,
                          settings.judges.budget_usd,
                          shard=None if shard is None else f"{shard[0]}/{shard[1]}",
                          staged=None if not staged.enabled else _staged_plan(
                              settings, len(planned)))
    report.by_provider = _by_provider(estimates)
    if settings.judges.retest.enabled:
        report.retest = retest_estimates(settings, prices, (spec1, spec2), planned, documents)
    if settings.judges.anchors.enabled:
        report.anchors = anchor_estimates(conn, settings, prices, (spec1, spec2), dataset)
    report.budget_lines = budget_lines(settings, report.retest, report.anchors)
    return report


def _staged_plan(settings: Settings, n_queries: int) -> dict:
    """judges.staged as the dry run shows it, with the stop rule a staged run would read."""
    staged = settings.judges.staged
    rule = stop_rule(settings.agreement, staged, n_queries)
    return {"seed": staged.seed, "first_queries": staged.first_queries,
            "step_queries": staged.step_queries, "kappa_floor": rule.floor,
            "looks": rule.looks, "look_confidence": rule.look_confidence,
            "stop_rule": rule.describe()}


def _estimate(conn: psycopg.Connection, settings: Settings, prices: PriceTable, slot: str,
              spec: str, planned: Sequence[PlannedQuery], documents: dict[int, Passage], *,
              batch: bool, seen: set[str]) -> JudgeEstimate:
    """One judge's figures over ``planned``: its requests not in the cache, nor in an open
    batch (``batch``), nor already asked (``seen``, which gains the ones to pay)."""
    estimate = JudgeEstimate(slot, spec, pairs=sum(len(p.doc_ids) for p in planned))
    provider, model = spec.split(":", 1)
    if provider == "local":
        return estimate
    prices.require(model, spec)
    judge = planning_judge(settings, spec)
    requests = relevance_requests(judge, planned, documents)
    keys = [cache_key(r) for r in requests]
    cached = cached_keys_among(conn, keys)
    pending = _in_open_batches(conn, provider, set(keys) - cached) if batch else set()
    for request, key in zip(requests, keys):
        if key in cached:
            estimate.cached += 1
        elif key in pending:
            estimate.in_open_batch += 1
        elif key in seen:
            estimate.repeated += 1
        else:
            seen.add(key)
            estimate.to_pay += 1
            estimate.input_tokens += estimated_input_tokens(request)
            estimate.output_tokens += estimated_output_tokens(request)
            estimate.max_cost_usd += prices.worst_case(request, batch=batch)
    estimate.cost_usd = prices.cost(model, Usage(estimate.input_tokens, estimate.output_tokens),
                                    batch=batch)
    return estimate


def _in_open_batches(conn: psycopg.Connection, provider: str, keys: set[str]) -> set[str]:
    if not keys:
        return set()
    held = set()
    for _, requests, _ in sql.open_batch_rows(conn, provider, sorted(keys)):
        held.update(k for k in requests if k in keys)
    return held


def _by_provider(estimates: Sequence[JudgeEstimate]) -> dict[str, dict]:
    totals: dict[str, dict] = {}
    for judge in estimates:
        entry = totals.setdefault(judge.spec.split(":", 1)[0], {
            "to_pay": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
            "max_cost_usd": 0.0})
        for name in entry:
            entry[name] += getattr(judge, name)
    return totals
