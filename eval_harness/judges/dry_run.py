"""``eval-harness judge --dry-run``: what a judge run would send and roughly what it would cost,
without sending or writing anything.

The pairs are planned by the same :func:`~eval_harness.judges.dual_plan.plan_queries` a real
run uses, and every paid judge's request is built by the same
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

Estimates, for the requests to pay for only:

* input tokens: ``ceil(characters / 4)`` of the system prompt and messages plus
  :data:`MESSAGE_OVERHEAD_TOKENS` per message (the system prompt counts as one), the usual
  rule of thumb for English text with chat framing; a real tokenizer can differ by some
  10-20% on other languages or code;
* output tokens: a typical reply (:data:`TYPICAL_REPLY_TOKENS`: a relevance reply is one
  number), not the ``max_tokens`` ceiling;
* ``cost_usd``: those tokens at the model's price in ``judges.prices`` (the batch discount
  with ``--batch``), none of them assumed served from the provider's prompt cache;
* ``max_cost_usd``: the upper bound the run's budget reserves per call
  (:meth:`PriceTable.worst_case <eval_harness.judges.pricing.PriceTable.worst_case>`: three
  characters per token and the full ``max_tokens`` of output).

Local judges send nothing and cost 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import psycopg

from eval_harness.judges import queries
from eval_harness.judges.dual_plan import PlannedQuery, load_documents, plan_queries
from eval_harness.judges.endpoints import endpoint_of
from eval_harness.judges.pricing import PriceTable
from eval_harness.judges.protocol import ChatRequest, Passage, Usage
from eval_harness.judges.session import FallbackNotices, JudgeUnavailable, resolve_judge_specs
from eval_harness.settings import Settings

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
TYPICAL_REPLY_TOKENS = {"relevance": 4}  # "0.7" and an end token; other operations: max_tokens
ESTIMATE_BASIS = (f"input ~ characters/{CHARS_PER_TOKEN} + {MESSAGE_OVERHEAD_TOKENS} per "
                  "message; output = a typical reply (one number); at most = the budget's "
                  "worst case (characters/3, full max_tokens)")


def estimated_input_tokens(request: ChatRequest) -> int:
    """The input tokens ``request`` is expected to be billed (see the module docstring)."""
    chars = len(request.system) + sum(len(m.content) for m in request.messages)
    messages = len(request.messages) + 1  # the system prompt is a message too
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * messages


def estimated_output_tokens(request: ChatRequest) -> int:
    """A typical reply's tokens for the request's operation, never above its ``max_tokens``."""
    return min(request.max_tokens, TYPICAL_REPLY_TOKENS.get(request.operation,
                                                            request.max_tokens))


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

    @property
    def local(self) -> bool:
        return self.spec.startswith("local:")

    def format(self) -> str:
        head = f"{self.slot} {self.spec}  pairs {self.pairs:,}"
        if self.local:
            return f"{head}  local judge: no request, $0"
        free = [f"{self.cached:,} cached"]
        if self.repeated:
            free.append(f"{self.repeated:,} repeated")
        if self.in_open_batch:
            free.append(f"{self.in_open_batch:,} in an open batch")
        return (f"{head} ({', '.join(free)})  to pay {self.to_pay:,}  "
                f"~{self.input_tokens:,} input tokens  ~{self.output_tokens:,} output tokens  "
                f"~{_usd(self.cost_usd)} (at most {_usd(self.max_cost_usd)})")


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

    @property
    def to_pay(self) -> int:
        return sum(j.to_pay for j in self.judges)

    @property
    def cost_usd(self) -> float:
        return sum(j.cost_usd for j in self.judges)

    @property
    def max_cost_usd(self) -> float:
        return sum(j.max_cost_usd for j in self.judges)

    def to_dict(self) -> dict:
        return {"dry_run": True, "dataset": self.dataset, "mode": self.mode,
                "queries": self.queries, "pairs": self.pairs,
                "judges": [dict(asdict(j), local=j.local) for j in self.judges],
                "by_provider": self.by_provider,
                "total": {"to_pay": self.to_pay,
                          "input_tokens": sum(j.input_tokens for j in self.judges),
                          "output_tokens": sum(j.output_tokens for j in self.judges),
                          "cost_usd": self.cost_usd, "max_cost_usd": self.max_cost_usd},
                "budget_usd": self.budget_usd, "notices": list(self.notices),
                "estimate_basis": self.estimate_basis}

    def format(self) -> str:
        lines = [f"dry run of judging dataset '{self.dataset}' ({self.mode} mode): "
                 f"{self.queries:,} queries, {self.pairs:,} pairs; nothing sent, nothing written"]
        lines += [judge.format() for judge in self.judges]
        total = (f"total  to pay {self.to_pay:,} requests  ~{_usd(self.cost_usd)} "
                 f"(at most {_usd(self.max_cost_usd)})")
        if self.budget_usd is not None:
            fits = "fits" if self.max_cost_usd <= self.budget_usd else (
                "may stop the run early" if self.cost_usd <= self.budget_usd
                else "would stop the run early")
            total += f"; budget {_usd(self.budget_usd)} per run {fits}"
        lines += [total, f"estimates: {self.estimate_basis}"]
        lines += [f"note: {notice}" for notice in self.notices]
        return "\n".join(lines)


def _usd(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def estimate_judge_run(conn: psycopg.Connection, settings: Settings, dataset: str, *,
                       limit: int | None = None, batch: bool = False) -> DryRunReport:
    """Plan ``dataset``'s judge run like :func:`~eval_harness.judges.dual.judge_dataset` and
    estimate it per judge (see the module docstring). Only reads the store.

    Raises :class:`~eval_harness.judges.session.JudgeUnavailable` or
    :class:`~eval_harness.judges.pricing.MissingPrice` where the real run would.
    """
    from eval_harness.judges.llm import LLMJudge

    spec1, spec2, notices = resolve_judge_specs(settings, notices=FallbackNotices())
    planned = plan_queries(conn, dataset, settings, limit=limit)
    documents = load_documents(conn, dataset, [d for p in planned for d in p.doc_ids],
                               with_embeddings=False)
    prices = PriceTable(settings.judges.prices)
    seen: set[str] = set()  # uncached keys an earlier pair (of either judge) already asks
    estimates = []
    for slot, spec in (("judge1", spec1), ("judge2", spec2)):
        estimate = JudgeEstimate(slot, spec, pairs=sum(len(p.doc_ids) for p in planned))
        estimates.append(estimate)
        provider, model = spec.split(":", 1)
        if provider == "local":
            continue
        prices.require(model, spec)
        judge = LLMJudge(spec, None, settings.judges, base_url=_server(settings, provider))
        requests = _requests(judge, planned, documents)
        keys = [r.cache_key() for r in requests]
        cached = queries.cached_keys_among(conn, keys)
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
        estimate.cost_usd = prices.cost(model, Usage(estimate.input_tokens,
                                                     estimate.output_tokens), batch=batch)
    report = DryRunReport(dataset, "batch" if batch else "live", len(planned),
                          sum(len(p.doc_ids) for p in planned), estimates, notices,
                          settings.judges.budget_usd)
    report.by_provider = _by_provider(estimates)
    return report


def _server(settings: Settings, provider: str) -> str:
    """The normalised base URL ``provider``'s client would talk to (part of the cache key)."""
    base_url = {"openai": settings.openai_base_url,
                "anthropic": settings.anthropic_base_url}[provider]
    try:
        return endpoint_of(provider, base_url)
    except ValueError as exc:  # the value is not repeated: it may hold credentials
        raise JudgeUnavailable(f"{provider.upper()}_BASE_URL is not usable ({exc}); fix it, "
                               f"or unset it to use {provider}'s own API.") from None


def _requests(judge, planned: Sequence[PlannedQuery],
              documents: dict[int, Passage]) -> list[ChatRequest]:
    """The judge's first request for every planned pair, in the real run's order."""
    return [judge.relevance_request(plan.text, documents.get(doc_id) or Passage("", doc_id))
            for plan in planned for doc_id in plan.doc_ids]


def _in_open_batches(conn: psycopg.Connection, provider: str, keys: set[str]) -> set[str]:
    if not keys:
        return set()
    held = set()
    for _, requests, _ in queries.open_batch_rows(conn, provider, sorted(keys)):
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
