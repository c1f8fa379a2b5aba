"""The client side of tests against the fake LLM server: judge settings pointed at it, and a
fake clock for the judge pipeline's waits."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fake_llm_server import FakeLLMServer


class FakeTime:
    """An injectable clock and sleep for the judge pipeline: sleeping advances the clock
    instantly and records the wait, so retry schedules are checked without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    @property
    def waits(self) -> list[float]:
        """The sleeps of a millisecond or more: retry backoffs, pauses and polls. The rate
        limiter at the tests' 1,000,000 requests/min sleeps 60 µs before a request (its
        bucket starts empty, and refills while nothing is sent), never that long."""
        return [seconds for seconds in self.sleeps if seconds >= 1e-3]

    def options(self, **more) -> dict:
        return {"sleep": self.sleep, "clock": self.clock, **more}


def judge_settings(base, server: FakeLLMServer | None, **judges):
    """``base`` settings pointed at ``server`` (keys set) with ``judges`` fields replaced
    (anchors off unless given).

    Generous client rate limits unless given, so tests only wait where they mean to.
    """
    from dataclasses import replace

    from eval_harness.settings.judges import AnchorSettings, RateLimit

    # the shipped config.yaml has anchors on; a test that wants them says so
    judges.setdefault("anchors", AnchorSettings())
    judges.setdefault("rate_limits", {"openai": RateLimit(1e6, None),
                                      "anthropic": RateLimit(1e6, None)})
    judges.setdefault("timeout_seconds", 5.0)
    keys = {}
    if server is not None:
        keys = {"openai_api_key": "sk-test-openai-0123456789", "openai_base_url":
                server.openai_base_url, "anthropic_api_key": "sk-ant-test-0123456789",
                "anthropic_base_url": server.anthropic_base_url}
    return replace(base, judges=replace(base.judges, **judges), **keys)
