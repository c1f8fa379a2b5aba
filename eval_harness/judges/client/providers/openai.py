"""OpenAI Chat Completions through ``AsyncOpenAI`` (also any server speaking that API, e.g.
vLLM or Ollama, via ``OPENAI_BASE_URL``), and the Batch API (file upload, create, poll, output
and error files).

``max_tokens`` is sent rather than ``max_completion_tokens`` because OpenAI-compatible servers
understand it; GPT-4o-class models accept both. The key is ``OPENAI_API_KEY``; the rate-limit
headers are ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the reset a Go-style
duration (``"6m0s"``, ``"20ms"``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import openai

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

CHAT_ENDPOINT: Final = "/v1/chat/completions"
FINAL_BATCH_STATUSES = ("completed", "failed", "expired", "cancelled")


def _field(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _usage(usage: Any) -> Usage:
    """Usage from an SDK object or a batch result's JSON; cached tokens are part of input."""
    details = _field(usage, "prompt_tokens_details")
    return Usage(int(_field(usage, "prompt_tokens") or 0),
                 int(_field(usage, "completion_tokens") or 0),
                 int(_field(details, "cached_tokens") or 0))


def _completion_from_body(body: dict) -> Completion:
    choices = body.get("choices") or [{}]
    text = ((choices[0].get("message") or {}).get("content")) or ""
    return Completion(text, _usage(body.get("usage")))


class OpenAIClient:
    def __init__(self, *, name: str, api_key: str, base_url: str | None, endpoint: str,
                 timeout: float, send_temperature: bool = True) -> None:
        self.name = name
        self.base_url = endpoint  # normalised: part of the cache key
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or endpoint,
                                          timeout=timeout, max_retries=0)
        self._send_temperature = send_temperature

    def __repr__(self) -> str:  # never the key (nor credentials in the URL)
        return f"OpenAIClient(base_url={self.base_url!r})"

    def params(self, request: ChatRequest) -> dict[str, Any]:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        params: dict[str, Any] = {"model": request.model, "messages": messages,
                                  "max_tokens": request.max_tokens}
        if self._send_temperature:
            params["temperature"] = request.temperature
        return params

    async def complete(self, request: ChatRequest) -> Completion:
        return (await self.complete_with_headers(request))[0]

    async def complete_with_headers(self, request: ChatRequest
                                    ) -> tuple[Completion, Mapping[str, str]]:
        """The reply and the response's headers (the rate limiter reads its limits there)."""
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                **self.params(request))
            completion = await parsed(raw)
        except json.JSONDecodeError:
            raise BadProviderResponse("the Chat Completions reply body is not JSON") from None
        choice = completion.choices[0] if completion.choices else None
        text = (choice.message.content if choice is not None else None) or ""
        return Completion(text, _usage(completion.usage)), raw.headers

    async def submit_batch(self, items: Sequence[tuple[str, ChatRequest]]) -> str:
        lines = "".join(json.dumps({"custom_id": custom_id, "method": "POST",
                                    "url": CHAT_ENDPOINT, "body": self.params(request)},
                                   ensure_ascii=False) + "\n" for custom_id, request in items)
        upload = await self._client.files.create(
            file=("judge-batch.jsonl", lines.encode("utf-8")), purpose="batch")
        batch = await self._client.batches.create(completion_window="24h", endpoint=CHAT_ENDPOINT,
                                                  input_file_id=upload.id)
        return batch.id

    async def batch_state(self, batch_id: str) -> BatchState:
        batch = await self._client.batches.retrieve(batch_id)
        return BatchState(batch.status in FINAL_BATCH_STATUSES, batch.status)

    async def batch_results(self, batch_id: str) -> dict[str, Completion | str]:
        batch = await self._client.batches.retrieve(batch_id)
        results: dict[str, Completion | str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await self._client.files.content(file_id)
            for line in content.text.splitlines():
                if not line.strip():
                    continue
                item = json.loads(line)
                response = item.get("response") or {}
                if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                    results[item["custom_id"]] = _completion_from_body(response["body"])
                else:
                    error = item.get("error") or {}
                    reason = error.get("message") or response.get("status_code")
                    results[item["custom_id"]] = f"batch request failed: {reason}"
        return results

    async def aclose(self) -> None:
        await self._client.close()


class OpenAI(Provider):
    """The OpenAI API, or any server speaking it (``OPENAI_BASE_URL``).

    A subclass serves another OpenAI-compatible server under a name of its own: set
    :attr:`name`, the variables and the default server, override what differs.
    """

    name = "openai"
    key_variable = "OPENAI_API_KEY"
    base_url_variable = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"
    requests_headers = "x-ratelimit-{}-requests"
    tokens_headers = "x-ratelimit-{}-tokens"

    def api_key(self, settings) -> str | None:
        return settings.openai_api_key

    def configured_base_url(self, settings) -> str | None:
        return settings.openai_base_url

    def client(self, *, api_key: str | None, base_url: str | None, timeout: float,
               send_temperature: bool) -> OpenAIClient:
        return OpenAIClient(name=self.name, api_key=api_key or "", base_url=base_url,
                            endpoint=self.endpoint(base_url), timeout=timeout,
                            send_temperature=send_temperature)

    def classify(self, exc: BaseException) -> RetryDecision | None:
        if isinstance(exc, openai.APIStatusError):
            status = int(exc.status_code)
            if (code := quota_code(exc)) is not None:  # OpenAI sends it as a 429 too
                return RetryDecision.no("quota", status, code)
            return decide_status(status, exc.response.headers, error_code=error_code_of(exc))
        if isinstance(exc, openai.APITimeoutError):  # a connection error too: asked first
            return RetryDecision.transient("timeout")
        if isinstance(exc, openai.APIConnectionError):
            return RetryDecision.transient("connection")
        return None

    def read_rate_headers(self, headers: Mapping[str, str] | None, *,
                          now: datetime | None = None) -> RateSignal:
        return read_rate_signal(headers, requests=self.requests_headers,
                                tokens=self.tokens_headers, now=now)

    async def probe(self, *, api_key: str, base_url: str, timeout: float) -> None:
        client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout,
                                    max_retries=0)
        try:
            await client.models.list()
        finally:
            await client.close()


PROVIDER = OpenAI()
