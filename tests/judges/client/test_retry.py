"""Error classes of the judge pipeline, quota exhaustion above all: an account
without quota or credit is not a rate limit. It is not retried, says so in one sentence
naming the provider (never the key), and stops the run instead of failing every pair alike.

The classification is checked on real SDK exceptions, built by each SDK from an HTTP
response, and end to end through the real SDKs against the fake server.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import anthropic
import httpx2
import openai
import pytest

from beir_factory import ingest_aspirin_dataset
from eval_harness.judges.client.retry import classify_error
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.client.stops import QuotaExhausted, RunStopped
from eval_harness.judges.dual.run import judge_dataset
from fake_llm_server import QUOTA_FAULTS, FakeTime, judge_settings

SPECS = ["openai:gpt-4o", "anthropic:claude-haiku-4-5"]
KEY = "sk-test-secret-0123456789"


def _sdk_error(sdk: str, status: int, body: dict, headers: dict | None = None):
    """The exception the SDK itself raises for this HTTP response."""
    if sdk == "openai":
        client = openai.AsyncOpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1")
        url = "http://127.0.0.1:9/v1/chat/completions"
    else:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url="http://127.0.0.1:9")
        url = "http://127.0.0.1:9/v1/messages"
    response = httpx2.Response(status, json=body, headers=headers or {},
                               request=httpx2.Request("POST", url))
    return client._make_status_error_from_response(response)


def _openai_body(code, type_, message="refused"):
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _anthropic_body(type_, message="refused", error_code=None):
    error = {"type": type_, "message": message}
    if error_code:
        error["details"] = {"error_code": error_code}
    return {"type": "error", "error": error}


@pytest.mark.unit
@pytest.mark.parametrize("sdk, status, body, headers, kind, code, retry_after", [
    # OpenAI: the quota comes as a 429, like a rate limit
    ("openai", 429, _openai_body("insufficient_quota", "insufficient_quota",
                                 "You exceeded your current quota, please check your plan."),
     {"retry-after": "20"}, "quota", "insufficient_quota", None),
    ("openai", 429, _openai_body(None, "insufficient_quota"), {}, "quota",
     "insufficient_quota", None),
    ("openai", 429, _openai_body("billing_not_active", "invalid_request_error"), {}, "quota",
     "billing_not_active", None),
    ("openai", 400, _openai_body("billing_hard_limit_reached", "invalid_request_error"), {},
     "quota", "billing_hard_limit_reached", None),
    ("openai", 429, _openai_body("rate_limit_exceeded", "requests"), {"retry-after": "2"},
     "rate_limit", None, 2.0),
    ("openai", 400, _openai_body(None, "invalid_request_error"), {}, "client_error", None, None),
    # Anthropic: the credit balance 400, billing 402, spend limits 429
    ("anthropic", 400, _anthropic_body(
        "invalid_request_error", "Your credit balance is too low to access the Anthropic API. "
        "Please go to Plans & Billing to upgrade or purchase credits."), {}, "quota",
     "credit_balance_too_low", None),
    ("anthropic", 400, _anthropic_body("invalid_request_error", "max_tokens: field required"),
     {}, "client_error", None, None),
    ("anthropic", 402, _anthropic_body("billing_error"), {}, "quota", "billing_error", None),
    ("anthropic", 402, {"type": "error", "error": {"type": "api_error", "message": "pay"}}, {},
     "quota", "payment_required", None),
    ("anthropic", 429, _anthropic_body("rate_limit_error", "usage limits",
                                       "enforced_spend_limit_reached"),
     {"retry-after": "30"}, "quota", "enforced_spend_limit_reached", None),
    ("anthropic", 429, _anthropic_body("rate_limit_error", "contract",
                                       "contract_spend_limit_reached"), {}, "quota",
     "contract_spend_limit_reached", None),
    ("anthropic", 429, _anthropic_body("rate_limit_error", "ramping", "ramp_limit_exceeded"),
     {"retry-after": "3"}, "rate_limit", None, 3.0),  # waiting does fix a ramp limit
    ("anthropic", 429, _anthropic_body("rate_limit_error"), {"retry-after": "1"}, "rate_limit",
     None, 1.0),
    ("anthropic", 529, _anthropic_body("overloaded_error"), {}, "overloaded", None, None),
])
def test_sdk_errors_are_classified(sdk, status, body, headers, kind, code, retry_after):
    info = classify_error(_sdk_error(sdk, status, body, headers), sdk, secrets=[KEY])
    assert (info.kind, info.code, info.retry_after) == (kind, code, retry_after)
    assert info.retryable == (kind in ("rate_limit", "overloaded"))
    assert info.status_code == status and KEY not in info.message


@pytest.mark.unit
def test_a_quota_error_echoing_the_key_is_classified_with_the_key_masked():
    body = _openai_body("insufficient_quota", "insufficient_quota",
                        f"no quota left for Bearer {KEY}")
    info = classify_error(_sdk_error("openai", 429, body), "openai", secrets=[KEY])
    assert info.kind == "quota" and KEY not in info.message and "***" in info.message


# ---------------------------------------------------------------------------------------
# End to end: the fake server says the account has no quota


@pytest.fixture
def time_():
    return FakeTime()


def _query() -> str:
    return f"aspirin heart attack risk {uuid.uuid4().hex}"


def _session(config, conn, time_) -> JudgeSession:
    return JudgeSession(config, conn, run_id=uuid.uuid4().hex[:12], rng=random.Random(3),
                        **time_.options())


def _rows(conn, table: str, run_id: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = %s",
                        (run_id,)).fetchone()[0]


def test_the_fake_servers_no_quota_knob_is_restored_by_reset(fake):
    fake.no_quota = True
    fake.reset()
    assert fake.no_quota is False


@pytest.mark.parametrize("spec, refusal", [
    ("openai:gpt-4o", "no_quota"), ("anthropic:claude-haiku-4-5", "no_quota"),
    ("anthropic:claude-haiku-4-5", "billing_402"),
    ("anthropic:claude-haiku-4-5", "spend_limit")])
def test_no_quota_is_not_retried_and_stops_the_run(spec, refusal, settings, conn, fake, time_):
    assert refusal in QUOTA_FAULTS
    fake.enqueue(refusal)  # one refusal only: a later request would be answered if sent
    config = judge_settings(settings, fake, judge1=spec, judge2="local:lexical")
    session = _session(config, conn, time_)
    provider = spec.split(":")[0]

    async def run():
        async with session:
            with pytest.raises(QuotaExhausted) as first:
                await session.judge1.relevance(_query(), "aspirin lowers heart attack risk")
            with pytest.raises(QuotaExhausted) as later:  # not sent at all
                await session.judge1.relevance(_query(), "another document")
            local = await session.judge2.relevance(_query(), "local judges still answer")
            return str(first.value), str(later.value), local

    first, later, local = asyncio.run(run())
    assert fake.chat_requests == 1 and time_.waits == []  # no retry, no wait
    assert session.pipeline.stopped == "quota" and session.pipeline.stop_reason == first
    assert later == first and local.scored
    assert first.startswith(f"the {provider} account at http://127.0.0.1:{fake.port}")
    assert "no quota or credit left" in first and "run again" in first and "\n" not in first
    for key in (config.openai_api_key, config.anthropic_api_key):
        assert key not in first
    assert session.stats.failed_calls == 1 and session.stats.billed_calls == 0
    assert _rows(conn, "api_retry_log", session.run_id) == 0
    assert _rows(conn, "api_cost_log", session.run_id) == 0


def test_calls_waiting_for_a_slot_are_not_sent_once_the_quota_stopped_the_run(settings, conn,
                                                                             fake, time_):
    fake.no_quota = True
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical",
                            concurrency=1)
    session = _session(config, conn, time_)

    async def run():
        async with session:
            return await asyncio.gather(*(session.judge1.relevance(_query(), f"doc {i}")
                                          for i in range(6)), return_exceptions=True)

    outcomes = asyncio.run(run())
    assert all(isinstance(o, QuotaExhausted) for o in outcomes)
    assert fake.chat_requests == 1


def test_cached_replies_are_still_served_after_the_quota_stopped_the_run(settings, conn, fake,
                                                                        time_):
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical")
    query = _query()
    session = _session(config, conn, time_)

    async def run():
        async with session:
            paid = await session.judge1.relevance(query, "cached document")
            fake.no_quota = True
            with pytest.raises(QuotaExhausted):
                await session.judge1.relevance(query, "new document")
            return paid, await session.judge1.relevance(query, "cached document")

    paid, again = asyncio.run(run())
    assert paid.scored and again.value == paid.value and again.cache_hits == 1
    assert fake.chat_requests == 2


# ---------------------------------------------------------------------------------------
# A dual-judge run stops early instead of failing every pair


@pytest.fixture
def dataset(tmp_path, conn):
    return ingest_aspirin_dataset(conn, tmp_path / "data", "quota")


@pytest.mark.parametrize("batch", [False, True], ids=["live", "batch"])
def test_a_dual_judge_run_without_quota_stops_early_and_writes_nothing(batch, settings, conn,
                                                                       fake, dataset):
    fake.no_quota = True
    config = judge_settings(settings, fake, judge1="openai:gpt-4o",
                            judge2="anthropic:claude-haiku-4-5", concurrency=1)
    summary = judge_dataset(conn, config, dataset, batch=batch,
                            session_options=FakeTime().options())
    assert summary.stopped == "quota" and not summary.complete
    assert summary.queries_written == 0 and summary.failed == 0  # no pair stored as failed
    assert "no quota or credit left" in summary.stop_reason
    assert f"stopped early: {summary.stop_reason}" in summary.format()
    assert summary.billed_calls == 0 and summary.retries == 0
    if batch:  # the first refused batch stops the run: nothing else is submitted or sent
        assert len(fake.batch_submissions()) == 1 and fake.chat_requests == 0
    else:      # at most one refusal per provider, not one per pair
        assert 1 <= fake.chat_requests <= 2 < summary.pairs
    assert conn.execute("SELECT count(*) FROM ground_truth WHERE dataset = %s AND "
                        "judged_docs IS NOT NULL", (dataset,)).fetchone()[0] == 0


@pytest.mark.unit
def test_run_stopped_covers_both_reasons():
    from eval_harness.judges.client.stops import BudgetExhausted

    assert issubclass(QuotaExhausted, RunStopped) and issubclass(BudgetExhausted, RunStopped)
    assert not issubclass(QuotaExhausted, BudgetExhausted)
