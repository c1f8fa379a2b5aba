"""The stop policy itself (eval_harness/stopping.py) and the judges' side of it, in this
process, with real signals (``os.kill`` to this process) and the real SDKs against the fake
provider. The commands' behaviour is tests/test_stopping_signals.py and
tests/store/test_liveness.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import pytest

from eval_harness import stopping
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.client.stops import RunInterrupted, RunStopped, StoreLost
from eval_harness.settings.judges import RateLimit
from fake_llm_server import judge_settings


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.01)  # the handler runs at the next bytecode boundary


@pytest.mark.unit
def test_a_cooperative_block_is_not_interrupted_inside_and_raises_at_its_end():
    heard, after_signal = [], []
    with pytest.raises(stopping.Interrupted) as raised, stopping.cooperative(), \
            stopping.on_stop(lambda: heard.append(True)):
        _signal_self(signal.SIGTERM)
        after_signal.append(stopping.requested())  # still running: it stops itself
    assert heard == [True] and after_signal == [signal.SIGTERM]
    assert raised.value.exit_code == 143
    assert str(raised.value) == ("interrupted: the work finished so far is kept; run the same "
                                 "command again to finish")
    with stopping.cooperative():  # a library caller's next run starts afresh
        assert stopping.requested() is None


@pytest.mark.unit
def test_what_stopped_work_kept_is_in_the_line():
    with pytest.raises(stopping.Interrupted) as raised, stopping.cooperative():
        _signal_self(signal.SIGINT)
        stopping.note_kept("3 of 4 judgements kept")
    assert raised.value.exit_code == 130
    assert str(raised.value) == ("interrupted: 3 of 4 judgements kept; run the same command "
                                 "again to finish")


@pytest.mark.unit
def test_a_command_is_interrupted_where_it_is_outside_cooperative_blocks():
    with stopping.handle_stop_signals():
        with pytest.raises(stopping.Interrupted) as raised:
            _signal_self(signal.SIGTERM)
            time.sleep(1)
            pytest.fail("not interrupted")
        assert raised.value.signum == signal.SIGTERM
        with pytest.raises(stopping.Interrupted):  # the command's stop persists
            stopping.check()
    assert stopping.requested() is None


@pytest.mark.unit
def test_a_signal_another_handler_took_is_still_seen():
    """An orchestrator's own handler (Dagster's, around an op) takes the signal: the
    command still learns of it, and which signal it was, once that code returns."""
    with stopping.handle_stop_signals():
        taken = []
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: taken.append(signum))
        try:
            _signal_self(signal.SIGTERM)
        finally:
            signal.signal(signal.SIGTERM, previous)
        assert taken == [signal.SIGTERM]
        assert stopping.requested() == signal.SIGTERM


def _session(settings, conn, fake) -> JudgeSession:
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical",
                            concurrency=2)
    return JudgeSession(config, conn, run_id=uuid.uuid4().hex[:12])


def test_an_interrupted_pipeline_sends_nothing_more_and_abandons_what_waits_past_the_grace(
        settings, conn, fake):
    """Two requests are held at the provider when the run is interrupted: no third one is
    sent, and the two are abandoned once the grace is over."""
    fake.hold_replies_after(0)
    session = _session(settings, conn, fake)

    async def run():
        async with session:
            calls = [asyncio.ensure_future(session.judge1.relevance(
                f"query {i} {uuid.uuid4().hex}", "a document")) for i in range(5)]
            while fake.chat_requests < 2:
                await asyncio.sleep(0.01)
            session.pipeline.interrupt(grace_seconds=0.3)
            started = time.monotonic()
            results = await asyncio.gather(*calls, return_exceptions=True)
            return results, time.monotonic() - started

    results, seconds = asyncio.run(run())
    assert all(isinstance(r, RunInterrupted) for r in results), results
    assert 0.3 <= seconds < 2 and fake.chat_requests == 2


def test_a_store_that_closes_the_connection_stops_the_pipeline_at_once(settings, store, fake):
    """The server ends the ledger's session while requests wait at the provider: they are
    abandoned at once and nothing more is sent."""
    fake.hold_replies_after(0)
    conn = store.connect()
    session = _session(settings, conn, fake)
    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    conn.commit()

    async def run():
        async with session:
            calls = [asyncio.ensure_future(session.judge1.relevance(
                f"query {i} {uuid.uuid4().hex}", "a document")) for i in range(5)]
            while fake.chat_requests < 2:
                await asyncio.sleep(0.01)
            with store.connection(autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
            started = time.monotonic()
            results = await asyncio.gather(*calls, return_exceptions=True)
            return results, time.monotonic() - started

    try:
        results, seconds = asyncio.run(run())
    finally:
        conn.close()
    assert all(isinstance(r, StoreLost) for r in results), results
    assert seconds < 1 and fake.chat_requests == 2
    assert session.pipeline.stopped == "store"
    assert "server closed the connection" in str(session.pipeline.store_error)


def test_an_interrupt_python_can_only_report_is_not_printed_once_a_stop_is_asked(
        monkeypatch):
    # A stop signal landing in a garbage-collection callback (Dagster's handler raises
    # there too) comes out as "Exception ignored in ... Traceback": the stop itself is
    # carried by the wake-up socket, so that report is noise. Other errors are still reported.
    import gc
    import os
    import signal as signals
    import sys

    from eval_harness import stopping

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(type(u.exc_value)))

    class RaisesOnCollect:
        def __init__(self, error):
            self.error = error

        def __del__(self):
            raise self.error

    with stopping.handle_stop_signals(), pytest.raises(stopping.Interrupted), \
            stopping.cooperative():
        os.kill(os.getpid(), signals.SIGINT)
        assert stopping.requested() == signals.SIGINT
        RaisesOnCollect(KeyboardInterrupt())
        gc.collect()
        RaisesOnCollect(ValueError("not a stop"))
        gc.collect()
    assert reported == [ValueError]


@pytest.mark.parametrize("budget_stop_first", [False, True], ids=["interrupt", "after-budget"])
def test_calls_queued_at_the_rate_limiter_give_up_at_the_interrupt(settings, conn, fake,
                                                                   budget_stop_first):
    """At 6 requests/min each queued call would wait 10 s for its slot: the interrupt ends
    every wait at once, also after a used-up budget had stopped the run (which lets calls
    already reserved go on, so it must not make the interrupt a no-op)."""
    config = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical",
                            concurrency=2, rate_limits={"openai": RateLimit(6, None),
                                                        "anthropic": RateLimit(6, None)})
    session = JudgeSession(config, conn, run_id=uuid.uuid4().hex[:12])

    async def run():
        async with session:
            calls = [asyncio.ensure_future(session.judge1.relevance(
                f"query {i} {uuid.uuid4().hex}", "a document")) for i in range(4)]
            await asyncio.sleep(0.3)  # every call waits: for the limiter, or for a slot
            if budget_stop_first:
                session.pipeline.stop("budget", "the budget is used up")
            session.pipeline.interrupt()
            started = time.monotonic()
            results = await asyncio.gather(*calls, return_exceptions=True)
            return results, time.monotonic() - started

    results, seconds = asyncio.run(run())
    assert all(isinstance(r, RunStopped) for r in results), results
    assert seconds < 1.0 and fake.chat_requests == 0
