"""Anthropic Messages API through ``AsyncAnthropic``, and Message Batches.

The SDK 2.x speaks API version 2026-10-21, which has no sampling parameters; the temperature
is sent (through ``extra_body``) only when ``judges.send_temperature.anthropic`` is true, for
gateways or older API versions that still honour it.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import anthropic

from eval_harness.judges.client.endpoints import DEFAULT_BASE_URLS, endpoint_of
from eval_harness.judges.protocol import ChatRequest, Completion, Usage
from eval_harness.judges.client.providers.base import BatchState, parsed
from eval_harness.judges.client.retry import BadProviderResponse

DEFAULT_BASE_URL = DEFAULT_BASE_URLS["anthropic"]


def _usage(usage: Any) -> Usage:
    created = getattr(usage, "cache_creation_input_tokens", None) or 0
    read = getattr(usage, "cache_read_input_tokens", None) or 0
    return Usage(int(usage.input_tokens) + created + read, int(usage.output_tokens), read)


def _completion(message: Any) -> Completion:
    text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
    return Completion(text, _usage(message.usage))


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None, timeout: float,
                 send_temperature: bool = False) -> None:
        self.base_url = endpoint_of(self.name, base_url)  # normalised: part of the cache key
        self._client = anthropic.AsyncAnthropic(api_key=api_key,
                                                base_url=base_url or DEFAULT_BASE_URL,
                                                timeout=timeout, max_retries=0)
        self._send_temperature = send_temperature

    def __repr__(self) -> str:  # never the key (nor credentials in the URL)
        return f"AnthropicProvider(base_url={self.base_url!r})"

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
        batch = await self._client.messages.batches.create(
            requests=[{"custom_id": custom_id, "params": self.params(request)}
                      for custom_id, request in items])
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
