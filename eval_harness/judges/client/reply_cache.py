"""The judges' reply cache: a provider's reply to a request, stored under the request's key
and served to every later identical request, so a rerun pays for nothing it already bought.

* **The key** (:func:`cache_key`): SHA-256 of exactly what changes the output and nothing
  else (no timeouts, no retry settings, no run id): the key recipe's version, the provider,
  its server (:func:`request_server`: the normalised base URL, see
  :func:`~eval_harness.judges.client.providers.base.normalised_base_url`), the model, the
  prompt version, temperature, max tokens, the system prompt and the messages, as canonical
  JSON. Two servers serving a model of the same name (OpenAI and a vLLM server) therefore never
  answer for each other, and a rerun against the same server, however its URL is spelled, is
  answered from here.
* **The table** ``judge_cache`` (migration 0002): one row per key with the reply text and its
  usage; every statement on it is here (:func:`cached_reply`, :func:`cached_keys_among`,
  :func:`store_replies`, :func:`replace_replies`), each in the caller's transaction. A hit
  costs nothing and writes no cost row. Rows written before the server was part of the key
  (key version 1) are never read again: they do not say which server wrote them, and one
  written by another server behind ``OPENAI_BASE_URL`` must not pass for the default server's
  reply. Upgrading therefore pays once more for each request only such a row answered; every
  reply from then on is cached under its server. Batches registered under old keys are not
  resumed for the same reason.
* **In flight** (:class:`InFlight`): identical requests sent at the same time share one
  provider call; the others wait for its reply and count as cache hits.

When a paid reply is written (through, with its cost row, in one transaction) is the
ledger's (:class:`~eval_harness.judges.client.ledger.JudgeLedger`); when the cache is asked
and when it is passed by (retests, ``--retry-unscored``) is the pipeline's
(:mod:`eval_harness.judges.client.runner`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Sequence
from typing import TypeVar

import psycopg

from eval_harness.judges.client.providers import endpoint_of
from eval_harness.judges.protocol import ChatRequest

T = TypeVar("T")

# Version of the key's recipe. 2: the server's base URL is part of the key. Rows written
# under an earlier recipe are never read again (their keys cannot match), so a reply cached
# from one server is never served as another server's.
CACHE_KEY_VERSION = 2


def request_server(request: ChatRequest) -> str:
    """The normalised base URL of the server ``request`` is for (its provider's default
    server when the request names none)."""
    return endpoint_of(request.provider, request.base_url)


def cache_key(request: ChatRequest) -> str:
    """The reply cache's key of ``request`` (see the module docstring for what it holds)."""
    payload = {"key_version": CACHE_KEY_VERSION, "provider": request.provider,
               "base_url": request_server(request), "model": request.model,
               "prompt_version": request.prompt_version,
               "temperature": float(request.temperature),
               "max_tokens": int(request.max_tokens), "system": request.system,
               "messages": [[m.role, m.content] for m in request.messages]}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------ judge_cache

_INSERT_CACHE = (
    "INSERT INTO judge_cache (key, provider, model, operation, prompt_version, reply, "
    "input_tokens, output_tokens, cached_tokens, batch, run_id) VALUES "
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING")


def cached_reply(conn: psycopg.Connection, key: str) -> tuple | None:
    """The ``judge_cache`` row of ``key`` laid out as :func:`store_replies` takes it, without
    the last two columns: ``(key, provider, model, operation, prompt_version, reply,
    input_tokens, output_tokens, cached_tokens)``; None when the cache has no such reply."""
    return conn.execute(
        "SELECT key, provider, model, operation, prompt_version, reply, input_tokens, "
        "output_tokens, cached_tokens FROM judge_cache WHERE key = %s", (key,)).fetchone()


def cached_keys_among(conn: psycopg.Connection, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` have a reply in ``judge_cache``."""
    rows = conn.execute("SELECT key FROM judge_cache WHERE key = ANY(%s)",
                        (list(keys),)).fetchall()
    return {row[0] for row in rows}


def replace_replies(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Like :func:`store_replies`, but a key already cached takes the new reply (a question
    re-asked because its cached replies left it unscored)."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_CACHE.replace(
            "DO NOTHING", "DO UPDATE SET reply = EXCLUDED.reply, input_tokens = "
            "EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, cached_tokens = "
            "EXCLUDED.cached_tokens, batch = EXCLUDED.batch, run_id = EXCLUDED.run_id"), rows)


def store_replies(conn: psycopg.Connection, rows: Sequence[tuple]) -> None:
    """Insert replies into ``judge_cache``: ``(key, provider, model, operation,
    prompt_version, reply, input_tokens, output_tokens, cached_tokens, batch, run_id)``; a
    key already cached keeps its first reply."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT_CACHE, rows)


# ------------------------------------------------------------------------------ in flight


class InFlight:
    """The provider calls on their way, by cache key: a request whose key is in flight waits
    for that call's reply instead of paying for the same reply again."""

    def __init__(self) -> None:
        self._calls: dict[str, asyncio.Future] = {}

    def get(self, key: str) -> asyncio.Future | None:
        """The call in flight for ``key`` (await it shielded), or None."""
        return self._calls.get(key)

    async def share(self, key: str, call: Awaitable[T]) -> T:
        """Await ``call`` (the provider call for ``key``) while requests of the same key wait
        for its outcome through :meth:`get`; its exception, or its cancellation, reaches them
        too."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "unretrieved"
        self._calls[key] = future
        try:
            outcome = await call
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            raise
        else:
            future.set_result(outcome)
            return outcome
        finally:
            del self._calls[key]
