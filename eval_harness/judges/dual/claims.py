"""Which queries a judge run is judging right now, across processes: one advisory lock each.

Two runs whose queries overlap (shards of different counts, ``--shard 0/2`` beside
``--shard 0/3``; two datasets holding the same query) must not send the same request twice.
The reply cache alone cannot stop that: both runs miss it while the first reply is on its
way. So a run *claims* a query before sending any of its requests and keeps the claim until
its judgements are stored (:class:`QueryClaims`): a session-level advisory lock keyed on the
query's text (:func:`eval_harness.store.locks.try_keyed_locks`). The text, not the row id:
every relevance request of a query carries its text, so two queries with the same text (in
one dataset or two) would send identical requests and are claimed as one.

A run never waits for a claim while it holds another: a query claimed elsewhere is put aside
and the run judges the rest; only then does it wait for the ones put aside (polling, so the
event loop and the run's connection stay free), and once it has them, their replies are in
the cache and cost nothing. Two runs therefore go side by side on the queries they do not
share and never serialise on the ones they do. A claim ends with the session, so a killed
run leaves none behind; :meth:`QueryClaims.release_all` ends the claims of a run that stops.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable

import psycopg

from eval_harness.judges.client.stops import wait_unless
from eval_harness.store.locks import release_keyed_locks, try_keyed_locks

# the keyed-lock space of judged query texts; hashtext of it is 1216545177, not the fixed
# first key of the migration lock (0x6576616C), the other two-key advisory lock
CLAIM_SPACE = "eval_harness.judge-query"
FIRST_POLL_S, MAX_POLL_S = 0.05, 1.0


class QueryClaims:
    """The queries (by text) this run has claimed on ``conn``; see the module docstring.

    Runs on the event loop's thread like the rest of the run, one statement at a time, and
    commits ``conn`` after each (the run's connection holds no transaction across awaits).
    Claiming a text this run already holds only counts it (no statement)."""

    def __init__(self, conn: psycopg.Connection, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 space: str = CLAIM_SPACE) -> None:
        self._conn = conn
        self._space = space  # another space claims other things the same way (anchors)
        self._sleep = sleep
        self._held: Counter[str] = Counter()

    def try_claim(self, text: str) -> bool:
        """Claim ``text`` unless another session holds it; True when claimed."""
        return text in self.try_claim_many([text])

    def try_claim_many(self, texts: Iterable[str]) -> set[str]:
        """Claim every one of ``texts`` no other session holds (one statement); the set
        claimed. Each claimed text is released once per time it was claimed."""
        texts = list(dict.fromkeys(texts))
        already = {t for t in texts if self._held[t] > 0}
        fresh = [t for t in texts if t not in already]
        taken = self._locked(lambda: try_keyed_locks(self._conn, self._space, fresh)) \
            if fresh else set()
        claimed = already | taken
        self._held.update(claimed)
        return claimed

    async def wait_for_some(self, texts: Iterable[str], *,
                            until: Callable[[], bool] = lambda: False,
                            halted: asyncio.Event | None = None) -> set[str]:
        """Claim as many of ``texts`` as are free, waiting (polling, with a growing pause up
        to :data:`MAX_POLL_S`) until at least one is, or ``until()`` (a stopped run); the
        set claimed. ``halted`` (the run's pipeline's) ends a pause the moment it is set."""
        texts = list(texts)
        pause = FIRST_POLL_S
        while True:
            claimed = self.try_claim_many(texts)
            if claimed or not texts or until():
                return claimed
            if halted is None:
                await self._sleep(pause)
            else:
                await wait_unless(halted, self._sleep(pause))
            pause = min(pause * 2, MAX_POLL_S)

    def release(self, texts: Iterable[str]) -> None:
        """Release one claim of each of ``texts`` (a text claimed twice stays claimed once)."""
        done = []
        for text in texts:
            if self._held[text] <= 0:
                continue
            self._held[text] -= 1
            if self._held[text] == 0:
                del self._held[text]
                done.append(text)
        if done and not self._conn.closed:
            self._locked(lambda: release_keyed_locks(self._conn, self._space, done))

    def release_all(self) -> None:
        """Release every claim still held (a run that stopped or was cancelled). A store that
        cannot be reached any more is left alone: its session, and the claims with it, ended
        or end when the connection closes."""
        try:
            self.release([t for t, n in list(self._held.items()) for _ in range(n)])
        except psycopg.Error:
            self._held.clear()

    def _locked(self, statement):
        """Run one lock statement on the run's connection and commit, so it never keeps a
        transaction open across awaits (a failed earlier transaction is rolled back first:
        session locks outlive it)."""
        if self._conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            self._conn.rollback()
        try:
            result = statement()
        except BaseException:
            if not self._conn.closed:
                self._conn.rollback()
            raise
        self._conn.commit()
        return result
