"""A third chat provider, for tests only: an OpenAI-compatible local server ("vllm").

It shows what adding a provider takes: this one module and an entry point ``vllm =
vllm_provider`` of ``eval_harness.chat_providers``. Its quirks: its key is ``VLLM_API_KEY`` and
its server ``VLLM_BASE_URL`` (read through the settings like every provider variable), and a
key is not needed (a local vLLM server takes any, so an unset key sends ``EMPTY``, vLLM's
convention). Everything else is the OpenAI provider's: the SDK, the error classification and
the rate-limit headers.
"""

from __future__ import annotations

from eval_harness.judges.client.providers.base import Provider
from eval_harness.judges.client.providers.openai import OpenAI, OpenAIClient


class VLLM(OpenAI):
    name = "vllm"
    key_variable = "VLLM_API_KEY"
    base_url_variable = "VLLM_BASE_URL"
    default_base_url = "http://127.0.0.1:8000/v1"
    key_required = False

    # the key and server come from the environment's provider variables, not OpenAI's fields
    api_key = Provider.api_key
    configured_base_url = Provider.configured_base_url

    def client(self, *, api_key: str | None, base_url: str | None, timeout: float,
               send_temperature: bool) -> OpenAIClient:
        return super().client(api_key=api_key or "EMPTY", base_url=base_url, timeout=timeout,
                              send_temperature=send_temperature)


PROVIDER = VLLM()
