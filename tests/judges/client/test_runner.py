"""The call pipeline with the real SDKs against the local fake server, on a real store.

Retry waits go through an injected sleep (FakeTime), so exact backoff schedules are checked
without waiting; every request still travels over HTTP to the fake server.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import replace

import pytest

from eval_harness.judges.client.limiter import RateLimiter
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.client.stops import BudgetExhausted
from eval_harness.judges.protocol import Outcome
from eval_harness.settings.judges import RateLimit, RetrySettings
from fake_llm_server import MALFORMED_REPLY, FakeLLMServer, FakeTime, Fault, judge_settings

SPECS = ["openai:gpt-4o", "anthropic:claude-haiku-4-5"]


@pytest.fixture
def time_():
    return FakeTime()


def _query() -> str:
    """A query text no other test used, so the shared cache cannot answer it."""
    return f"aspirin heart attack risk {uuid.uuid4().hex}"


def _session(settings, conn, time_, *, seed=7) -> JudgeSession:
    """A session on fake time with a seeded jitter, so waits are exactly predictable."""
    return JudgeSession(settings, conn, run_id=uuid.uuid4().hex[:12], rng=random.Random(seed),
                        **time_.options())


def _configured(settings, fake, spec, **judges):
    return judge_settings(settings, fake, judge1=spec, judge2="local:lexical", **judges)


def _rows(conn, table: str, run_id: str, columns: str = "*"):
    return conn.execute(f"SELECT {columns} FROM {table} WHERE run_id = %s ORDER BY id",
                        (run_id,)).fetchall()


def _expected_backoffs(seed: int, n: int, base: float = 1.0, jitter: float = 0.2) -> list[float]:
    rng = random.Random(seed)
    return [base * 2 ** i * rng.uniform(1 - jitter, 1 + jitter) for i in range(n)]


@pytest.mark.parametrize("spec", SPECS)
def test_retries_back_off_1_2_4_with_jitter_and_log_each_retry(spec, settings, conn, fake,
                                                               time_):
    fake.enqueue(Fault("429", retry_after=0.1), "503", "529")
    session = _session(_configured(settings, fake, spec), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "aspirin lowers heart attack risk")

    result = asyncio.run(run())
    assert result.outcome is Outcome.SCORED and result.attempts == 4
    assert time_.waits == pytest.approx(_expected_backoffs(7, 3))
    for wait, nominal in zip(time_.waits, (1, 2, 4)):
        assert 0.8 * nominal <= wait <= 1.2 * nominal
    rows = _rows(conn, "api_retry_log", session.run_id,
                 "error_type, status_code, retry_count, success, api_name")
    assert [r[:4] for r in rows] == [("rate_limit", 429, 1, True), ("server_error", 503, 2, True),
                                     ("overloaded", 529, 3, True)]
    assert {r[4] for r in rows} == {spec.split(":")[0]}
    assert len(_rows(conn, "api_cost_log", session.run_id)) == 1
    assert len(fake.chat_records(spec.split(":")[0])) == 4


@pytest.mark.parametrize("spec", SPECS)
def test_retry_after_is_honoured(spec, settings, conn, fake, time_):
    fake.enqueue(Fault("429", retry_after=7), Fault("503", retry_after=0.2))
    session = _session(_configured(settings, fake, spec), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    assert asyncio.run(run()).scored
    first, second = time_.waits
    assert first == 7.0                       # the server asked for more than the backoff
    assert second == pytest.approx(_expected_backoffs(7, 2)[1])  # backoff beats 0.2 s


def test_a_retry_after_beyond_the_cap_fails_instead_of_waiting_less(settings, conn, fake,
                                                                    time_):
    fake.enqueue(Fault("429", retry_after=600))
    session = _session(_configured(settings, fake, "openai:gpt-4o"), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.outcome is Outcome.FAILED and result.attempts == 1 and time_.waits == []
    assert "rate_limit" in result.error


@pytest.mark.parametrize("spec", SPECS)
def test_gives_up_after_four_retries(spec, settings, conn, fake, time_):
    fake.enqueue(*["503"] * 6)
    session = _session(_configured(settings, fake, spec), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.outcome is Outcome.FAILED and result.value is None
    assert result.attempts == 5 and len(fake.chat_records()) == 5
    assert time_.waits == pytest.approx(_expected_backoffs(7, 4))  # ~1, 2, 4, 8
    rows = _rows(conn, "api_retry_log", session.run_id, "retry_count, success")
    assert rows == [(1, False), (2, False), (3, False), (4, False)]
    assert _rows(conn, "api_cost_log", session.run_id) == []
    assert session.stats.failed_calls == 1 and session.stats.billed_calls == 0


# 401 / 403 are not client errors that fail one pair: they stop the run (see
# tests/judges/client/test_runner_faults.py)
@pytest.mark.parametrize("status", ["400", "404"])
@pytest.mark.parametrize("spec", SPECS)
def test_client_errors_are_not_retried(spec, status, settings, conn, fake, time_):
    fake.enqueue(status)
    session = _session(_configured(settings, fake, spec), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.outcome is Outcome.FAILED and result.attempts == 1
    assert result.error.startswith("client_error") and time_.waits == []
    assert len(fake.chat_records()) == 1
    assert _rows(conn, "api_retry_log", session.run_id) == []


def test_the_sdks_own_retries_are_off(settings, conn, fake, time_):
    fake.enqueue("429", "429")
    config = _configured(settings, fake, "anthropic:claude-haiku-4-5",
                         retry=RetrySettings(max_retries=0))
    session = _session(config, conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    assert asyncio.run(run()).outcome is Outcome.FAILED
    assert len(fake.chat_records()) == 1  # the SDK did not retry behind our back


@pytest.mark.parametrize("spec", SPECS)
def test_timeouts_are_retried(spec, settings, conn, fake, time_):
    fake.hang_seconds = 1.0
    fake.enqueue("timeout")
    session = _session(_configured(settings, fake, spec, timeout_seconds=0.25), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.scored and result.attempts == 2
    assert _rows(conn, "api_retry_log", session.run_id, "error_type") == [("timeout",)]


def test_connection_errors_are_retried_then_fail(settings, conn, fake, time_):
    closed = FakeLLMServer().start()
    port = closed.port
    closed.stop()  # nothing listens on this port any more
    config = replace(_configured(settings, fake, "openai:gpt-4o"),
                     openai_base_url=f"http://127.0.0.1:{port}/v1")
    session = _session(config, conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.outcome is Outcome.FAILED and result.attempts == 5
    assert {r[0] for r in _rows(conn, "api_retry_log", session.run_id, "error_type")} == {
        "connection"}


@pytest.mark.parametrize("spec", SPECS)
def test_unparseable_reply_is_asked_again_once_then_unscored(spec, settings, conn, fake, time_):
    fake.enqueue("malformed", "malformed")
    session = _session(_configured(settings, fake, spec), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.outcome is Outcome.UNSCORED and result.value is None  # never 0.5, never 0
    assert result.replies == (MALFORMED_REPLY, MALFORMED_REPLY) and result.calls == 2
    assert "does not start with a number" in result.error
    second = fake.chat_records()[1].body["messages"]
    assert second[-2]["role"] == "assistant" and "could not be used" in str(second[-1])
    assert len(_rows(conn, "api_cost_log", session.run_id)) == 2  # both replies were billed


def test_a_reply_that_parses_after_the_reask_is_scored(settings, conn, fake, time_):
    fake.enqueue("malformed")
    session = _session(_configured(settings, fake, "openai:gpt-4o"), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.scored and len(result.replies) == 2 and result.replies[0] == MALFORMED_REPLY


def test_a_body_that_is_not_json_fails_without_retry(settings, conn, fake, time_):
    fake.enqueue("bad_json")
    session = _session(_configured(settings, fake, "anthropic:claude-haiku-4-5"), conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(_query(), "doc")

    result = asyncio.run(run())
    assert result.outcome is Outcome.FAILED and result.error.startswith("bad_response")
    assert result.attempts == 1


@pytest.mark.parametrize("spec", SPECS)
def test_rerun_is_served_from_the_cache(spec, settings, conn, fake, time_):
    config = _configured(settings, fake, spec)
    query = _query()
    fake.enqueue("malformed", "malformed")  # the unscored pair is cached too

    async def judge_twice(session):
        async with session:
            return (await session.judge1.relevance(query, "a document about aspirin"),
                    await session.judge1.relevance(query, "another document"))

    first_session = _session(config, conn, time_)
    first = asyncio.run(judge_twice(first_session))
    sent = fake.chat_requests
    assert sent == 3 and [r.outcome for r in first] == [Outcome.UNSCORED, Outcome.SCORED]
    second_session = _session(config, conn, time_)
    second = asyncio.run(judge_twice(second_session))
    assert fake.chat_requests == sent  # zero requests reached the server
    assert [r.outcome for r in second] == [r.outcome for r in first]
    assert [r.value for r in second] == [r.value for r in first]
    assert second_session.stats.provider_calls == 0 and second_session.stats.cache_hits == 3
    assert sum(r.cost_usd for r in second) == 0.0
    assert _rows(conn, "api_cost_log", second_session.run_id) == []


def test_identical_requests_in_flight_share_one_call(settings, conn, fake, time_):
    fake.latency = 0.05
    session = _session(_configured(settings, fake, "openai:gpt-4o"), conn, time_)
    query = _query()

    async def run():
        async with session:
            return await asyncio.gather(*(session.judge1.relevance(query, "same doc")
                                          for _ in range(5)))

    results = asyncio.run(run())
    assert all(r.scored for r in results) and fake.chat_requests == 1
    assert session.stats.cache_hits == 4 and session.stats.billed_calls == 1


def test_budget_stops_the_run_before_it_would_be_exceeded(settings, conn, fake, time_):
    config = _configured(settings, fake, "openai:gpt-4o")
    session = _session(config, conn, time_)
    queries = [_query() for _ in range(8)]
    document = "aspirin lowers the risk of heart attacks"
    worst = PriceTable(config.judges.prices).worst_case(
        session.judge1.relevance_request(queries[0], document))
    budget = 2.5 * worst  # a call is sent only if its worst case still fits
    session.pipeline.budget.limit_usd = budget

    async def run():
        done = []
        async with session:
            for query in queries:
                try:
                    done.append(await session.judge1.relevance(query, document))
                except BudgetExhausted as exc:
                    return done, str(exc)
            return done, None

    done, stop = asyncio.run(run())
    assert stop and "judges.budget_usd" in stop and session.pipeline.stopped == "budget"
    assert 2 <= len(done) < len(queries) and all(r.scored for r in done)
    costs = [c[0] for c in _rows(conn, "api_cost_log", session.run_id, "estimated_cost")]
    assert len(costs) == len(done) == fake.chat_requests  # what was spent is kept
    assert sum(costs) <= budget < sum(costs) + worst      # stopped only when it had to

    async def after_stop():  # a cached reply is still free to read
        async with _session(config, conn, time_) as again:
            again.pipeline.stopped, again.pipeline.stop_reason = "budget", stop
            return await again.judge1.relevance(queries[0], document)

    assert asyncio.run(after_stop()).value == done[0].value


def test_cost_rows_equal_billed_calls_under_faults(settings, conn, fake, time_):
    fake.fault_rate, fake.fault_kinds = 0.35, ("429", "503", "529", "malformed")
    config = judge_settings(settings, fake, judge1="openai:gpt-4o",
                            judge2="anthropic:claude-haiku-4-5")
    session = _session(config, conn, time_)

    async def run():
        async with session:
            return await asyncio.gather(*(judge.relevance(_query(), f"document {i}")
                                          for i in range(15)
                                          for judge in (session.judge1, session.judge2)))

    results = asyncio.run(run())
    stats = session.stats
    costs = _rows(conn, "api_cost_log", session.run_id,
                  "api_name, model, input_tokens, output_tokens, cached_tokens, estimated_cost")
    assert len(costs) == stats.billed_calls == sum(r.calls for r in results)
    assert sum(c[5] for c in costs) == pytest.approx(stats.cost_usd)
    prices = PriceTable(config.judges.prices)
    for _api, model, tokens_in, tokens_out, _cached, cost in costs:
        price = prices.lookup(model)
        assert cost == pytest.approx((tokens_in * price.input + tokens_out * price.output) / 1e6)
    retries = _rows(conn, "api_retry_log", session.run_id)
    assert len(retries) == stats.retries > 0
    assert stats.provider_calls == len(fake.chat_records())
    assert all(r.outcome in (Outcome.SCORED, Outcome.UNSCORED) for r in results)


def test_requests_in_flight_are_bounded(settings, conn, fake, time_):
    fake.latency = 0.05
    session = _session(_configured(settings, fake, "openai:gpt-4o", concurrency=3), conn, time_)

    async def run():
        async with session:
            return await asyncio.gather(*(session.judge1.relevance(_query(), "d")
                                          for _ in range(12)))

    assert all(r.scored for r in asyncio.run(run()))
    assert 2 <= fake.max_in_flight <= 3


def test_temperature_is_sent_where_the_api_accepts_it(settings, conn, fake, time_):
    config = judge_settings(settings, fake, judge1="openai:gpt-4o",
                            judge2="anthropic:claude-haiku-4-5")
    session = _session(config, conn, time_)

    async def run():
        async with session:
            await session.judge1.relevance(_query(), "d")
            await session.judge2.relevance(_query(), "d")

    asyncio.run(run())
    openai_body = fake.chat_records("openai")[0].body
    anthropic_body = fake.chat_records("anthropic")[0].body
    assert openai_body["temperature"] == 0.0 and openai_body["max_tokens"] == 100
    assert "temperature" not in anthropic_body and anthropic_body["max_tokens"] == 100
    assert anthropic_body["system"].startswith("You are evaluating the relevance")


def test_api_keys_never_leak_into_errors_logs_or_reprs(settings, conn, fake, time_, caplog):
    fake.echo_auth_on_error = True
    fake.enqueue("400", "400")
    config = judge_settings(settings, fake, judge1="openai:gpt-4o",
                            judge2="anthropic:claude-haiku-4-5")
    session = _session(config, conn, time_)

    async def run():
        async with session:
            return (await session.judge1.relevance(_query(), "d"),
                    await session.judge2.relevance(_query(), "d"))

    results = asyncio.run(run())
    keys = (config.openai_api_key, config.anthropic_api_key)
    texts = [r.error for r in results] + [repr(config), repr(session.pipeline.providers),
                                          caplog.text]
    assert all(r.outcome is Outcome.FAILED for r in results)
    assert "***" in results[0].error  # the echoed header was there, and was masked
    for text in texts:
        for key in keys:
            assert key not in text


@pytest.mark.unit
def test_rate_limiter_spaces_requests_and_tokens_on_a_fake_clock():
    time_ = FakeTime()

    async def run():
        limiter = RateLimiter(120, None, clock=time_.clock, sleep=time_.sleep)
        for _ in range(12):
            await limiter.acquire()
        tokens = RateLimiter(1e6, 600, clock=time_.clock, sleep=time_.sleep)
        time_.now += 1.0  # idle for a second: the buckets start empty and are full now
        start = time_.now
        await tokens.acquire(10)             # a full bucket: immediate
        await tokens.acquire(10)             # 10 tokens at 10/s: one second
        await tokens.acquire(25)             # more than the bucket: waits for a full one
        await tokens.acquire(5)              # ... and the debt of 15 is waited off first
        return time_.now - start

    token_seconds = asyncio.run(run())
    # 120/min = 2/s, from an empty bucket: twelve requests take 6 s, one every 0.5 s
    assert sum(time_.sleeps[:12]) == pytest.approx(6.0)
    assert token_seconds == pytest.approx(1.0 + 1.0 + 2.0)


def test_rate_limiter_holds_the_pipeline_to_the_configured_rate(settings, conn, fake, time_):
    config = _configured(settings, fake, "openai:gpt-4o",
                         rate_limits={"openai": RateLimit(60, None),
                                      "anthropic": RateLimit(60, None)})
    session = _session(config, conn, time_)

    async def run():
        async with session:
            start = time_.now
            await asyncio.gather(*(session.judge1.relevance(_query(), "d") for _ in range(6)))
            return time_.now - start

    elapsed = asyncio.run(run())
    assert elapsed == pytest.approx(6.0)  # 60/min from an empty bucket: one a second
