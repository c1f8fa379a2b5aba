"""Chat providers behind the judges: one small class per API, all with the same surface.

A provider sends one :class:`~eval_harness.judges.protocol.ChatRequest` and returns the reply
text with its usage, or raises the SDK's exception untouched (the pipeline classifies it,
see :mod:`eval_harness.judges.client.retry`). The SDKs' own retries are disabled (``max_retries=0``)
so the pipeline's are the only ones; their timeout comes from ``judges.timeout_seconds``.
Batch methods submit many requests at once, report whether the batch has ended and return
each request's reply (or an error message) by custom id.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from eval_harness.judges.protocol import ChatRequest, Completion


@dataclass(frozen=True)
class BatchState:
    done: bool
    status: str


class ChatProvider(Protocol):
    name: str
    base_url: str  # normalised (eval_harness.judges.client.endpoints): the server, in the cache key

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def submit_batch(self, items: Sequence[tuple[str, ChatRequest]]) -> str: ...

    async def batch_state(self, batch_id: str) -> BatchState: ...

    async def batch_results(self, batch_id: str) -> dict[str, Completion | str]: ...

    async def aclose(self) -> None: ...


async def parsed(raw: Any) -> Any:
    """The body of an SDK's raw response (``with_raw_response``), parsed into its model:
    ``parse()`` is a coroutine in one SDK's async client and a plain call in the other's."""
    body = raw.parse()
    return await body if inspect.isawaitable(body) else body
