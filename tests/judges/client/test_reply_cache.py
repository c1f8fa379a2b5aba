"""The reply cache's in-flight sharing on its own: requests of one key wait for the one call on
its way and get its outcome (or its error); once it has ended, the key is free again."""

from __future__ import annotations

import asyncio

import pytest

from eval_harness.judges.client.reply_cache import InFlight


def test_requests_of_one_key_share_the_call_in_flight():
    async def run():
        flying, sent = InFlight(), []

        async def call(reply: str) -> str:
            sent.append(reply)
            await asyncio.sleep(0.01)
            return reply

        first = asyncio.ensure_future(flying.share("k", call("first")))
        await asyncio.sleep(0)  # the first call is on its way
        shared = flying.get("k")
        assert shared is not None and flying.get("other") is None
        assert await asyncio.shield(shared) == "first" == await first
        assert flying.get("k") is None  # ended: the next request of the key is a new call
        return sent

    assert asyncio.run(run()) == ["first"]


def test_an_error_of_the_call_reaches_the_requests_waiting_for_it():
    async def run():
        flying = InFlight()

        async def failing() -> str:
            await asyncio.sleep(0.01)
            raise ConnectionError("gone")

        first = asyncio.ensure_future(flying.share("k", failing()))
        await asyncio.sleep(0)
        shared = flying.get("k")
        with pytest.raises(ConnectionError):
            await asyncio.shield(shared)
        with pytest.raises(ConnectionError):
            await first
        assert flying.get("k") is None

    asyncio.run(run())
