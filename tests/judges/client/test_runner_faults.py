"""Judges: a rejected key stops the run naming the provider (never the key), retry
rows survive a kill, and pairs left unscored can be re-asked (``judge --retry-unscored``).

Real store, real SDKs against the fake server (tests/support/fake_llm_server.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import anthropic
import httpx2
import openai
import pytest

from beir_factory import ingest_aspirin_dataset
from eval_harness.judges.client.retry import classify_error
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.client.stops import AuthenticationRejected, RunStopped
from eval_harness.judges.dual.run import judge_dataset
from fake_llm_server import FakeTime, default_reply, judge_settings
from paths import REPO

LLM = {"judge1": "openai:gpt-4o", "judge2": "anthropic:claude-haiku-4-5"}
KEY = "sk-test-secret-0123456789"


@pytest.fixture
def dataset(tmp_path, conn):
    return ingest_aspirin_dataset(conn, tmp_path / "data", "h16c")


def _scalar(conn, query: str, params=()):
    return conn.execute(query, params).fetchone()[0]


# ---------------------------------------------------------------------------------------
# 5c. A rejected key: one sentence naming the provider and its server, and the run stops


def _sdk_error(sdk: str, status: int, body: dict):
    if sdk == "openai":
        client = openai.AsyncOpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1")
        url = "http://127.0.0.1:9/v1/chat/completions"
    else:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url="http://127.0.0.1:9")
        url = "http://127.0.0.1:9/v1/messages"
    response = httpx2.Response(status, json=body, request=httpx2.Request("POST", url))
    return client._make_status_error_from_response(response)


@pytest.mark.unit
@pytest.mark.parametrize("sdk, status, body", [
    ("openai", 401, {"error": {"message": f"Incorrect API key provided: {KEY}",
                               "type": "invalid_request_error", "code": "invalid_api_key"}}),
    ("openai", 403, {"error": {"message": "You have insufficient permissions",
                               "type": "invalid_request_error", "code": None}}),
    ("anthropic", 401, {"type": "error", "error": {"type": "authentication_error",
                                                   "message": "invalid x-api-key"}}),
    ("anthropic", 403, {"type": "error", "error": {"type": "permission_error",
                                                   "message": "no access to this model"}}),
])
def test_a_rejected_key_is_classified_as_auth_permanent(sdk, status, body):
    info = classify_error(_sdk_error(sdk, status, body), sdk, secrets=[KEY])
    assert (info.kind, info.retryable, info.status_code) == ("auth", False, status)
    assert KEY not in info.message


@pytest.mark.unit
@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_client_errors_stay_client_errors(status):
    body = {"error": {"message": "bad", "type": "invalid_request_error", "code": None}}
    assert classify_error(_sdk_error("openai", status, body), "openai").kind == "client_error"


@pytest.mark.parametrize("spec, fault", [("openai:gpt-4o", "401"),
                                         ("anthropic:claude-haiku-4-5", "401"),
                                         ("anthropic:claude-haiku-4-5", "403")])
def test_a_rejected_key_is_not_retried_and_stops_the_run(spec, fault, settings, conn, fake):
    fake.enqueue(fault)  # one refusal: a later request would be answered if it were sent
    time_ = FakeTime()
    config = judge_settings(settings, fake, judge1=spec, judge2="local:lexical")
    session = JudgeSession(config, conn, run_id=uuid.uuid4().hex[:12], rng=random.Random(1),
                           **time_.options())
    provider = spec.split(":")[0]

    async def run():
        async with session:
            with pytest.raises(AuthenticationRejected) as first:
                await session.judge1.relevance(f"aspirin {uuid.uuid4().hex}", "a document")
            with pytest.raises(AuthenticationRejected):  # not sent at all
                await session.judge1.relevance(f"aspirin {uuid.uuid4().hex}", "another")
            return str(first.value)

    message = asyncio.run(run())
    assert fake.chat_requests == 1 and time_.waits == []
    assert isinstance(AuthenticationRejected(message), RunStopped)
    assert session.pipeline.stopped == "auth"
    assert message.startswith(f"the {provider} server at http://127.0.0.1:{fake.port}")
    assert f"HTTP {fault}" in message and "\n" not in message
    for key in (config.openai_api_key, config.anthropic_api_key):
        assert key not in message


def test_a_dual_run_with_a_rejected_key_stops_early_with_one_sentence(settings, conn, fake,
                                                                      dataset):
    fake.reject_key = True
    config = judge_settings(settings, fake, **LLM, concurrency=1)
    summary = judge_dataset(conn, config, dataset, session_options=FakeTime().options())
    text = summary.format()
    assert summary.stopped == "auth" and not summary.complete
    assert summary.failed == 0 and summary.queries_written == 0  # no pair stored as failed
    assert 1 <= fake.chat_requests <= 2 < summary.pairs  # one refusal per provider at most
    assert "stopped early: the " in text and "rejected the API key" in text
    assert f"127.0.0.1:{fake.port}" in text
    for key in (config.openai_api_key, config.anthropic_api_key):
        assert key not in text


def test_the_fake_servers_reject_key_knob_is_restored_by_reset(fake):
    fake.reject_key = True
    fake.reset()
    assert fake.reject_key is False


# ---------------------------------------------------------------------------------------
# 9. Retry rows are committed as they happen: a kill loses none

CHILD = """
    import json, sys
    from types import SimpleNamespace
    from eval_harness.settings.judges import RetrySettings
    from eval_harness.judges.dual.run import judge_dataset
    from eval_harness.settings import load_settings
    from eval_harness.store import StoreLocation
    from fake_llm_server import judge_settings

    a = json.loads(sys.argv[1])
    base = load_settings(a["config"], environ={"DATABASE_URL": a["url"],
                                               "DAGSTER_HOME": a["dagster_home"]})
    server = SimpleNamespace(openai_base_url=a["openai"], anthropic_base_url=a["anthropic"])
    settings = judge_settings(base, server, judge1=a["judge1"], judge2=a["judge2"],
                              concurrency=a["concurrency"],
                              retry=RetrySettings(base_delay_seconds=0.01, jitter=0.0))
    with StoreLocation(a["url"]).connection() as conn:
        summary = judge_dataset(conn, settings, a["dataset"], run_id=a["run_id"])
    print(json.dumps(summary.to_dict()))
"""


def _spawn(store, fake, tmp_path, dataset: str, run_id: str, concurrency: int):
    args = {"config": str(REPO / "config.yaml"), "url": store.url,
            "dagster_home": str(tmp_path / "dagster"), "openai": fake.openai_base_url,
            "anthropic": fake.anthropic_base_url, "dataset": dataset, "run_id": run_id,
            "concurrency": concurrency, **LLM}
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")
           and k not in ("DATABASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests' / 'support'}", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD), json.dumps(args)],
                            env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_retry_rows_of_a_killed_run_are_all_stored(store, fake, tmp_path, dataset):
    """Every request fails once with a 503 and then succeeds; after ``delivered`` replies the
    server holds the rest, so every slot ends up waiting on a held request. The run is then
    SIGKILLed: each 503 the client received must have its ``api_retry_log`` row, including
    those of calls whose retry was still waiting."""
    seen: set[tuple[str, str]] = set()

    def first_attempt_fails(api: str, user: str) -> str | None:
        if (api, user) in seen:
            return None
        seen.add((api, user))
        return "503"

    concurrency, delivered = 2, 9
    fake.fault_rule = first_attempt_fails
    fake.hold_replies_after(delivered)
    run_id = uuid.uuid4().hex[:12]
    victim = _spawn(store, fake, tmp_path, dataset, run_id, concurrency)
    deadline = time.monotonic() + 30
    while sum(r.held for r in fake.chat_records()) < 2 * concurrency:  # every slot waits
        if victim.poll() is not None or time.monotonic() > deadline:
            victim.kill()
            pytest.fail(f"the run did not fill its slots: {victim.communicate()}")
        time.sleep(0.02)
    time.sleep(0.5)  # nothing can move now; a call that got a 503 has logged it by now
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    victim.communicate()
    fake.release_replies()
    retried = sum(1 for r in fake.chat_records() if not r.held and r.status == 503)
    assert retried >= 3  # the scenario did retry before the kill
    with store.connection(autocommit=True) as watch:
        rows = _scalar(watch, "SELECT count(*) FROM api_retry_log WHERE run_id = %s",
                       (run_id,))
        succeeded = _scalar(watch, "SELECT count(*) FROM api_retry_log WHERE run_id = %s "
                            "AND success", (run_id,))
        paid = _scalar(watch, "SELECT count(*) FROM api_cost_log WHERE run_id = %s", (run_id,))
    assert rows == retried
    assert succeeded == paid  # a retried call that got its reply is marked as succeeded


# ---------------------------------------------------------------------------------------
# 8. A pair left unscored is incomplete, and `judge --retry-unscored` re-asks exactly it


def write_judged(path, dataset):
    path.write_text(f"""
default_dataset: {dataset}
hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
judges:
  judge1: openai:gpt-4o
  judge2: anthropic:claude-haiku-4-5
  budget_usd: 1.0
  rate_limits:
    openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
    anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
""")


pytestmark = pytest.mark.project(config=write_judged, judges_on_fake="cli")  # the tests below


def _judge(config: str, *extra: str) -> tuple[int, str]:
    from eval_harness.cli import main
    from eval_harness_pipelines import cli  # noqa: F401 (the CLI as users run it)

    return main(["--config", config, "judge", *extra]), ""


def test_unscored_pairs_are_incomplete_and_retry_unscored_re_asks_exactly_them(
        project, conn, fake, dataset, capsys):
    bad = "document 0 about"  # every reply about this document is garbage, re-ask included

    def garbage_for_one_document(api, system, user, body):
        return "no idea" if bad in user else default_reply(api, system, user, body)

    fake.responder = garbage_for_one_document
    code, _ = _judge(str(project))
    out = capsys.readouterr()[0]
    unscored = int(re.search(r"unscored (\d+)", out).group(1))
    assert unscored >= 2  # both judges, on every pair with that document
    assert code == 1, out  # incomplete: not every pair has a score
    assert "judge --retry-unscored" in out
    first_calls = fake.chat_requests

    # a plain rerun answers from the cache: the same garbage, still unscored, nothing paid
    code, _ = _judge(str(project))
    out = capsys.readouterr()[0]
    assert code == 1 and f"unscored {unscored}" in out and fake.chat_requests == first_calls

    # the provider answers properly now: --retry-unscored asks those pairs only, once each
    fake.responder = default_reply
    code, _ = _judge(str(project), "--retry-unscored", "--json")
    summary = json.loads(capsys.readouterr()[0])
    asked = fake.chat_records()[first_calls:]
    assert code == 0 and summary["unscored"] == 0 and summary["failed"] == 0
    assert len(asked) == unscored == summary["billed_calls"]
    assert all(bad in json.dumps(r.body) for r in asked)

    # the new replies replaced the bad ones in the cache: a plain rerun is complete, free
    code, _ = _judge(str(project))
    out = capsys.readouterr()[0]
    assert code == 0 and "unscored 0" in out and fake.chat_requests == first_calls + unscored
