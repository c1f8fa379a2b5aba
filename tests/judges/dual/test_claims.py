"""Query claims (eval_harness/judges/dual/claims.py): one advisory lock per query text, across
sessions; a claim held elsewhere is not waited for until asked, then taken once it is free."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from eval_harness.judges.dual.claims import QueryClaims


@pytest.fixture
def two_sessions(store):
    with store.connection() as first, store.connection() as second:
        yield QueryClaims(first), QueryClaims(second), second


def test_a_claimed_text_is_refused_elsewhere_until_released(two_sessions):
    ours, theirs, _ = two_sessions
    text, other = f"query {uuid.uuid4()}", f"query {uuid.uuid4()}"
    assert ours.try_claim(text)
    assert ours.try_claim(text)  # held here already: counted, not refused
    assert theirs.try_claim_many([text, other]) == {other}
    ours.release([text])
    assert not theirs.try_claim(text)  # still held once
    ours.release([text])
    assert theirs.try_claim(text)
    theirs.release_all()
    assert ours.try_claim_many([text, other]) == {text, other}
    ours.release_all()


def test_waiting_polls_without_blocking_and_takes_the_claim_once_free(two_sessions):
    ours, _, their_connection = two_sessions
    text = f"query {uuid.uuid4()}"
    assert ours.try_claim(text)
    pauses = []

    async def sleep(seconds):  # the holder lets go after the third look
        pauses.append(seconds)
        if len(pauses) == 3:
            ours.release([text])

    waiting = QueryClaims(their_connection, sleep=sleep)
    assert asyncio.run(waiting.wait_for_some([text])) == {text}
    assert pauses == [0.05, 0.1, 0.2]  # growing pauses, the event loop never blocked
    assert not ours.try_claim(text)
    waiting.release_all()


def test_a_closed_session_leaves_no_claim_behind(store):
    text = f"query {uuid.uuid4()}"
    with store.connection() as short:
        assert QueryClaims(short).try_claim(text)
    with store.connection() as later:
        claims = QueryClaims(later)
        assert claims.try_claim(text)
        claims.release_all()
