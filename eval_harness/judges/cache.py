"""The Postgres side of the call pipeline: the reply cache, the cost log and the retry log.

* ``judge_cache`` (migration 0002): one row per distinct request key (see
  :meth:`ChatRequest.cache_key`) with the reply text and its usage. A cache hit costs nothing
  and writes no cost row.
* ``api_cache_hit_log`` (migration 0005): the hits, counted per (provider, model, operation)
  and written as one aggregated row per key on each flush, with ``saved_cost``: what the
  replies would have cost as live calls at list price. A batch result reaching its own judge
  through the cache is the batch being delivered (paid in ``api_cost_log``), not a hit.
* ``api_cost_log``: one row per billed provider call (batch results included, flagged).
* ``api_retry_log``: one row per retry, written when the call ends, ``success`` telling whether
  the call finally succeeded.

Writes are buffered and committed every ``flush_every`` records and on :meth:`flush`, so a
run that stops (budget, interrupt) keeps everything it paid for up to the last flush; the
pipeline flushes when a run ends, however it ends. All methods run on the event loop's
thread, one at a time, so one psycopg connection is enough.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from eval_harness.judges.protocol import ChatRequest, Completion, Usage


@dataclass(frozen=True)
class RetryEvent:
    error_type: str
    status_code: int | None
    retry_count: int      # 1 for the first retry
    wait_seconds: float


class JudgeLedger:
    def __init__(self, conn: psycopg.Connection, *, run_id: str | None,
                 flush_every: int = 25) -> None:
        self._conn = conn
        self.run_id = run_id
        self._flush_every = flush_every
        self._pending_cache: dict[str, tuple] = {}
        self._costs: list[tuple] = []
        self._retries: list[tuple] = []
        self._hits: dict[tuple[str, str, str], list] = {}  # (provider, model, op) -> [n, USD]
        self._batch_replies: set[str] = set()  # keys a batch of this ledger filled, undelivered

    # -- cache ---------------------------------------------------------------------------

    def cached(self, key: str) -> Completion | None:
        row = self._pending_cache.get(key)
        if row is None:
            row = self._conn.execute(
                "SELECT key, provider, model, operation, prompt_version, reply, input_tokens, "
                "output_tokens, cached_tokens FROM judge_cache WHERE key = %s", (key,)).fetchone()
        if row is None:
            return None
        return Completion(row[5], Usage(row[6], row[7], row[8]))

    def cached_keys(self, keys: list[str]) -> set[str]:
        """Which of ``keys`` the cache already answers (one query, for batch planning)."""
        found = {k for k in keys if k in self._pending_cache}
        rows = self._conn.execute("SELECT key FROM judge_cache WHERE key = ANY(%s)",
                                  (list(set(keys) - found),)).fetchall()
        return found | {r[0] for r in rows}

    def record_cache_hit(self, request: ChatRequest, *, saved_cost: float) -> None:
        """A call answered by the cache (or by an identical call in flight): count it.

        ``saved_cost`` is the reply's usage at list price. The first hit on a reply that a
        batch of this ledger wrote is that batch being delivered, already paid: not counted.
        """
        key = request.cache_key()
        if key in self._batch_replies:
            self._batch_replies.discard(key)
            return
        entry = self._hits.setdefault((request.provider, request.model, request.operation),
                                      [0, 0.0])
        entry[0] += 1
        entry[1] += max(0.0, saved_cost)

    # -- recording -----------------------------------------------------------------------

    def record_call(self, request: ChatRequest, completion: Completion, *, cost: float,
                    batch: bool = False, query_id: int | None = None) -> None:
        """A billed call: its cost row, and its reply into the cache."""
        usage = completion.usage
        self._pending_cache[request.cache_key()] = (
            request.cache_key(), request.provider, request.model, request.operation,
            request.prompt_version, completion.text, usage.input_tokens, usage.output_tokens,
            usage.cached_tokens, batch, self.run_id)
        if batch:
            self._batch_replies.add(request.cache_key())
        self._costs.append((self.run_id, request.provider, request.model, request.operation,
                            usage.input_tokens, usage.output_tokens, usage.cached_tokens, cost,
                            batch, query_id))
        self._maybe_flush()

    def record_retries(self, request: ChatRequest, events: list[RetryEvent], *,
                       success: bool) -> None:
        for event in events:
            self._retries.append((self.run_id, request.provider, request.model,
                                  request.operation, event.error_type, event.status_code,
                                  event.retry_count, event.wait_seconds, success))
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if len(self._pending_cache) + len(self._costs) + len(self._retries) >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        if not (self._pending_cache or self._costs or self._retries or self._hits):
            return
        with self._conn.cursor() as cur:
            if self._pending_cache:
                cur.executemany(
                    "INSERT INTO judge_cache (key, provider, model, operation, prompt_version, "
                    "reply, input_tokens, output_tokens, cached_tokens, batch, run_id) VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                    list(self._pending_cache.values()))
            if self._costs:
                # query_id may name a query deleted meanwhile; the row is kept without it
                cur.executemany(
                    "INSERT INTO api_cost_log (run_id, api_name, model, operation, input_tokens, "
                    "output_tokens, cached_tokens, estimated_cost, batch, query_id) "
                    "SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                    "(SELECT id FROM ground_truth WHERE id = %s)", self._costs)
            if self._retries:
                cur.executemany(
                    "INSERT INTO api_retry_log (run_id, api_name, model, operation, error_type, "
                    "status_code, retry_count, wait_seconds, success) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", self._retries)
            if self._hits:
                cur.executemany(
                    "INSERT INTO api_cache_hit_log (run_id, api_name, model, operation, hits, "
                    "saved_cost) VALUES (%s, %s, %s, %s, %s, %s)",
                    [(self.run_id, *key, hits, saved)
                     for key, (hits, saved) in self._hits.items()])
        self._conn.commit()
        self._pending_cache.clear()
        self._costs.clear()
        self._retries.clear()
        self._hits.clear()
