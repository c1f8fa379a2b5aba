"""Anthropic Messages API through ``AsyncAnthropic``, and Message Batches.

The SDK 2.x speaks API version 2026-10-21, which has no sampling parameters; the temperature
is sent (through ``extra_body``) only when ``judges.send_temperature.anthropic`` is true, for
gateways or older API versions that still honour it. The key is ``ANTHROPIC_API_KEY``; the
rate-limit headers are ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, the
reset an RFC 3339 moment. Its quota refusals come as a 402 ``billing_error``, a 429 naming a
spend limit, or a 400 whose message says the credit balance is too low (see
:func:`~eval_harness.judges.client.providers.base.quota_code`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import anthropic

from eval_harness.judges.client.providers.base import (
    BadProviderResponse,
    BatchState,
    Provider,
    RetryDecision,
    decide_status,
    error_code_of,
    parsed,
    quota_code,
)
from eval_harness.judges.client.rate_headers import RateSignal, read_rate_signal
from eval_harness.judges.protocol import ChatRequest, Completion, Usage


def _usage(usage: Any) -> Usage:
    created = getattr(usage, "cache_creation_input_tokens", None) or 0
    read = getattr(usage, "cache_read_input_tokens", None) or 0
    return Usage(int(usage.input_tokens) + created + read, int(usage.output_tokens), read)


def _completion(message: Any) -> Completion:
    text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
    return Completion(text, _usage(message.usage))


class AnthropicClient:
    def __init__(self, *, name: str, api_key: str, base_url: str | None, endpoint: str,
                 timeout: float, send_temperature: bool = False) -> None:
        self.name = name
        self.base_url = endpoint  # normalised: part of the cache key
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or endpoint,
                                                timeout=timeout, max_retries=0)
        self._send_temperature = send_temperature

    def __repr__(self) -> str:  # never the key (nor credentials in the URL)
        return f"AnthropicClient(base_url={self.base_url!r})"

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The Messages API body for ``request`` (also the ``params`` of a batch request)."""
        params: dict[str, Any] = {
            "model": request.model, "max_tokens": request.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages]}
        if request.system:
            params["system"] = request.system
        if self._send_temperature:
            params["temperature"] = request.temperature
        return params

    async def complete(self, request: ChatRequest) -> Completion:
        return (await self.complete_with_headers(request))[0]

    async def complete_with_headers(self, request: ChatRequest
                                    ) -> tuple[Completion, Mapping[str, str]]:
        """The reply and the response's headers (the rate limiter reads its limits there)."""
        params = self.params(request)
        extra = {"temperature": params.pop("temperature")} if "temperature" in params else None
        try:
            raw = await self._client.messages.with_raw_response.create(**params,
                                                                       extra_body=extra)
            message = await parsed(raw)
        except json.JSONDecodeError:
            raise BadProviderResponse("the Messages API reply body is not JSON") from None
        return _completion(message), raw.headers

    async def submit_batch(self, items: Sequence[tuple[str, ChatRequest]]) -> str:
        # params() builds the Messages API's arguments as a plain dict
        batch = await self._client.messages.batches.create(requests=[
            {"custom_id": cid, "params": self.params(request)}  # type: ignore[typeddict-item]
            for cid, request in items])
        return batch.id

    async def batch_state(self, batch_id: str) -> BatchState:
        batch = await self._client.messages.batches.retrieve(batch_id)
        return BatchState(batch.processing_status == "ended", batch.processing_status)

    async def batch_results(self, batch_id: str) -> dict[str, Completion | str]:
        results: dict[str, Completion | str] = {}
        async for item in await self._client.messages.batches.results(batch_id):
            outcome = item.result
            if outcome.type == "succeeded":
                results[item.custom_id] = _completion(outcome.message)
            else:
                detail = getattr(getattr(getattr(outcome, "error", None), "error", None),
                                 "message", None)
                results[item.custom_id] = f"batch request {outcome.type}" + (
                    f": {detail}" if detail else "")
        return results

    async def aclose(self) -> None:
        await self._client.close()


class Anthropic(Provider):
    name = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"
    base_url_variable = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"
    sends_temperature = False

    def api_key(self, settings) -> str | None:
        return settings.anthropic_api_key

    def configured_base_url(self, settings) -> str | None:
        return settings.anthropic_base_url

    def client(self, *, api_key: str | None, base_url: str | None, timeout: float,
               send_temperature: bool) -> AnthropicClient:
        return AnthropicClient(name=self.name, api_key=api_key or "", base_url=base_url,
                               endpoint=self.endpoint(base_url), timeout=timeout,
                               send_temperature=send_temperature)

    def classify(self, exc: BaseException) -> RetryDecision | None:
        if isinstance(exc, anthropic.APIStatusError):
            status = int(exc.status_code)
            if (code := quota_code(exc)) is not None:  # a 402, 429 or 400 (see the docstring)
                return RetryDecision.no("quota", status, code)
            return decide_status(status, exc.response.headers, error_code=error_code_of(exc))
        if isinstance(exc, anthropic.APITimeoutError):  # a connection error too: asked first
            return RetryDecision.transient("timeout")
        if isinstance(exc, anthropic.APIConnectionError):
            return RetryDecision.transient("connection")
        return None

    def read_rate_headers(self, headers: Mapping[str, str] | None, *,
                          now: datetime | None = None) -> RateSignal:
        return read_rate_signal(headers, requests="anthropic-ratelimit-requests-{}",
                                tokens="anthropic-ratelimit-tokens-{}", now=now)

    async def probe(self, *, api_key: str, base_url: str, timeout: float) -> None:
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout,
                                          max_retries=0)
        try:
            await client.models.list(limit=1)
        finally:
            await client.close()


PROVIDER = Anthropic()
