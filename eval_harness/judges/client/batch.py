"""Batch mode for nightly runs: Anthropic Message Batches and OpenAI Batch, at the batch price.

Batch mode fills the reply cache; it does not parse anything itself. For a planned set of
requests, :func:`prefill_cache_by_batch`

1. drops requests the cache already answers and duplicates;
2. per provider, holding that provider's batch-submission lock (see
   :meth:`JudgeLedger.batch_submission`), looks up the open batches in ``judge_batches``
   that hold any of the remaining requests (an earlier run submitted them, then was killed
   or stopped waiting). Each is asked for its state: one the provider no longer knows (404)
   is marked abandoned and its requests count as not submitted; the others are *resumed*:
   polled like a new batch, their requests not submitted again;
3. reserves each remaining request's worst-case batch cost against the run's budget,
   submitting only what fits (the run is then marked stopped by the budget), submits one
   batch per provider (custom id = the request's cache key) and registers it in
   ``judge_batches``, committed as soon as the provider has accepted it. A provider that
   refuses the batch because the account has no quota left, or rejects the key, stops the
   run (kind ``quota`` / ``auth``, see :mod:`.runner`): the live phase then sends nothing
   either;
4. polls every batch, resumed or new, every ``judges.batch.poll_interval_seconds`` until it
   ends or ``max_wait_seconds`` pass (a transient error while polling is one more poll), or
   the run is stopped by the user or a lost store (the batches go on at the provider);
5. stores an ended batch's successful results like live calls, one ``api_cost_log`` row
   each with ``batch = true`` and the provider's batch discount applied, and the reply in
   the cache, in the transaction that marks the batch ended: they are stored once, by
   whichever run ends the batch (every result of the batch, planned by this run or not).
   A resumed batch's cost was not reserved by this run; it is charged to its budget.

The judges then run exactly as in live mode and find their replies in the cache, so parsing,
re-asks, storage and statistics are the same code path. Requests the batch did not answer
(errored, expired, or the batch was lost) and the re-asks of unparseable replies are made
live afterwards. Requests of a batch still running when ``max_wait_seconds`` pass are *not*
made live (the provider bills the batch anyway): they fail with kind ``batch_pending``, the
run reports the batch ids, and the next batch run resumes polling them.

What is not covered: a process killed between the provider accepting a batch and the
registration's commit (a few milliseconds) leaves a batch nobody will poll.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from eval_harness.judges.client.ledger import BatchedRequest, BatchReply, JudgeLedger
from eval_harness.judges.client.limiter import Clock, Sleep
from eval_harness.judges.client.providers.base import BatchState, ChatClient
from eval_harness.judges.client.retry import classify_error
from eval_harness.judges.client.runner import CallPipeline
from eval_harness.judges.client.stops import auth_message, quota_message, wait_unless
from eval_harness.judges.protocol import ChatRequest, Completion
from eval_harness.settings.judges import BatchSettings

# final provider statuses of a batch that ran to its end; any other final status (expired,
# cancelled, failed) closes the batch as abandoned, after storing whatever results it has
_COMPLETED = ("ended", "completed")


@dataclass
class BatchReport:
    batches: int = 0                # submitted by this run
    submitted: int = 0              # requests submitted by this run
    resumed_batches: int = 0        # open batches of earlier runs polled instead
    resumed: int = 0                # planned requests found in those batches
    abandoned_batches: int = 0      # batches the provider no longer knew
    succeeded: int = 0              # results stored (paid) by this run
    errored: int = 0                # planned requests a batch did not answer: made live
    unfinished: int = 0             # planned requests in batches still running: run again
    already_cached: int = 0
    not_submitted_budget: int = 0
    cost_usd: float = 0.0
    pending_batch_ids: list[str] = field(default_factory=list)


@dataclass
class _Batch:
    """A batch this run polls: submitted now or resumed."""

    provider: str
    batch_id: str
    requests: dict[str, BatchedRequest]  # every request of the batch, by cache key
    planned: set[str]                    # those this run's judges will ask for
    reserved: dict[str, float] = field(default_factory=dict)  # budget held by this run
    status: str = "submitted"


async def prefill_cache_by_batch(pipeline: CallPipeline[JudgeLedger],
                                 planned: Sequence[tuple[ChatRequest, int | None]],
                                 settings: BatchSettings, *, sleep: Sleep = asyncio.sleep,
                                 clock: Clock = time.monotonic) -> BatchReport:
    """Answer ``planned`` (request, query id) pairs through the providers' batch APIs."""
    report = BatchReport()
    unique: dict[str, tuple[ChatRequest, int | None]] = {}
    for request, query_id in planned:
        if request.provider in pipeline.providers:
            unique.setdefault(pipeline.cache_key(request), (request, query_id))
    batches: list[_Batch] = []
    for provider_name, provider in pipeline.providers.items():
        mine = [key for key, item in unique.items() if item[0].provider == provider_name]
        if not mine:
            continue
        with pipeline.ledger.batch_submission(provider_name):
            # cache and open batches are looked up under the lock: what another run submitted
            # or stored meanwhile is seen, not submitted again
            cached = pipeline.ledger.cached_keys(mine)
            report.already_cached += len(cached)
            wanted = {key: unique[key] for key in mine if key not in cached}
            if not wanted:
                continue
            resumed = await _resume_open_batches(pipeline, provider, set(wanted), report)
            held = {key for batch in resumed for key in batch.planned}
            batches += resumed
            new = await _submit(pipeline, provider,
                                {k: v for k, v in wanted.items() if k not in held}, report)
            if new is not None:
                batches.append(new)
    try:
        await _wait_and_store(pipeline, batches, settings, report, sleep=sleep, clock=clock)
    finally:
        for batch in batches:
            _release(pipeline, batch)
        pipeline.ledger.flush()
    return report


async def _resume_open_batches(pipeline: CallPipeline[JudgeLedger], provider: ChatClient,
                               wanted: set[str], report: BatchReport) -> list[_Batch]:
    """The open batches of earlier runs that hold some of ``wanted``; lost ones abandoned."""
    resumed: list[_Batch] = []
    held: set[str] = set()
    for open_batch in pipeline.ledger.open_batches(provider.name, sorted(wanted)):
        if await _state(provider, open_batch.batch_id) is None:
            pipeline.ledger.abandon_batch(provider.name, open_batch.batch_id)
            report.abandoned_batches += 1
            continue
        planned = (set(open_batch.requests) & wanted) - held
        held |= planned
        resumed.append(_Batch(provider.name, open_batch.batch_id, open_batch.requests, planned))
        report.resumed_batches += 1
        report.resumed += len(planned)
    return resumed


async def _submit(pipeline: CallPipeline[JudgeLedger], provider: ChatClient,
                  wanted: dict[str, tuple[ChatRequest, int | None]],
                  report: BatchReport) -> _Batch | None:
    """Submit what the budget allows of ``wanted`` as one batch and register it."""
    items, reserved = [], {}
    for key, (request, query_id) in wanted.items():
        reserve = pipeline.prices.worst_case(request, batch=True)
        if pipeline.stopped or not pipeline.budget.try_reserve(reserve):
            if not pipeline.stopped:
                pipeline.stop("budget", pipeline.budget.exhausted_message(reserve))
            report.not_submitted_budget += 1
            continue
        items.append((key, request, query_id))
        reserved[key] = reserve
    if not items:
        return None
    try:
        batch_id = await provider.submit_batch([(key, request) for key, request, _ in items])
    except BaseException as exc:
        for reserve in reserved.values():
            pipeline.budget.settle(reserve, 0.0)
        error = classify_error(exc, provider.name) if isinstance(exc, Exception) else None
        if error is not None and error.kind == "quota":  # the live calls then stop at once
            pipeline.stop("quota", quota_message(provider.name, pipeline.base_url(provider.name),
                                                 error))
            return None
        if error is not None and error.kind == "auth":  # a rejected key: the same
            pipeline.stop("auth", auth_message(provider.name, pipeline.base_url(provider.name),
                                               error))
            return None
        raise
    requests = {key: BatchedRequest.of(request, query_id) for key, request, query_id in items}
    batch = _Batch(provider.name, batch_id, requests, set(requests), reserved)
    pipeline.ledger.register_batch(provider.name, batch_id, requests)
    report.batches += 1
    report.submitted += len(items)
    pipeline.stats.batch_requests += len(items)
    return batch


async def _wait_and_store(pipeline: CallPipeline[JudgeLedger], batches: list[_Batch],
                          settings: BatchSettings, report: BatchReport, *, sleep: Sleep,
                          clock: Clock) -> None:
    deadline = clock() + settings.max_wait_seconds
    pending = list(batches)
    while pending and not pipeline.halted.is_set():
        for batch in list(pending):
            if await _poll(pipeline, batch, report):
                pending.remove(batch)
        if pending:
            if clock() >= deadline:
                break
            # a stop signal or a lost store ends the wait (the batches keep running at the
            # provider, and the next batch run collects them)
            await wait_unless(pipeline.halted, sleep(settings.poll_interval_seconds))
    for batch in pending:  # still running: billed anyway, so its requests are not made live
        message = (f"the reply is in {batch.provider} batch {batch.batch_id}, still "
                   f"{batch.status} after judges.batch.max_wait_seconds "
                   f"({settings.max_wait_seconds:g} s); run the batch judge again later to "
                   "collect it (it is not submitted or paid again)")
        for key in batch.planned:
            pipeline.awaiting_batch[key] = message
        report.unfinished += len(batch.planned)
        report.pending_batch_ids.append(batch.batch_id)


async def _poll(pipeline: CallPipeline[JudgeLedger], batch: _Batch,
                report: BatchReport) -> bool:
    """Poll ``batch`` once; True when it is settled (results stored, or lost)."""
    provider = pipeline.providers[batch.provider]
    state = await _state(provider, batch.batch_id)
    if state is not None:
        batch.status = state.status
        if not state.done:
            return False
        try:
            results = await provider.batch_results(batch.batch_id)
        except Exception as exc:
            error = classify_error(exc, provider.name)
            if error.status_code != 404:
                if error.retryable:
                    return False  # asked again at the next poll
                raise
        else:
            _store(pipeline, batch, results, report,
                   status="ended" if state.status in _COMPLETED else "abandoned")
            return True
    # the provider no longer has the batch (or its results): its requests are made live
    pipeline.ledger.abandon_batch(batch.provider, batch.batch_id)
    report.abandoned_batches += 1
    report.errored += len(batch.planned)
    return True


async def _state(provider: ChatClient, batch_id: str) -> BatchState | None:
    """The batch's state; None when the provider does not know it (any more). A transient
    error reads as "not ended yet": the batch is polled again."""
    try:
        return await provider.batch_state(batch_id)
    except Exception as exc:
        error = classify_error(exc, provider.name)
        if error.status_code == 404:
            return None
        if error.retryable:
            return BatchState(False, f"unknown ({error.kind} while polling)")
        raise


def _store(pipeline: CallPipeline[JudgeLedger], batch: _Batch,
           results: dict[str, Completion | str], report: BatchReport, *, status: str) -> None:
    replies = [BatchReply(key, request, got,
                          pipeline.prices.cost(request.model, got.usage, batch=True))
               for key, request in batch.requests.items()
               if isinstance(got := results.get(key), Completion)]
    if pipeline.ledger.record_batch_results(batch.provider, batch.batch_id, replies,
                                            status=status):
        for reply in replies:
            reserved = batch.reserved.pop(reply.key, None)
            if reserved is None:
                pipeline.budget.charge(reply.cost)
            else:
                pipeline.budget.settle(reserved, reply.cost)
            pipeline.stats.add_billed(reply.completion, reply.cost)
            report.succeeded += 1
            report.cost_usd += reply.cost
    # else another run ended this batch meanwhile: its replies are in the cache already
    report.errored += len(batch.planned - {reply.key for reply in replies})


def _release(pipeline: CallPipeline[JudgeLedger], batch: _Batch) -> None:
    """Give back the budget still reserved for ``batch``'s requests (not answered here)."""
    for reserve in batch.reserved.values():
        pipeline.budget.settle(reserve, 0.0)
    batch.reserved.clear()
