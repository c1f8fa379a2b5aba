"""Batch mode for nightly runs: Anthropic Message Batches and OpenAI Batch, at the batch price.

Batch mode fills the reply cache; it does not parse anything itself. For a planned set of
requests, :func:`prefill_cache_by_batch`

1. drops requests the cache already answers and duplicates;
2. reserves each request's worst-case batch cost against the run's budget, submitting only
   what fits (the run is then marked stopped by the budget);
3. submits one batch per provider (custom id = the request's cache key), polls every
   ``judges.batch.poll_interval_seconds`` until the batch ends or ``max_wait_seconds`` pass;
4. writes every successful result like a live call: one ``api_cost_log`` row with
   ``batch = true`` and the provider's batch discount applied, and the reply into the cache.

The judges then run exactly as in live mode and find their replies in the cache, so parsing,
re-asks, storage and statistics are the same code path. Requests the batch did not answer
(errored, expired, not finished in time) and the re-asks of unparseable replies are made
live afterwards.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Sequence

from eval_harness.judges.config import BatchSettings
from eval_harness.judges.limiter import Clock, Sleep
from eval_harness.judges.protocol import ChatRequest, Completion
from eval_harness.judges.runner import CallPipeline


@dataclass
class BatchReport:
    batches: int = 0
    submitted: int = 0
    succeeded: int = 0
    errored: int = 0
    unfinished: int = 0
    already_cached: int = 0
    not_submitted_budget: int = 0
    cost_usd: float = 0.0


async def prefill_cache_by_batch(pipeline: CallPipeline,
                                 planned: Sequence[tuple[ChatRequest, int | None]],
                                 settings: BatchSettings, *, sleep: Sleep = asyncio.sleep,
                                 clock: Clock = time.monotonic) -> BatchReport:
    """Answer ``planned`` (request, query id) pairs through the providers' batch APIs."""
    report = BatchReport()
    unique: dict[str, tuple[ChatRequest, int | None]] = {}
    for request, query_id in planned:
        if request.provider in pipeline.providers:
            unique.setdefault(request.cache_key(), (request, query_id))
    cached = pipeline.ledger.cached_keys(list(unique)) if unique else set()
    report.already_cached = len(cached)
    submitted: dict[str, tuple[str, list[tuple[str, ChatRequest, int | None, float]]]] = {}
    for provider_name, provider in pipeline.providers.items():
        items = []
        for key, (request, query_id) in unique.items():
            if request.provider != provider_name or key in cached:
                continue
            reserve = pipeline.prices.worst_case(request, batch=True)
            if pipeline.stopped or not pipeline.budget.try_reserve(reserve):
                if not pipeline.stopped:
                    pipeline.stopped = "budget"
                    pipeline.stop_reason = pipeline.budget.exhausted_message(reserve)
                report.not_submitted_budget += 1
                continue
            items.append((key, request, query_id, reserve))
        if not items:
            continue
        batch_id = await provider.submit_batch([(key, request) for key, request, _, _ in items])
        submitted[provider_name] = (batch_id, items)
        report.batches += 1
        report.submitted += len(items)
        pipeline.stats.batch_requests += len(items)
    deadline = clock() + settings.max_wait_seconds
    pending = dict(submitted)
    finished: dict[str, dict[str, Completion | str]] = {}
    while pending:
        for provider_name, (batch_id, _) in list(pending.items()):
            provider = pipeline.providers[provider_name]
            if (await provider.batch_state(batch_id)).done:
                finished[provider_name] = await provider.batch_results(batch_id)
                del pending[provider_name]
        if pending:
            if clock() >= deadline:
                break
            await sleep(settings.poll_interval_seconds)
    for provider_name, (_, items) in submitted.items():
        results = finished.get(provider_name)
        for key, request, query_id, reserve in items:
            reply = None if results is None else results.get(key)
            if isinstance(reply, Completion):
                cost = pipeline.prices.cost(request.model, reply.usage, batch=True)
                pipeline.ledger.record_call(request, reply, cost=cost, batch=True,
                                            query_id=query_id)
                pipeline.stats.add_billed(reply, cost)
                pipeline.budget.settle(reserve, cost)
                report.succeeded += 1
                report.cost_usd += cost
            else:
                pipeline.budget.settle(reserve, 0.0)
                if results is None:
                    report.unfinished += 1
                else:
                    report.errored += 1
    pipeline.ledger.flush()
    return report
