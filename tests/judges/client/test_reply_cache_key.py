"""The reply cache key names the server: two servers speaking one API with a model
of the same name never answer for each other, a rerun against the same server (however its
URL is spelled) is served from the cache, and rows written under the old key recipe (no
server in it) are never read. Real SDKs against two fake servers, on a real store."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import uuid
from dataclasses import replace

import pytest

from eval_harness.judges.client.providers import endpoint_of, provider
from eval_harness.judges.client.providers.base import normalised_base_url
from eval_harness.judges.client.reply_cache import cache_key, request_server
from eval_harness.judges.client.session import JudgeSession, JudgeUnavailable
from eval_harness.judges.protocol import ChatRequest, Message
from fake_llm_server import FakeLLMServer, FakeTime, default_reply, judge_settings

SPECS = ["openai:gpt-4o", "anthropic:claude-haiku-4-5"]


def _replying(score: str):
    """A responder giving ``score`` to every relevance question (other prompts as usual)."""
    def responder(api, system, user, body):
        return score if "Relevance score" in user else default_reply(api, system, user, body)

    return responder


pytestmark = pytest.mark.fake_llm(responder=_replying("0.2"))


@pytest.fixture
def other_server():
    """A second server of the same kind: same APIs, same model names, other answers."""
    with FakeLLMServer(responder=_replying("0.9")) as second:
        yield second


def _request(**changes) -> ChatRequest:
    base = ChatRequest("openai", "gpt-4o", "relevance", "relevance-v1", "sys",
                       (Message("user", "u"),), 0.0, 100)
    return replace(base, **changes)


def _base_url(spec: str, server: FakeLLMServer) -> str:
    return server.openai_base_url if spec.startswith("openai") else server.anthropic_base_url


def _pointed_at(settings, spec: str, server: FakeLLMServer, base_url: str | None = None):
    """``settings`` judging with ``spec`` (judge 2 local) on ``server``, optionally through
    another spelling of its base URL."""
    config = judge_settings(settings, server, judge1=spec, judge2="local:lexical")
    if base_url is not None:
        config = replace(config, **{f"{spec.split(':')[0]}_base_url": base_url})
    return config


def _judge(config, conn, query: str, document: str):
    async def run():
        async with JudgeSession(config, conn, rng=random.Random(1),
                                **FakeTime().options()) as session:
            result = await session.judge1.relevance(query, document)
            return result, session

    return asyncio.run(run())


def _legacy_key(request: ChatRequest) -> str:
    """The key recipe before the server was part of it (key version 1), verbatim."""
    payload = {"provider": request.provider, "model": request.model,
               "prompt_version": request.prompt_version,
               "temperature": float(request.temperature),
               "max_tokens": int(request.max_tokens), "system": request.system,
               "messages": [[m.role, m.content] for m in request.messages]}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------
# Normalising a base URL


@pytest.mark.unit
@pytest.mark.parametrize("given, normalised", [
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("https://api.openai.com/v1/", "https://api.openai.com/v1"),
    ("HTTPS://API.OpenAI.com:443/v1//", "https://api.openai.com/v1"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:80/v1", "http://127.0.0.1/v1"),
    ("https://gateway.example:8443", "https://gateway.example:8443"),
    ("https://api.anthropic.com/", "https://api.anthropic.com"),
    ("http://[::1]:8000/v1/", "http://[::1]:8000/v1"),
    ("  http://vllm:8000/v1 ", "http://vllm:8000/v1"),
    # credentials, query and fragment never survive
    ("https://user:s3cret@proxy.example/v1?api-key=k3y#frag", "https://proxy.example/v1"),
    ("https://tok3n@proxy.example:443/openai/v1/", "https://proxy.example/openai/v1"),
])
def test_base_urls_are_normalised_to_scheme_host_port_and_path(given, normalised):
    assert normalised_base_url(given) == normalised
    assert normalised_base_url(normalised) == normalised  # idempotent


@pytest.mark.unit
@pytest.mark.parametrize("given", ["localhost:8000/v1", "api.openai.com/v1", "ftp://host/v1",
                                   "http://host:notaport/v1", "", "https://"])
def test_a_value_that_is_not_a_url_is_refused_without_being_repeated(given):
    with pytest.raises(ValueError) as error:
        normalised_base_url(given)
    # one fixed sentence: the value may hold credentials, so it is never repeated
    assert str(error.value) == "a base URL must look like https://host[:port]/path"


@pytest.mark.unit
def test_no_base_url_is_the_providers_default_server():
    for name in ("openai", "anthropic"):
        default = provider(name).default_base_url
        assert endpoint_of(name, None) == endpoint_of(name, "") == default
        assert endpoint_of(name, default + "/") == default


# ---------------------------------------------------------------------------------------
# The key


def test_cache_key_covers_exactly_what_changes_the_output():
    base = ChatRequest("openai", "gpt-4o", "relevance", "relevance-v1", "sys",
                       (Message("user", "u"),), 0.0, 100)
    same = ChatRequest("openai", "gpt-4o", "relevance", "relevance-v1", "sys",
                       (Message("user", "u"),), 0.0, 100)
    assert cache_key(base) == cache_key(same)
    variants = [
        ChatRequest("anthropic", "gpt-4o", "relevance", "relevance-v1", "sys",
                    (Message("user", "u"),), 0.0, 100),
        ChatRequest("openai", "gpt-4o-mini", "relevance", "relevance-v1", "sys",
                    (Message("user", "u"),), 0.0, 100),
        ChatRequest("openai", "gpt-4o", "relevance", "relevance-v2", "sys",
                    (Message("user", "u"),), 0.0, 100),
        ChatRequest("openai", "gpt-4o", "relevance", "relevance-v1", "sys",
                    (Message("user", "u"),), 0.7, 100),
        ChatRequest("openai", "gpt-4o", "relevance", "relevance-v1", "sys",
                    (Message("user", "u"),), 0.0, 101),
        ChatRequest("openai", "gpt-4o", "relevance", "relevance-v1", "sys2",
                    (Message("user", "u"),), 0.0, 100),
        base.followed_by("bad", "again"),
    ]
    keys = {cache_key(v) for v in variants}
    assert len(keys) == len(variants) and cache_key(base) not in keys


def test_the_key_names_the_server_and_nothing_about_how_its_url_is_spelled():
    default = _request()
    assert cache_key(_request(base_url="https://api.openai.com/v1/")) == cache_key(default)
    assert cache_key(_request(base_url="HTTPS://api.openai.com:443/v1")) == cache_key(default)
    vllm = _request(base_url="http://127.0.0.1:8000/v1")
    assert cache_key(vllm) != cache_key(default)
    assert cache_key(_request(base_url="http://127.0.0.1:8001/v1")) != cache_key(vllm)
    assert cache_key(_request(base_url="http://127.0.0.1:8000/v2")) != cache_key(vllm)
    # credentials or a query in the URL do not make another server, nor enter the key
    assert cache_key(_request(base_url="http://u:pw@127.0.0.1:8000/v1/?k=1")) \
        == cache_key(vllm)
    # the default servers of two providers are two servers (the provider differs anyway)
    assert cache_key(replace(default, provider="anthropic")) != cache_key(default)


@pytest.mark.unit
def test_the_key_recipe_changed_so_old_rows_cannot_match():
    for request in (_request(), _request(base_url="http://127.0.0.1:8000/v1"),
                    _request(provider="anthropic", model="claude-haiku-4-5")):
        assert cache_key(request) != _legacy_key(request)


# ---------------------------------------------------------------------------------------
# Two servers, real SDKs


@pytest.mark.parametrize("spec", SPECS)
def test_two_servers_with_the_same_model_name_never_share_replies(spec, settings, conn, fake,
                                                                  other_server):
    query = f"aspirin heart attack {uuid.uuid4().hex}"
    document = "aspirin lowers heart attack risk"
    at_first = _pointed_at(settings, spec, fake)
    at_second = _pointed_at(settings, spec, other_server)

    first, _ = _judge(at_first, conn, query, document)
    assert first.scored and first.value == 0.2 and fake.chat_requests == 1

    second, session = _judge(at_second, conn, query, document)
    assert other_server.chat_requests == 1  # not answered from the first server's reply
    assert second.scored and second.value == 0.9 and second.cache_hits == 0
    assert session.stats.billed_calls == 1

    # a rerun against each server is answered from the cache, its own reply each time, even
    # with the first server's URL spelled differently
    respelled = _base_url(spec, fake) + "/"
    again_first, session = _judge(_pointed_at(settings, spec, fake, respelled), conn, query,
                                  document)
    again_second, _ = _judge(at_second, conn, query, document)
    assert (again_first.value, again_second.value) == (0.2, 0.9)
    assert again_first.cache_hits == again_second.cache_hits == 1
    assert session.stats.provider_calls == 0
    assert (fake.chat_requests, other_server.chat_requests) == (1, 1)  # nothing paid twice


@pytest.mark.parametrize("spec", SPECS)
def test_a_row_written_under_the_old_key_is_not_served_and_is_paid_for_once(
        spec, settings, conn, fake):
    config = _pointed_at(settings, spec, fake)
    query, document = f"statins cholesterol {uuid.uuid4().hex}", "statins lower cholesterol"

    async def planned_request():
        async with JudgeSession(config, conn) as session:
            return session.judge1.relevance_request(query, document)

    request = asyncio.run(planned_request())
    assert request_server(request) == _base_url(spec, fake)
    # a reply cached before the upgrade, by whichever server: it does not say which
    conn.execute("INSERT INTO judge_cache (key, provider, model, operation, prompt_version, "
                 "reply) VALUES (%s, %s, %s, 'relevance', %s, '1.0')",
                 (_legacy_key(request), request.provider, request.model,
                  request.prompt_version))
    conn.commit()

    first, _ = _judge(config, conn, query, document)
    assert fake.chat_requests == 1 and first.value == 0.2 and first.cache_hits == 0
    again, _ = _judge(config, conn, query, document)
    assert fake.chat_requests == 1 and again.value == 0.2 and again.cache_hits == 1


def test_a_request_addressed_to_another_server_than_its_providers_is_refused(settings, conn,
                                                                             fake):
    config = _pointed_at(settings, "openai:gpt-4o", fake)

    async def run():
        async with JudgeSession(config, conn) as session:
            planned = session.judge1.relevance_request("q", "d")
            assert session.pipeline.cache_key(planned) == cache_key(planned)
            stray = replace(planned, base_url=None)  # would be keyed as api.openai.com's
            with pytest.raises(ValueError, match="addressed to https://api.openai.com/v1"):
                await session.pipeline.call(stray)

    asyncio.run(run())
    assert fake.chat_requests == 0


def test_a_base_url_that_is_not_a_url_is_one_sentence_naming_the_variable(settings, conn, fake):
    secret = "http//user:pa55word@vllm:8000/v1"  # a typo: no scheme
    config = replace(_pointed_at(settings, "openai:gpt-4o", fake), openai_base_url=secret)
    with pytest.raises(JudgeUnavailable) as error:
        JudgeSession(config, conn)
    message = str(error.value)
    assert message.startswith("OPENAI_BASE_URL is not usable") and "\n" not in message
    assert "pa55word" not in message and secret not in message
