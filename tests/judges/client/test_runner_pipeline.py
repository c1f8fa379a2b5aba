"""The call pipeline (eval_harness.judges.client.runner) in memory: cache and in-flight
sharing, the re-ask rule, retries, the budget, and a stop ending the limiter's wait.

The pipeline runs as a session builds it (the shipped config.yaml's judge settings, its
budget lines), but its provider is a scripted :class:`ChatClient` and its ledger a
:class:`MemoryLedger`, both counting what they received; waits go through a fake clock. What
tests/judges/client/test_runner*.py check over HTTP and Postgres is checked here on the
counts a user would look at (requests sent, cost and retry rows, dollars reserved and
settled), in milliseconds. The errors a provider raises are the OpenAI SDK's own, built on a
response as the SDK builds them, so the provider's classification is the one a run uses.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest

from eval_harness.judges.client.budget import Budget, BudgetLine
from eval_harness.judges.client.ledger import RetryEvent
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.providers import provider as provider_named
from eval_harness.judges.client.reply_cache import cache_key
from eval_harness.judges.client.retry import RetryPolicy
from eval_harness.judges.client.runner import CallPipeline
from eval_harness.judges.client.stops import (
    AuthenticationRejected,
    BudgetExhausted,
    QuotaExhausted,
    RunInterrupted,
)
from eval_harness.judges.llm import LLMJudge
from eval_harness.judges.protocol import ChatRequest, Completion, Outcome, Usage
from eval_harness.settings import load_settings
from fake_llm_client import FakeTime
from paths import REPO

pytestmark = pytest.mark.unit

SPEC = "openai:gpt-4o"
DOCUMENT = "Low-dose aspirin lowers the risk of a first heart attack."
USAGE = Usage(200, 4)  # every scripted reply's usage
# gpt-4o at the shipped prices (USD per million tokens: input 2.50, output 10.00)
REPLY_COST = (200 * 2.50 + 4 * 10.00) / 1e6  # = $0.00054
GUARD_SECONDS = 1.0  # real time: a wait the pipeline failed to end fails the test, not hangs


@pytest.fixture(scope="module")
def judges():
    """The shipped judge settings (config.yaml)."""
    return load_settings(REPO / "config.yaml", environ={}).judges


# ---------------------------------------------------------------------------------------
# The provider and the ledger, in memory


def refusal(status: int, *, retry_after: float | None = None) -> openai.APIStatusError:
    """The OpenAI SDK's exception for an HTTP ``status`` reply (its class for that status)."""
    classes = {400: openai.BadRequestError, 429: openai.RateLimitError}
    error_class = classes.get(status, openai.InternalServerError)
    body = {"message": f"scripted {status}", "type": "invalid_request_error", "code": None}
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    response = httpx2.Response(status, headers=headers, json={"error": body},
                               request=httpx2.Request("POST", "https://api.openai.com/v1/"
                                                              "chat/completions"))
    return error_class(f"Error code: {status}", response=response, body=body)


class ScriptedChat:
    """A :class:`~eval_harness.judges.client.providers.base.ChatClient` of the provider
    ``name``: each request takes the next scripted entry (a reply text, or an exception to
    raise), then ``"0.8"``; every request received is kept in ``received``."""

    def __init__(self, *script: str | BaseException, name: str = "openai") -> None:
        self.name = name
        self.base_url = provider_named(name).endpoint(None)  # its default server
        self.script = list(script)
        self.received: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.received.append(request)
        await asyncio.sleep(0)  # a reply takes a turn of the loop, as over HTTP
        entry = self.script.pop(0) if self.script else "0.8"
        if isinstance(entry, BaseException):
            raise entry
        return Completion(entry, USAGE)

    async def submit_batch(self, items):
        raise AssertionError("the call pipeline sends no batches")

    async def batch_state(self, batch_id):
        raise AssertionError("the call pipeline sends no batches")

    async def batch_results(self, batch_id):
        raise AssertionError("the call pipeline sends no batches")

    async def aclose(self) -> None:
        pass


@dataclass(frozen=True)
class CostRow:
    request: ChatRequest
    completion: Completion
    cost: float
    retry_ids: tuple[int, ...]
    purpose: str


@dataclass
class MemoryLedger:
    """Stands in for :class:`~eval_harness.judges.client.ledger.JudgeLedger` (its
    :class:`~eval_harness.judges.client.ledger.CallLedger` side): the reply cache by key, one
    :class:`CostRow` per billed call (its reply cached, a cached key keeping its first reply
    unless replaced), the retries with their ids (``succeeded``: those of calls that got their
    reply) and every cache hit with its saved cost."""

    cache: dict[str, Completion] = field(default_factory=dict)
    costs: list[CostRow] = field(default_factory=list)
    retries: list[RetryEvent] = field(default_factory=list)
    succeeded: list[int] = field(default_factory=list)
    hits: list[tuple[ChatRequest, float]] = field(default_factory=list)

    def cached(self, key: str) -> Completion | None:
        return self.cache.get(key)

    def record_cache_hit(self, request: ChatRequest, *, saved_cost: float) -> None:
        self.hits.append((request, saved_cost))

    def record_call(self, request: ChatRequest, completion: Completion, *, cost: float,
                    batch: bool = False, query_id: int | None = None, retry_ids=(),
                    replace: bool = False, purpose: str = "label") -> None:
        key = cache_key(request)
        if replace or key not in self.cache:
            self.cache[key] = completion
        self.costs.append(CostRow(request, completion, cost, tuple(retry_ids), purpose))
        self.succeeded.extend(retry_ids)

    def record_retry(self, request: ChatRequest, event: RetryEvent) -> int:
        self.retries.append(event)
        return len(self.retries)  # ids from 1, as the table's

    def flush(self) -> None:
        pass


def pipeline_of(judges, chat: ScriptedChat, time_, *, seed: int = 7) -> CallPipeline:
    """The pipeline a session builds from ``judges``, on ``time_``, with ``chat`` as its only
    provider and a :class:`MemoryLedger`; ``seed`` seeds the retries' jitter."""
    pipeline = CallPipeline(
        providers={}, ledger=MemoryLedger(), prices=PriceTable(judges.prices),
        budget=Budget(judges.budget_usd),
        retry=RetryPolicy(judges.retry, random.Random(seed)), rate_limits=judges.rate_limits,
        concurrency=judges.concurrency, clock=time_.clock, sleep=time_.sleep)
    pipeline.add_budget_line("retest", BudgetLine(judges.retest.budget_usd,
                                                  key="judges.retest.budget_usd",
                                                  step="test-retest"))
    pipeline.add_provider(chat, judges.rate_limits[chat.name], judges.concurrency)
    return pipeline


def judge_of(judges, pipeline: CallPipeline) -> LLMJudge:
    return LLMJudge(SPEC, pipeline, judges, base_url=pipeline.base_url("openai"))


def relevance_request(judges, pipeline: CallPipeline, query: str) -> ChatRequest:
    """The request judge 1 sends for (``query``, :data:`DOCUMENT`)."""
    return judge_of(judges, pipeline).relevance_request(query, DOCUMENT)


def run(work: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(work, GUARD_SECONDS))


def expected_backoffs(seed: int, n: int, *, base: float = 1.0, jitter: float = 0.2):
    """The shipped schedule (``base * 2**(n-1)``, +-20% jitter) drawn from ``seed``, as the
    pipeline's RetryPolicy draws it."""
    rng = random.Random(seed)
    return [base * 2 ** i * rng.uniform(1 - jitter, 1 + jitter) for i in range(n)]


# ---------------------------------------------------------------------------------------
# The cache: a hit sends nothing; identical requests in flight share one call


def test_a_cache_hit_sends_nothing_and_logs_the_hit_with_its_saved_cost(judges):
    chat, time_ = ScriptedChat(), FakeTime()
    pipeline = pipeline_of(judges, chat, time_)
    request = relevance_request(judges, pipeline, "does aspirin prevent heart attacks?")
    pipeline.ledger.cache[cache_key(request)] = Completion("0.7", USAGE)  # an earlier run's

    outcome = run(pipeline.call(request))

    assert outcome.cache_hit and outcome.completion.text == "0.7" and outcome.cost_usd == 0.0
    assert chat.received == [] and pipeline.stats.provider_calls == 0
    assert pipeline.ledger.costs == [] and pipeline.ledger.retries == []
    assert pipeline.ledger.hits == [(request, pytest.approx(REPLY_COST))]  # $0.00054 saved
    assert pipeline.stats.cache_hits == 1
    budget = pipeline.budget
    assert (budget.spent_usd, budget.reserved_usd, budget.pending) == (0.0, 0.0, 0)


def test_the_same_request_in_flight_twice_is_sent_once(judges):
    chat, time_ = ScriptedChat(), FakeTime()
    pipeline = pipeline_of(judges, chat, time_)
    request = relevance_request(judges, pipeline, "does aspirin prevent heart attacks?")

    async def twice_at_once():
        return await asyncio.gather(pipeline.call(request), pipeline.call(request))

    first, second = run(twice_at_once())

    assert len(chat.received) == 1 and pipeline.stats.provider_calls == 1
    assert first.billed and first.cost_usd == pytest.approx(REPLY_COST)
    assert second.cache_hit and second.completion == first.completion
    assert [row.cost for row in pipeline.ledger.costs] == [pytest.approx(REPLY_COST)]
    assert pipeline.ledger.hits == [(request, pytest.approx(REPLY_COST))]
    assert pipeline.budget.spent_usd == pytest.approx(REPLY_COST)  # paid once
    assert (pipeline.budget.reserved_usd, pipeline.budget.pending) == (0.0, 0)
    # and the reply is cached: the same request later is a hit, still one request sent
    assert run(pipeline.call(request)).cache_hit and len(chat.received) == 1


# ---------------------------------------------------------------------------------------
# The re-ask rule, through the pipeline


def test_an_unparseable_reply_is_asked_again_once_then_left_unscored(judges):
    garbage = "It is quite relevant."
    chat, time_ = ScriptedChat(garbage, garbage), FakeTime()
    pipeline = pipeline_of(judges, chat, time_)
    judge = judge_of(judges, pipeline)

    result = run(judge.relevance("does aspirin prevent heart attacks?", DOCUMENT))

    assert result.outcome is Outcome.UNSCORED and result.value is None  # never 0, never 0.5
    assert result.replies == (garbage, garbage)
    asked, again = chat.received
    assert len(chat.received) == 2  # the question and one re-ask, no third
    assert again.messages[:-2] == asked.messages
    assert again.messages[-2].content == garbage and again.messages[-1].role == "user"
    ledger = pipeline.ledger
    assert len(ledger.costs) == 2 and result.calls == 2  # both replies were paid for
    assert result.cost_usd == pytest.approx(2 * REPLY_COST) == pipeline.budget.spent_usd
    # both replies are cached: a rerun finds the pair unscored again and pays nothing
    rerun = run(judge.relevance("does aspirin prevent heart attacks?", DOCUMENT))
    assert rerun.outcome is Outcome.UNSCORED and rerun.cache_hits == 2
    assert len(chat.received) == 2 and len(ledger.costs) == 2 and len(ledger.hits) == 2


# ---------------------------------------------------------------------------------------
# Retries: back off on 429 / 5xx as configured; a client error is not retried


def test_429_and_5xx_are_retried_after_the_configured_backoffs(judges):
    chat = ScriptedChat(refusal(429, retry_after=3), refusal(503), refusal(500), "0.8")
    time_ = FakeTime()
    pipeline = pipeline_of(judges, chat, time_, seed=7)
    request = relevance_request(judges, pipeline, "does aspirin prevent heart attacks?")
    start = time_.now

    outcome = run(pipeline.call(request))

    assert outcome.ok and outcome.attempts == 4 and len(chat.received) == 4
    _, second, third = expected_backoffs(7, 3)  # ~1, ~2, ~4 s
    ledger = pipeline.ledger
    assert [(r.error_type, r.status_code, r.retry_count) for r in ledger.retries] == [
        ("rate_limit", 429, 1), ("server_error", 503, 2), ("server_error", 500, 3)]
    # the first wait is the server's Retry-After: 3 s is more than the ~1 s backoff
    assert [r.wait_seconds for r in ledger.retries] == pytest.approx([3.0, second, third])
    assert 1.6 <= second <= 2.4 and 3.2 <= third <= 4.8
    # the call waited them out: the clock moved by the backoffs and the limiter's slots
    assert time_.now - start == pytest.approx(3.0 + second + third
                                              + pipeline.stats.limiter_wait_s)
    assert len(ledger.costs) == 1 and ledger.costs[0].retry_ids == (1, 2, 3)
    assert ledger.succeeded == [1, 2, 3]  # the retry rows say the call got its reply


def test_a_call_gives_up_after_the_configured_retries(judges):
    chat = ScriptedChat(*[refusal(503) for _ in range(6)])
    time_ = FakeTime()
    pipeline = pipeline_of(judges, chat, time_, seed=7)
    request = relevance_request(judges, pipeline, "does aspirin prevent heart attacks?")

    outcome = run(pipeline.call(request))

    assert not outcome.ok and outcome.error.kind == "server_error"
    assert outcome.attempts == 5 and len(chat.received) == 5  # 1 + judges.retry.max_retries
    assert [r.wait_seconds for r in pipeline.ledger.retries] == pytest.approx(
        expected_backoffs(7, 4))  # ~1, 2, 4, 8 s
    assert pipeline.ledger.costs == [] and pipeline.ledger.succeeded == []
    assert pipeline.stats.failed_calls == 1
    assert (pipeline.budget.spent_usd, pipeline.budget.reserved_usd) == (0.0, 0.0)


def test_a_client_error_is_not_retried(judges):
    chat, time_ = ScriptedChat(refusal(400)), FakeTime()
    pipeline = pipeline_of(judges, chat, time_)
    request = relevance_request(judges, pipeline, "does aspirin prevent heart attacks?")

    outcome = run(pipeline.call(request))

    assert outcome.error.kind == "client_error" and outcome.attempts == 1
    assert len(chat.received) == 1
    assert pipeline.ledger.retries == [] and pipeline.stats.backoff_wait_s == 0.0
    assert pipeline.ledger.costs == [] and pipeline.budget.spent_usd == 0.0


# ---------------------------------------------------------------------------------------
# The budget: a call that would exceed it is not sent


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "all-at-once"])
def test_a_call_the_budget_cannot_cover_is_not_sent(judges, together):
    chat, time_ = ScriptedChat(), FakeTime()
    pipeline = pipeline_of(judges, chat, time_)
    requests = [relevance_request(judges, pipeline, f"aspirin question {i}") for i in range(5)]
    worst = pipeline.prices.worst_case(requests[0])  # what a call reserves before it is sent
    assert worst > 2 * REPLY_COST  # so only one reservation fits at a time
    # three calls fit: two paid replies and the third's worst case; a fourth does not
    pipeline.budget.limit_usd = worst + 2.5 * REPLY_COST

    async def one_by_one():
        done = []
        for request in requests:
            try:
                done.append(await pipeline.call(request))
            except BudgetExhausted as exc:
                done.append(exc)
        return done

    async def all_at_once():
        return await asyncio.gather(*(pipeline.call(r) for r in requests),
                                    return_exceptions=True)

    outcomes = run(all_at_once() if together else one_by_one())

    paid = [o for o in outcomes if not isinstance(o, Exception)]
    stopped = [o for o in outcomes if isinstance(o, Exception)]
    assert len(paid) == 3 and all(o.billed for o in paid)
    assert len(stopped) == 2 and all(isinstance(e, BudgetExhausted) for e in stopped)
    assert len(chat.received) == 3 and len(pipeline.ledger.costs) == 3
    budget = pipeline.budget
    assert budget.spent_usd == pytest.approx(3 * REPLY_COST)  # $0.00162, what was paid
    assert (budget.reserved_usd, budget.pending) == (0.0, 0)  # nothing left reserved
    assert pipeline.stopped == "budget" and str(stopped[0]) == pipeline.stop_reason
    assert "judges.budget_usd" in pipeline.stop_reason
    assert "($0.0016 spent" in pipeline.stop_reason
    assert f"could cost up to ${worst:.4f}" in pipeline.stop_reason
    # a cached reply is still free to read after the stop
    assert run(pipeline.call(requests[0])).cache_hit and len(chat.received) == 3


# ---------------------------------------------------------------------------------------
# A stop ends a call waiting on the limiter at once


class HeldTime:
    """A clock that moves only when the test moves it (:meth:`next_wake`): a sleep waits
    until then, so a call waiting for a limiter slot at the shipped rate really is waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeping: list[tuple[float, asyncio.Future]] = []  # (wakes at, its future)
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        entry = (self.now + seconds, asyncio.get_running_loop().create_future())
        self.sleeping.append(entry)
        try:
            await entry[1]
        finally:
            self.sleeping.remove(entry)

    async def next_wake(self) -> None:
        """Move the clock to the earliest sleep's end, wake it, then let the loop run."""
        self.now = min(wakes_at for wakes_at, _ in self.sleeping)
        for wakes_at, future in list(self.sleeping):
            if wakes_at <= self.now and not future.done():
                future.set_result(None)
        await settled()


async def settled(turns: int = 50) -> None:
    """Let everything that can run without the clock moving run."""
    for _ in range(turns):
        await asyncio.sleep(0)


@pytest.mark.parametrize("kind, raised", [("interrupt", RunInterrupted),
                                          ("quota", QuotaExhausted),
                                          ("auth", AuthenticationRejected)])
def test_a_stop_ends_the_calls_waiting_on_the_limiter_at_once(judges, kind, raised):
    chat, time_ = ScriptedChat(), HeldTime()
    pipeline = pipeline_of(judges, chat, time_)  # the shipped 500 requests, 30,000 tokens/min
    requests = [relevance_request(judges, pipeline, f"aspirin question {i}") for i in range(10)]

    async def stopped_while_waiting():
        calls = [asyncio.ensure_future(pipeline.call(r)) for r in requests]
        await settled()
        while len(chat.received) < 2:  # the limiter lets two requests go, slot by slot
            await time_.next_wake()
        sent, sleeps, now = len(chat.received), len(time_.sleeps), time_.now
        assert time_.sleeping  # the third waits for its slot, the others behind it
        pipeline.stop(kind, f"stopped ({kind})")  # what the user's signal does, in effect
        await settled()
        assert all(call.done() for call in calls)  # at once: the clock did not move
        assert time_.now == now and len(time_.sleeps) == sleeps and not time_.sleeping
        return sent, await asyncio.gather(*calls, return_exceptions=True)

    sent, outcomes = run(stopped_while_waiting())

    assert sent == 2 and len(chat.received) == 2  # nothing was sent after the stop
    assert [o.billed for o in outcomes[:2]] == [True, True]
    assert all(isinstance(o, raised) for o in outcomes[2:])
    assert len(pipeline.ledger.costs) == 2  # the replies that came were stored
    budget = pipeline.budget
    assert budget.spent_usd == pytest.approx(2 * REPLY_COST)
    assert (budget.reserved_usd, budget.pending) == (0.0, 0)  # the waiting calls' released
