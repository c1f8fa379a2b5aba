"""The Postgres side of the call pipeline: paid replies written into the reply cache with
their cost rows, cache hits counted, retries logged, and the register of submitted batches
(the statements are in :mod:`.reply_cache` and :mod:`.sql`).

* ``judge_cache``: the reply cache (:mod:`.reply_cache`: its key, its table). A cache hit
  costs nothing and writes no cost row.
* ``api_cache_hit_log`` (migration 0005): the hits, counted per (provider, model, operation)
  and written as one aggregated row per key on each flush, with ``saved_cost``: what the
  replies would have cost as live calls at list price. A batch result reaching its own judge
  through the cache is the batch being delivered (paid in ``api_cost_log``), not a hit.
* ``api_cost_log``: one row per billed provider call (batch results included, flagged), with
  its ``purpose`` (migration 0013): ``label`` for the run's judgements, ``retest`` for a
  test-retest scoring (:meth:`JudgeLedger.record_call` with ``purpose="retest"``), whose
  reply is never cached: the labels keep the reply they were read from.
* ``api_retry_log``: one row per retry, committed when the retry is decided (before its
  wait), with ``success`` false; when the call finally gets its reply, its retry rows are set
  to ``success`` true in the transaction that stores the reply.
* ``judge_batches`` (migration 0006): each batch a provider accepted, its requests' keys and
  whether it is still open, so a later run resumes it instead of paying for it again.

**What is durable when.** A paid reply is written through: :meth:`JudgeLedger.record_call`
inserts its cache row and its cost row and commits before it returns, so a run killed at any
moment has lost no reply it paid for (the rerun asks only for what is not cached, and the
cost log is complete). A batch's results are written in one transaction that also marks the
batch ended, and only by the run that flips it from open to ended, so they are stored once
even if two runs collect the same batch. Retry rows are written through too
(:meth:`JudgeLedger.record_retry`), so a killed run has lost none of them (it loses at most
the ``success`` flag of a call that was killed between its reply and the commit, which would
then not be in the cache either). Only cache-hit counts are buffered: they go out on
:meth:`flush`, which the pipeline calls when a run ends, however it ends.

All methods run on the event loop's thread, one at a time, so one psycopg connection is
enough. Every write commits that connection.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import psycopg

from eval_harness.judges.client import reply_cache, sql
from eval_harness.judges.protocol import ChatRequest, Completion, Usage
from eval_harness.store.locks import session_lock

BATCH_LOCK_PREFIX = "eval_harness.judge-batch:"  # + provider: advisory lock key (hashtext)


@dataclass(frozen=True)
class RetryEvent:
    error_type: str
    status_code: int | None
    retry_count: int      # 1 for the first retry
    wait_seconds: float


@dataclass(frozen=True)
class BatchedRequest:
    """What storing one batch reply needs besides the reply (the request may not be planned
    by the run that collects the batch)."""

    model: str
    operation: str
    prompt_version: str
    query_id: int | None = None

    @classmethod
    def of(cls, request: ChatRequest, query_id: int | None) -> BatchedRequest:
        return cls(request.model, request.operation, request.prompt_version, query_id)


@dataclass(frozen=True)
class OpenBatch:
    """A batch registered in ``judge_batches`` and not yet ended or abandoned."""

    provider: str
    batch_id: str
    requests: dict[str, BatchedRequest]  # cache key (the batch's custom id) -> request
    run_id: str | None


@dataclass(frozen=True)
class BatchReply:
    """One successful batch result, priced."""

    key: str
    request: BatchedRequest
    completion: Completion
    cost: float


class CallLedger(Protocol):
    """What the call pipeline (:class:`~eval_harness.judges.client.runner.CallPipeline`) reads
    and writes: the reply cache, cost rows, retry rows and cache hits. :class:`JudgeLedger`
    keeps them in Postgres; the pipeline's unit tests keep them in memory. Batch mode needs
    the batch register too, which only :class:`JudgeLedger` has."""

    def cached(self, key: str) -> Completion | None: ...

    def record_cache_hit(self, request: ChatRequest, *, saved_cost: float) -> None: ...

    def record_call(self, request: ChatRequest, completion: Completion, *, cost: float,
                    batch: bool = False, query_id: int | None = None,
                    retry_ids: Sequence[int] = (), replace: bool = False,
                    purpose: str = "label") -> None: ...

    def record_retry(self, request: ChatRequest, event: RetryEvent) -> int: ...

    def flush(self) -> None: ...


class JudgeLedger:
    def __init__(self, conn: psycopg.Connection, *, run_id: str | None) -> None:
        self._conn = conn
        self.run_id = run_id
        self._pending_cache: dict[str, tuple] = {}  # only while a failed write is retried
        self._costs: list[tuple] = []
        self._succeeded: list[int] = []  # retry rows whose call got its reply
        self._replacing: set[str] = set()  # pending keys whose reply replaces a cached one
        self._hits: dict[tuple[str, str, str], list] = {}  # (provider, model, op) -> [n, USD]
        self._batch_replies: set[str] = set()  # keys a batch of this ledger filled, undelivered

    # -- cache ---------------------------------------------------------------------------

    def cached(self, key: str) -> Completion | None:
        row = self._pending_cache.get(key)
        if row is None:
            row = reply_cache.cached_reply(self._conn, key)
        if row is None:
            return None
        return Completion(row[5], Usage(row[6], row[7], row[8]))

    def cached_keys(self, keys: list[str]) -> set[str]:
        """Which of ``keys`` the cache already answers (one query, for batch planning)."""
        found = {k for k in keys if k in self._pending_cache}
        return found | reply_cache.cached_keys_among(self._conn, list(set(keys) - found))

    def record_cache_hit(self, request: ChatRequest, *, saved_cost: float) -> None:
        """A call answered by the cache (or by an identical call in flight): count it.

        ``saved_cost`` is the reply's usage at list price. The first hit on a reply that a
        batch of this ledger wrote is that batch being delivered, already paid: not counted.
        """
        key = reply_cache.cache_key(request)
        if key in self._batch_replies:
            self._batch_replies.discard(key)
            return
        entry = self._hits.setdefault((request.provider, request.model, request.operation),
                                      [0, 0.0])
        entry[0] += 1
        entry[1] += max(0.0, saved_cost)

    # -- recording -----------------------------------------------------------------------

    def record_call(self, request: ChatRequest, completion: Completion, *, cost: float,
                    batch: bool = False, query_id: int | None = None,
                    retry_ids: Sequence[int] = (), replace: bool = False,
                    purpose: str = "label") -> None:
        """A billed call: its cost row, and its reply into the cache, committed before this
        returns; ``retry_ids`` (its retry rows, see :meth:`record_retry`) are marked as
        succeeded in the same transaction. ``replace``: the reply replaces a cached one
        (see :meth:`CallPipeline.call`'s ``refresh``); otherwise a cached key keeps its first
        reply."""
        usage = completion.usage
        key = reply_cache.cache_key(request)
        self._pending_cache[key] = (
            key, request.provider, request.model, request.operation, request.prompt_version,
            completion.text, usage.input_tokens, usage.output_tokens, usage.cached_tokens,
            batch, self.run_id)
        if batch:
            self._batch_replies.add(key)
        if replace:
            self._replacing.add(key)
        self._costs.append((self.run_id, request.provider, request.model, request.operation,
                            usage.input_tokens, usage.output_tokens, usage.cached_tokens, cost,
                            batch, purpose, query_id))
        self._succeeded.extend(retry_ids)
        self._write(with_hits=False)

    def record_retry(self, request: ChatRequest, event: RetryEvent) -> int:
        """One retry, committed before this returns (``success`` false until
        :meth:`record_call` stores the call's reply); returns the row's id."""
        try:
            row_id = sql.log_retry(self._conn, (
                self.run_id, request.provider, request.model, request.operation,
                event.error_type, event.status_code, event.retry_count, event.wait_seconds,
                False))
            self._conn.commit()
        except BaseException:
            if not self._conn.closed:
                self._conn.rollback()
            raise
        return row_id

    def flush(self) -> None:
        """Commit everything buffered: cache-hit counts, and anything a failed write left
        (paid replies and retries are written as they come, see :meth:`record_call`)."""
        self._write(with_hits=True)

    def _write(self, *, with_hits: bool) -> None:
        hits = self._hits if with_hits else {}
        if not (self._pending_cache or self._costs or self._succeeded or hits):
            return
        try:
            if self._pending_cache:
                rows = list(self._pending_cache.values())
                keep = [r for r in rows if r[0] not in self._replacing]
                if keep:
                    reply_cache.store_replies(self._conn, keep)
                if len(keep) < len(rows):
                    reply_cache.replace_replies(self._conn, [r for r in rows
                                                         if r[0] in self._replacing])
            if self._costs:
                sql.log_costs(self._conn, self._costs)
            if self._succeeded:
                sql.mark_retries_succeeded(self._conn, self._succeeded)
            if hits:
                sql.log_cache_hits(self._conn, [(self.run_id, *key, n, saved)
                                                    for key, (n, saved) in hits.items()])
            self._conn.commit()
        except BaseException:
            # nothing of this write is stored: keep the rows buffered for the next write
            if not self._conn.closed:
                self._conn.rollback()
            raise
        self._pending_cache.clear()
        self._replacing.clear()
        self._costs.clear()
        self._succeeded.clear()
        if with_hits:
            self._hits.clear()

    # -- batches -------------------------------------------------------------------------

    @contextmanager
    def batch_submission(self, provider: str) -> Iterator[None]:
        """Hold ``provider``'s batch-submission advisory lock (session level) while the block
        looks up open batches and submits: two runs can then never both submit a request that
        neither saw registered. The lock ends with the connection if the process dies."""
        with session_lock(self._conn, BATCH_LOCK_PREFIX + provider):
            yield

    def open_batches(self, provider: str, keys: Sequence[str]) -> list[OpenBatch]:
        """Open (submitted, not ended) batches of ``provider`` holding any of ``keys``,
        oldest first."""
        if not keys:
            return []
        rows = sql.open_batch_rows(self._conn, provider, keys)
        self._conn.commit()
        return [OpenBatch(provider, batch_id,
                          {key: BatchedRequest(**meta) for key, meta in requests.items()},
                          run_id) for batch_id, requests, run_id in rows]

    def register_batch(self, provider: str, batch_id: str,
                       requests: dict[str, BatchedRequest]) -> None:
        """A batch the provider has just accepted: recorded and committed at once."""
        sql.register_batch(
            self._conn, provider, batch_id, models=sorted({r.model for r in requests.values()}),
            keys=list(requests),
            requests={key: {"model": r.model, "operation": r.operation,
                            "prompt_version": r.prompt_version, "query_id": r.query_id}
                      for key, r in requests.items()}, run_id=self.run_id)
        self._conn.commit()

    def abandon_batch(self, provider: str, batch_id: str) -> None:
        """The provider no longer knows the batch (or it expired unanswered): not polled again."""
        sql.abandon_batch(self._conn, provider, batch_id)
        self._conn.commit()

    def record_batch_results(self, provider: str, batch_id: str, replies: Sequence[BatchReply],
                             *, status: str = "ended") -> bool:
        """Close an open batch and store its paid replies (cache and cost rows), in one
        transaction. Returns False, storing nothing, when the batch is no longer open: another
        run collected it (its replies are then in the cache)."""
        try:
            if not sql.end_batch(self._conn, provider, batch_id, status):
                self._conn.rollback()
                return False
            if replies:
                reply_cache.store_replies(self._conn, [
                    (r.key, provider, r.request.model, r.request.operation,
                     r.request.prompt_version, r.completion.text,
                     r.completion.usage.input_tokens, r.completion.usage.output_tokens,
                     r.completion.usage.cached_tokens, True, self.run_id) for r in replies])
                sql.log_costs(self._conn, [
                    (self.run_id, provider, r.request.model, r.request.operation,
                     r.completion.usage.input_tokens, r.completion.usage.output_tokens,
                     r.completion.usage.cached_tokens, r.cost, True, "label",
                     r.request.query_id)
                    for r in replies])
            self._conn.commit()
        except BaseException:
            if not self._conn.closed:
                self._conn.rollback()
            raise
        self._batch_replies.update(r.key for r in replies)
        return True
