"""The call pipeline every LLM judge call goes through.

    cache lookup -> budget check -> rate limiter -> provider -> retry -> cost + retry logging

* **Cache**: a request whose key is in the reply cache (:mod:`.reply_cache`) is answered from
  it (no provider call, no cost). Identical requests in flight at the same time share one
  provider call (:class:`~.reply_cache.InFlight`).
* **Budget**: before a call, its worst-case cost (estimated input, full ``max_tokens`` of
  output) is reserved against ``judges.budget_usd``; the reservation is replaced by the real
  cost when the call ends, so concurrent calls can never overshoot the budget together. A
  call that does not fit waits while other reservations are pending; if it still does not
  fit, the pipeline stops: this and every later uncached call raise
  :class:`~.stops.BudgetExhausted`, calls already in flight finish and are logged, and what was
  spent stays logged.
* **Budget lines**: retests and anchor re-judging reserve against their own line
  (:meth:`CallPipeline.add_budget_line`: ``judges.retest.budget_usd``,
  ``judges.anchors.budget_usd``), never against ``judges.budget_usd``. A call its line cannot
  cover raises :class:`BudgetLineExhausted` and so does every later call of that purpose;
  the run is not stopped (the step stops, the labels go on).
* **Rate limiter**: one :class:`AdaptiveRateLimiter` per provider (requests and tokens per
  minute), acquired for every attempt, retries included. The configured rates are its
  ceiling; every response's rate-limit headers, and every 429, move it below that (see
  :mod:`eval_harness.judges.client.adaptive`). Providers with ``complete_with_headers`` hand their
  successes' headers over; a refusal's come with the SDK's exception.
* **Concurrency**: at most ``judges.concurrency`` requests in flight per provider; a call
  waiting out a backoff does not hold a slot. The rate limiter is taken inside the slot, so
  what passes it is sent at once, at the rate of that moment.
* **Retry**: see :mod:`eval_harness.judges.client.retry`. After the last attempt the call is
  returned as failed (the caller records the pair as failed and the run goes on).
* **No quota**: a provider saying the account has no quota or credit left (error kind
  ``quota``) stops the run like a used-up budget: that call and every later uncached call
  raise :class:`~.stops.QuotaExhausted` with one sentence naming the provider and its server (never
  the key); calls waiting for a slot or a retry are not sent any more (they would be refused
  too), calls already sent finish and are logged.
* **Rejected key**: a 401 or 403 (error kind ``auth``) stops the run the same way, raising
  :class:`~.stops.AuthenticationRejected` with one sentence naming the provider and its
  server (never the key): every later call would be refused with the same key. All three
  stops are :class:`RunStopped`.
* **Interrupted** (:meth:`CallPipeline.interrupt`, the user's SIGINT or SIGTERM): no new
  request is sent (cached replies are still answered); requests already sent get
  :data:`INTERRUPT_GRACE_SECONDS` to deliver their replies, which are stored, and are then
  abandoned. Later calls raise :class:`~.stops.RunInterrupted`.
* **The store went away** (:meth:`CallPipeline.store_lost`: a ledger read or write failed,
  or the session saw the connection close): nothing more is sent, since no reply could be
  stored, and requests already sent are abandoned at once. Later calls raise
  :class:`StoreLost`, carrying the store's error.
* **Waits end at a stop**: after any of the four stops above (no quota, rejected key,
  interrupted, store lost) a call waiting to be sent gives up at once, wherever it waits
  (the rate limiter's next slot or the provider's pause, a retry backoff, a budget
  reservation: :meth:`CallPipeline.unless_stopped`), so a stopped run ends in the time its
  requests already sent take, not in the time the limiter would take to let every queued
  call through one slot at a time (minutes at 50 requests/min).
* **Cache key**: a request carries the base URL of its provider's server (the key includes
  it); :meth:`CallPipeline.cache_key` refuses a request addressed to another server than the
  provider it would be sent to, so a reply is never cached under the wrong server.
* **Logging**: a billed call writes one ``api_cost_log`` row and its reply into the cache,
  committed before the call returns; every retry becomes one ``api_retry_log`` row, committed
  before its wait and marked ``success`` with the call's reply (so a kill loses none); cache
  hits are counted, with the list price they saved, into ``api_cache_hit_log``. Retests
  (``retest=True``) are always sent, never cached.
* **Open batches**: a request whose reply a still-running provider batch will deliver
  (:attr:`CallPipeline.awaiting_batch`, set by batch mode) is not sent live: that would pay
  for it twice. It fails at once with kind ``batch_pending``; a later batch run collects it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import psycopg

from eval_harness.judges.client.adaptive import AdaptiveRateLimiter
from eval_harness.judges.client.budget import Budget, BudgetLine, BudgetLineExhausted
from eval_harness.judges.client.ledger import CallLedger, RetryEvent
from eval_harness.judges.client.limiter import Clock, Sleep
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.providers import provider as provider_named
from eval_harness.judges.client.providers.base import ChatClient
from eval_harness.judges.client.reply_cache import InFlight, cache_key, request_server
from eval_harness.judges.client.retry import ErrorInfo, RetryPolicy, WaitAsked, classify_error
from eval_harness.judges.client.stops import (
    INTERRUPT_GRACE_SECONDS,
    REFUSING_STOPS,
    STOPPED,
    STOPS,
    RunStopped,
    StoreLost,
    auth_message,
    quota_message,
    wait_unless,
)
from eval_harness.judges.protocol import ChatRequest, Completion
from eval_harness.settings.judges import RateLimit

T = TypeVar("T")
LedgerT = TypeVar("LedgerT", bound=CallLedger)


@dataclass
class RunStats:
    """Counters of one run; ``provider_calls`` counts HTTP requests (retries included).

    ``refused``: requests a provider refused as rate limited (429, not quota). Waiting is
    summed over calls (calls wait side by side, so it can exceed the run's time):
    ``limiter_wait_s`` for the rate limiter (its pauses included), ``backoff_wait_s`` for
    retry backoffs. ``waits_asked``: per provider, the longest ``Retry-After`` above
    ``judges.retry.max_wait_seconds`` and how many calls it ended (see :mod:`.retry`).
    """

    provider_calls: int = 0
    billed_calls: int = 0
    batch_requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    refused: int = 0
    limiter_wait_s: float = 0.0
    backoff_wait_s: float = 0.0
    waits_asked: dict[str, WaitAsked] = field(default_factory=dict)

    def add_wait_asked(self, provider: str, seconds: float) -> None:
        """A call to ``provider`` ended because its server asked to wait ``seconds``."""
        asked = self.waits_asked.setdefault(provider, WaitAsked())
        asked.longest_s = max(asked.longest_s, seconds)
        asked.calls_given_up += 1

    def add_billed(self, completion: Completion, cost: float) -> None:
        self.billed_calls += 1
        self.input_tokens += completion.usage.input_tokens
        self.output_tokens += completion.usage.output_tokens
        self.cost_usd += cost


@dataclass(frozen=True)
class CallOutcome:
    """What one pipeline call produced: a completion, or the error that ended it."""

    completion: Completion | None
    error: ErrorInfo | None = None
    attempts: int = 0
    cache_hit: bool = False
    cost_usd: float = 0.0
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.completion is not None

    @property
    def billed(self) -> bool:
        return self.completion is not None and not self.cache_hit


class CallPipeline(Generic[LedgerT]):
    """The pipeline of one run (see the module docstring), writing to ``ledger``: a
    :class:`~eval_harness.judges.client.ledger.JudgeLedger` in a session (batch mode needs
    one), any :class:`~eval_harness.judges.client.ledger.CallLedger` otherwise."""

    def __init__(self, *, providers: Mapping[str, ChatClient], ledger: LedgerT,
                 prices: PriceTable, budget: Budget, retry: RetryPolicy,
                 rate_limits: Mapping[str, RateLimit], concurrency: int,
                 secrets: Iterable[str | None] = (), clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        self.providers = dict(providers)
        self.ledger = ledger
        self.prices = prices
        self.budget = budget
        self.retry = retry
        self.stats = RunStats()
        self.stopped: str | None = None  # "budget" / "quota" / "auth" / ... once stopped
        self.stop_reason: str | None = None
        self.store_error: BaseException | None = None  # why the store was lost
        self._sending: set[asyncio.Task] = set()  # requests on their way to a provider
        self.halted = asyncio.Event()  # set when the user or the store stops the run
        self._refusing = asyncio.Event()  # set by every stop after which nothing is sent
        self._secrets = tuple(s for s in secrets if s)
        self._clock, self._sleep = clock, sleep
        self._limiters = {name: self._new_limiter(rate_limits[name], name) for name in providers}
        self._slots = {name: asyncio.Semaphore(concurrency) for name in providers}
        self._inflight = InFlight()
        self._budget_waiters: list[asyncio.Future] = []
        self.budget_lines: dict[str, BudgetLine] = {}  # purpose -> its own budget
        # cache key -> why its reply is not here yet (a provider batch still running)
        self.awaiting_batch: dict[str, str] = {}
        # per provider: calls waiting to be sent or on their way, and whether there were any
        # since :meth:`take_busy` last asked (a process sharing the rate counts as active)
        self.demand: dict[str, int] = {}
        self._busy: set[str] = set()
        self.on_busy: Callable[[str], None] | None = None  # a provider's first call since idle

    def take_busy(self) -> set[str]:
        """The providers with calls waiting or on their way now or at any moment since the
        previous call of this; starts the next such period."""
        busy = self._busy | {name for name, n in self.demand.items() if n > 0}
        self._busy = set()
        return busy

    def add_provider(self, provider: ChatClient, limit: RateLimit, concurrency: int, *,
                     secret: str | None = None) -> None:
        """Send ``provider``'s requests; ``secret`` (its key) is masked in its errors."""
        self.providers[provider.name] = provider
        self._limiters[provider.name] = self._new_limiter(limit, provider.name)
        self._slots[provider.name] = asyncio.Semaphore(concurrency)
        if secret:
            self._secrets += (secret,)

    def _new_limiter(self, limit: RateLimit, provider: str) -> AdaptiveRateLimiter:
        """A provider's limiter, reading its headers: a 429 asking for a longer wait than a
        call takes ends it and is no rate signal (pausing others would not bring it nearer)."""
        return AdaptiveRateLimiter(limit.requests_per_minute, limit.tokens_per_minute,
                                   clock=self._clock, sleep=self._sleep,
                                   read_headers=provider_named(provider).read_rate_headers,
                                   beyond_wait=self.retry.settings.max_wait_seconds)

    def add_budget_line(self, purpose: str, line: BudgetLine) -> None:
        """Calls logged with ``purpose`` spend ``line`` instead of the run's budget."""
        self.budget_lines[purpose] = line

    def limiter(self, provider: str) -> AdaptiveRateLimiter:
        """``provider``'s rate limiter (its current rates say how it has adapted)."""
        return self._limiters[provider]

    def base_url(self, provider: str) -> str | None:
        """The normalised base URL of ``provider``'s server (None if it has no such name)."""
        return getattr(self.providers.get(provider), "base_url", None)

    def cache_key(self, request: ChatRequest) -> str:
        """``request``'s cache key, after checking that it is addressed to the server its
        provider talks to (a key naming another server would cache the reply under it)."""
        served_by = self.base_url(request.provider)
        addressed_to = request_server(request)
        if served_by is not None and addressed_to != served_by:
            raise ValueError(f"a request for {request.provider} addressed to "
                             f"{addressed_to} would be sent to {served_by}; build it with "
                             f"base_url=pipeline.base_url({request.provider!r})")
        return cache_key(request)

    def stop(self, kind: str, reason: str) -> RunStopped:
        """Stop the run (the first stop and its reason are kept); returns the exception that
        this stop raises."""
        if not self.stopped:
            self.stopped, self.stop_reason = kind, reason
        if kind in REFUSING_STOPS:
            self._refusing.set()  # every call waiting to be sent gives up at once
        return STOPS.get(kind, RunStopped)(reason)

    async def unless_stopped(self, waiting: Awaitable[T]) -> T:
        """``waiting``'s result, unless the run is stopped so that nothing more is sent (the
        user's signal, the store lost, no quota, a rejected key) before or while it waits:
        the wait then ends at once and the stop is raised. Every wait of a call on its way
        to the provider goes through here, so a stopped run never sits out a limiter slot,
        a backoff or a pause it will not use."""
        result = await wait_unless(self._refusing, waiting)
        if result is STOPPED:
            raise self._stopped_error()
        return result  # type: ignore[return-value]

    def _stopped_error(self) -> RunStopped:
        if self.stopped == "store":
            return StoreLost(self.stop_reason, self.store_error)
        return STOPS.get(self.stopped, RunStopped)(self.stop_reason)

    def interrupt(self, grace_seconds: float = INTERRUPT_GRACE_SECONDS) -> None:
        """The user asked to stop: send nothing more; requests on their way get
        ``grace_seconds`` to deliver their replies (stored as usual), then are abandoned.
        Called on the event loop (the session schedules it from the signal handler)."""
        if self.stopped in REFUSING_STOPS:
            return  # already sending nothing (a used-up budget still lets reserved calls go)
        self.stop("interrupt", "the run was interrupted: no request was sent after the "
                               "signal, replies already on their way were stored")
        self.halted.set()
        asyncio.get_running_loop().call_later(grace_seconds, self._abandon_requests)

    def store_lost(self, error: BaseException) -> StoreLost:
        """The store failed under the run: send nothing more and abandon the requests on
        their way (their replies could not be stored). Returns the exception to raise."""
        if self.stopped != "store":
            self.store_error = error
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.stopped = None  # the store's loss outranks any earlier stop
            self.stop("store", f"the store failed under the run ({first}), so no more "
                               "requests were sent")
            self.halted.set()
            self._abandon_requests()
        return StoreLost(self.stop_reason, self.store_error)

    def _abandon_requests(self) -> None:
        for task in list(self._sending):
            task.cancel()

    def flush_ledger(self) -> None:
        """Write what the ledger holds buffered (a store error stops the run)."""
        self._from_store(self.ledger.flush)

    def _from_store(self, read_or_write, *args, **kwargs):
        """A ledger call; a store error stops the run (see :meth:`store_lost`)."""
        try:
            return read_or_write(*args, **kwargs)
        except psycopg.Error as exc:
            raise self.store_lost(exc) from exc

    async def call(self, request: ChatRequest, *, query_id: int | None = None,
                   refresh: bool = False, retest: bool = False,
                   purpose: str | None = None) -> CallOutcome:
        """The reply to ``request``: cached, or from the provider with retries. ``refresh``
        skips the cache and replaces the cached reply with the new one (re-asking a question
        whose cached replies left it unscored). ``retest`` sends it past the cache, never
        cached, logged with ``purpose`` ('retest' unless given, or 'anchor' for the anchor
        set). A cached call is logged with ``purpose`` ('label' unless given: 'ground_truth'
        for generated queries) and spends that purpose's budget line when there is one.

        Raises :class:`~.stops.BudgetExhausted` when the budget cannot cover the call,
        :class:`~.stops.QuotaExhausted` when the provider's account has no quota left and
        :class:`~.stops.AuthenticationRejected` when the provider rejects the key (for this and
        every later uncached call).
        """
        key = self.cache_key(request)
        if self.stopped == "store":  # nothing can be read or stored any more
            raise self._stopped_error()
        if retest:  # always sent, unless the run is stopped
            if self.stopped:
                raise self._stopped_error()
            return await self._call_provider(request, query_id, purpose=purpose or "retest")
        cached = None if refresh else self._from_store(self.ledger.cached, key)
        if cached is not None:  # free, so answered even after the run was stopped
            self.stats.cache_hits += 1
            self.ledger.record_cache_hit(
                request, saved_cost=self.prices.cost(request.model, cached.usage))
            return CallOutcome(cached, cache_hit=True)
        if key in self.awaiting_batch:
            return CallOutcome(None, ErrorInfo("batch_pending", False, None, None,
                                               self.awaiting_batch[key]))
        if self.stopped:
            raise self._stopped_error()
        shared = self._inflight.get(key)  # a call in flight is a new reply, refresh or not
        if shared is not None:  # the same request is on its way: wait for that reply
            outcome = await asyncio.shield(shared)
            if outcome.ok:
                self.stats.cache_hits += 1
                self.ledger.record_cache_hit(
                    request, saved_cost=self.prices.cost(request.model, outcome.completion.usage))
                return CallOutcome(outcome.completion, cache_hit=True)
            return CallOutcome(None, outcome.error)  # its attempts are the other call's
        return await self._inflight.share(key, self._call_provider(
            request, query_id, refresh, purpose=purpose or "label"))

    async def _reserve(self, amount: float, budget: Budget) -> None:
        """Reserve ``amount`` of ``budget``. While other calls hold reservations, wait for
        them to settle (real costs are usually far below the worst case); stop the run only
        when the call cannot fit even with nothing else pending (a budget line stops only
        its own purpose's calls)."""
        line = budget if isinstance(budget, BudgetLine) else None
        while not self._from_store(budget.try_reserve, amount):
            if self.stopped:
                raise self._stopped_error()
            if line is not None and (line.exhausted or budget.pending == 0):
                line.exhausted = line.exhausted or line.exhausted_message(amount)
                line.refused += 1
                raise BudgetLineExhausted(line.exhausted)
            if budget.pending == 0:
                raise self.stop("budget", budget.exhausted_message(amount))
            waiter = asyncio.get_running_loop().create_future()
            self._budget_waiters.append(waiter)
            if budget.poll_seconds is None:
                await self.unless_stopped(waiter)
            else:  # other processes' settlements are not announced: look again soon
                await self.unless_stopped(asyncio.wait(
                    [waiter], timeout=budget.poll_seconds))

    def _settle(self, reserved: float, actual: float, budget: Budget) -> None:
        try:
            self._from_store(budget.settle, reserved, actual)
        except StoreLost:
            pass  # the run has stopped on it; the call's outcome (or its error) goes on
        waiters, self._budget_waiters = self._budget_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _send(self, provider: ChatClient, request: ChatRequest,
                    limiter: AdaptiveRateLimiter) -> Completion:
        """``provider``'s reply (or its exception); what the response says about the rate
        limits, and whether it was a 429, goes to ``limiter``."""
        sent_at = self._clock()
        with limiter.sending():
            try:
                with_headers = getattr(provider, "complete_with_headers", None)
                if with_headers is None:
                    completion, headers = await provider.complete(request), None
                else:
                    completion, headers = await with_headers(request)
            except Exception as exc:
                refused = classify_error(exc, provider.name).kind == "rate_limit"
                limiter.observe(getattr(getattr(exc, "response", None), "headers", None),
                                outcome="refused" if refused else "error", sent_at=sent_at)
                raise
            limiter.observe(headers, outcome="success", sent_at=sent_at)
            return completion

    async def _send_abandonable(self, provider: ChatClient, request: ChatRequest,
                                limiter: AdaptiveRateLimiter) -> Completion:
        """:meth:`_send`, as a task the pipeline can abandon (see :meth:`interrupt` and
        :meth:`store_lost`); an abandoned request raises the stop that abandoned it."""
        sending = asyncio.ensure_future(self._send(provider, request, limiter))
        self._sending.add(sending)
        try:
            return await sending
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if sending.cancelled() and self.stopped and not (current and current.cancelling()):
                raise self._stopped_error() from None
            raise
        finally:
            self._sending.discard(sending)
            if not sending.done():
                sending.cancel()

    async def _call_provider(self, request: ChatRequest, query_id: int | None,
                             refresh: bool = False, *, purpose: str = "label") -> CallOutcome:
        provider = self.providers[request.provider]
        reserve = self.prices.worst_case(request)
        budget = self.budget_lines.get(purpose, self.budget)
        line = budget if isinstance(budget, BudgetLine) else None
        if line is not None and line.exhausted:  # the step stopped: none of it is sent
            line.refused += 1
            raise BudgetLineExhausted(line.exhausted)
        await self._reserve(reserve, budget)
        self.demand[provider.name] = self.demand.get(provider.name, 0) + 1
        if provider.name not in self._busy:
            self._busy.add(provider.name)
            if self.on_busy is not None:
                self.on_busy(provider.name)
        started = self._clock()
        estimate = request.estimated_input_tokens() + request.max_tokens
        retry_ids: list[int] = []
        attempts, cost = 0, 0.0
        try:
            while True:
                limiter = self._limiters[provider.name]
                try:
                    async with self._slots[provider.name]:
                        # the rate is taken with the slot: a request that passed the limiter
                        # and then queued for a slot would go at a rate since lowered
                        self.stats.limiter_wait_s += await self.unless_stopped(
                            limiter.acquire(estimate))
                        if self.stopped in REFUSING_STOPS:  # it would only be refused too
                            raise self._stopped_error()
                        attempts += 1
                        self.stats.provider_calls += 1
                        completion = await self._send_abandonable(provider, request, limiter)
                except (asyncio.CancelledError, RunStopped):
                    raise
                except Exception as exc:  # every provider error is classified, none escapes
                    error = classify_error(exc, provider.name, secrets=self._secrets)
                else:
                    break
                if error.kind == "quota":  # no retry helps, nor would any later call
                    self.stats.failed_calls += 1
                    raise self.stop("quota", quota_message(
                        provider.name, getattr(provider, "base_url", None), error))
                if error.kind == "auth":  # every later call would be refused with this key
                    self.stats.failed_calls += 1
                    raise self.stop("auth", auth_message(
                        provider.name, getattr(provider, "base_url", None), error))
                self.stats.refused += error.kind == "rate_limit"
                wait = (self.retry.wait(attempts, error.retry_after)
                        if error.retryable and attempts <= self.retry.max_retries else None)
                if wait is None:
                    if self.retry.asks_too_long(error.retry_after):
                        self.stats.add_wait_asked(provider.name, error.retry_after)
                    self.stats.failed_calls += 1
                    return CallOutcome(None, error, attempts,
                                       latency_s=self._clock() - started)
                retry_ids.append(self._from_store(self.ledger.record_retry, request,
                                                  RetryEvent(error.kind, error.status_code,
                                                             attempts, wait)))
                self.stats.retries += 1
                self.stats.backoff_wait_s += wait
                await self.unless_stopped(self._sleep(wait))
            used = completion.usage.input_tokens + completion.usage.output_tokens
            self._limiters[provider.name].refund(estimate - used)
            cost = self.prices.cost(request.model, completion.usage)
            self._from_store(self.ledger.record_call, request, completion, cost=cost,
                             query_id=query_id, retry_ids=retry_ids, replace=refresh,
                             purpose=purpose)
            self.stats.add_billed(completion, cost)
            return CallOutcome(completion, None, attempts, cost_usd=cost,
                               latency_s=self._clock() - started)
        finally:
            self.demand[provider.name] -= 1
            self._settle(reserve, cost, budget)
