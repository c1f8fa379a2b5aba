"""One rate limit and one budget for every process that judges against the same store.

Judging is spread over processes and machines (``judge --shard I/N``, the partitioned
``dual_judge_shard`` asset on Dagster's multiprocess, Celery or Kubernetes executors); each
has its own call pipeline (:mod:`.runner`). What they must not each have is the provider's
limit and the night's budget: N shards at the configured rate send N times it, and N budgets
spend N times the money. Both are held in the store (migration 0026), the owner of whose
tables this module is (``judge_holders``, ``judge_rate_shares``, ``judge_budget_spend``).

**Holders.** A judge session is a holder (:class:`QuotaHolder`): a row with a heartbeat, which
the session's :meth:`QuotaHolder.beat` refreshes every :data:`HEARTBEAT_SECONDS` on the event
loop. A holder not heard from for :data:`LEASE_SECONDS` is gone (killed, its machine lost, its
connection cut): the others stop counting it at their next heartbeat, so a dead process keeps
its share for at most a few seconds. A session that ends deletes its row.

**One rate, in shares.** The rate of one provider account (:func:`account_of`: a hash of the
provider, its server and its key, never the key) is divided equally among the holders that
are *active* on it: that had calls waiting or on their way since their last heartbeat. Each
process keeps its own limiter (:mod:`.limiter`, :mod:`.adaptive`) and sends at its share of
what the configuration and the provider's headers allow, so a process alone sends exactly as
before (share 1, no statement per request) and N active ones send 1/N each. The share of a
process that falls idle goes to the others at their next heartbeat; one that wakes counts
itself at once and is counted by the others within a heartbeat. Joining is serialised (an
advisory lock per account), so two processes starting together see each other.

Between two heartbeats the shares may add up to more than one: a process started while
another was alone sends its share while the other still sends the whole rate for at most a
heartbeat. With buckets that hold one second of a rate (:mod:`.limiter`) and heartbeats twice
a second this is a few requests a minute at most (RESULTS: 1, 2, 4 and 8 processes sharing
one limit).

**One budget.** :class:`SharedBudget` is a :class:`~.budget.Budget` whose reservations and
spending are rows of ``judge_budget_spend``, one per holder, scope (a dataset on one UTC day:
:func:`budget_scope`) and line (``label`` for ``judges.budget_usd``, ``retest``, ``anchor``).
A reservation takes the scope's advisory lock and fits only when what every holder spent,
plus what the live ones hold reserved, plus it stays within the limit; settling replaces the
reservation by the real cost. So all the processes of a dataset together spend at most the
budget in one night (plus, at worst, the one call a process killed between paying and
settling had reserved), and a shard that finds it used up stops with the same sentence as a
single run.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date

import psycopg

from eval_harness.judges.client.budget import Budget, BudgetLine

HEARTBEAT_SECONDS = 0.5  # how often a holder says it is alive and reads the others' shares
LEASE_SECONDS = 3.0      # a holder not heard from for this long is gone
FORGET_SECONDS = 3600.0  # a gone holder's row is deleted this long after its last heartbeat
BUDGET_LOCK_PREFIX = "eval_harness.judge-budget:"  # + scope / line (hashtext)
SHARE_LOCK_PREFIX = "eval_harness.judge-rate:"     # + provider / account (hashtext)
LABEL_LINE = "label"  # the line of judges.budget_usd

_LIVE = f"h.heartbeat_at > clock_timestamp() - interval '{LEASE_SECONDS} seconds'"


@contextmanager
def _committed(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """The block's statements committed together, or rolled back if it raises."""
    try:
        yield conn
        conn.commit()
    except BaseException:
        if not conn.closed:
            conn.rollback()
        raise


def account_of(provider: str, server: str | None, key: str | None) -> str:
    """The account a provider's rate limit belongs to: its name, server and key, hashed (the
    store never holds the key)."""
    text = "\x00".join((provider, server or "", key or ""))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def budget_scope(conn: psycopg.Connection, dataset: str) -> str:
    """The scope of a dataset's budget tonight: ``dataset@YYYY-MM-DD``, the store's UTC date
    (one clock for every machine)."""
    day = conn.execute("SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date").fetchone()[0]
    conn.commit()
    return f"{dataset}@{day.isoformat() if isinstance(day, date) else day}"


class QuotaHolder:
    """This session's row among the holders, its rate shares and their heartbeats."""

    def __init__(self, conn: psycopg.Connection, *, holder: str | None = None) -> None:
        self._conn = conn
        self.holder = holder or uuid.uuid4().hex
        self._accounts: dict[str, str] = {}   # provider -> account
        self.others: dict[str, int] = {}      # provider -> other active holders at last beat
        self.registered = False

    def share(self, provider: str) -> float:
        """The part of ``provider``'s rate this holder may send at (it counts itself)."""
        return 1.0 / (1 + self.others.get(provider, 0))

    def register(self, accounts: Mapping[str, str]) -> None:
        """Become a holder of ``accounts`` (provider -> account), each taken active, and read
        how many others are active on each."""
        conn = self._conn
        with _committed(conn):
            conn.execute(
                "INSERT INTO judge_holders (holder, host, pid) VALUES (%s, %s, %s) "
                "ON CONFLICT (holder) DO UPDATE SET heartbeat_at = clock_timestamp()",
                (self.holder, socket.gethostname()[:200], os.getpid()))
            for provider, account in sorted(accounts.items()):
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                             (f"{SHARE_LOCK_PREFIX}{provider}/{account}",))
                conn.execute(
                    "INSERT INTO judge_rate_shares (provider, account, holder, active) "
                    "VALUES (%s, %s, %s, true) ON CONFLICT (provider, account, holder) "
                    "DO UPDATE SET active = true", (provider, account, self.holder))
            self._accounts.update(accounts)
            self.others = self._count_others()
        self.registered = True

    def beat(self, active: Iterable[str]) -> dict[str, float]:
        """Say this holder is alive and which of its providers are ``active``; returns each
        provider's share from now on. Holders gone for :data:`FORGET_SECONDS` are deleted."""
        conn = self._conn
        active = set(active)
        with _committed(conn):
            updated = conn.execute(
                "UPDATE judge_holders SET heartbeat_at = clock_timestamp() WHERE holder = %s",
                (self.holder,)).rowcount
            if not updated:  # deleted as gone (this process was stalled): join again
                self.register(self._accounts)
                return {p: self.share(p) for p in self._accounts}
            conn.execute(
                "UPDATE judge_rate_shares SET active = (provider = ANY(%s)) WHERE holder = %s",
                (sorted(active), self.holder))
            conn.execute(
                "DELETE FROM judge_holders WHERE heartbeat_at < clock_timestamp() - "
                f"interval '{FORGET_SECONDS} seconds'")
            self.others = self._count_others()
        return {p: self.share(p) for p in self._accounts}

    def _count_others(self) -> dict[str, int]:
        if not self._accounts:
            return {}
        rows = self._conn.execute(
            "SELECT s.provider, count(*) FILTER (WHERE s.holder <> %s AND s.active AND "
            f"{_LIVE}) FROM judge_rate_shares s JOIN judge_holders h USING (holder) "
            "WHERE (s.provider, s.account) IN (SELECT * FROM unnest(%s::text[], %s::text[])) "
            "GROUP BY s.provider",
            (self.holder, list(self._accounts), list(self._accounts.values()))).fetchall()
        return {provider: int(n) for provider, n in rows}

    def leave(self) -> None:
        """No longer a holder: the share goes back to the others at once (the budget rows
        stay; their reservations are settled or no longer counted)."""
        if not self.registered:
            return
        self._conn.execute("DELETE FROM judge_holders WHERE holder = %s", (self.holder,))
        self._conn.commit()
        self.registered = False


class SharedBudget(Budget):
    """A budget held in the store, shared by every holder of its scope (module docstring).

    ``spent_usd`` is what all of them spent (as of this holder's last reservation or
    settlement); ``pending`` counts this holder's reservations and, as of its last
    reservation, the live others'. A call that does not fit while others hold reservations
    waits for them (:attr:`poll_seconds`: it is not told when they settle).
    """

    poll_seconds = 0.2

    def __init__(self, conn: psycopg.Connection, limit_usd: float | None, *, scope: str,
                 line: str, holder: str) -> None:
        Budget.__init__(self, limit_usd)
        self._conn = conn
        self.scope, self.line, self.holder = scope, line, holder
        self.own_pending = 0
        self.others_pending = 0
        self.spent_here_usd = 0.0  # this holder's part of spent_usd

    @property
    def pending(self) -> int:
        return self.own_pending + self.others_pending

    @pending.setter
    def pending(self, value: int) -> None:  # Budget.__init__ sets it
        self.own_pending = value

    def try_reserve(self, amount: float) -> bool:
        conn = self._conn
        with _committed(conn):
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                         (f"{BUDGET_LOCK_PREFIX}{self.scope}/{self.line}",))
            spent, reserved, others = conn.execute(
                "SELECT coalesce(sum(b.spent_usd), 0), coalesce(sum(b.reserved_usd) FILTER "
                f"(WHERE b.holder = %s OR {_LIVE}), 0), coalesce(sum(b.pending) FILTER "
                f"(WHERE b.holder <> %s AND {_LIVE}), 0) FROM judge_budget_spend b "
                "LEFT JOIN judge_holders h USING (holder) WHERE b.scope = %s AND b.line = %s",
                (self.holder, self.holder, self.scope, self.line)).fetchone()
            self.spent_usd, self.reserved_usd = float(spent), float(reserved)
            self.others_pending = int(others)
            fits = (self.limit_usd is None
                    or spent + reserved + amount <= self.limit_usd + 1e-12)
            if fits:
                conn.execute(
                    "INSERT INTO judge_budget_spend (scope, line, holder, reserved_usd, pending) "
                    "VALUES (%s, %s, %s, %s, 1) ON CONFLICT (scope, line, holder) DO UPDATE "
                    "SET reserved_usd = judge_budget_spend.reserved_usd + excluded.reserved_usd, "
                    "pending = judge_budget_spend.pending + 1",
                    (self.scope, self.line, self.holder, amount))
        if fits:
            self.reserved_usd += amount
            self.own_pending += 1
        return fits

    def settle(self, reserved: float, actual: float) -> None:
        self.own_pending -= 1
        self._write(reserved=reserved, actual=actual, settles=1)
        self.spent_usd += actual
        self.spent_here_usd += actual
        self.reserved_usd = max(0.0, self.reserved_usd - reserved)

    def charge(self, amount: float) -> None:
        self._write(reserved=0.0, actual=amount, settles=0)
        self.spent_usd += amount
        self.spent_here_usd += amount

    def _write(self, *, reserved: float, actual: float, settles: int) -> None:
        conn = self._conn
        with _committed(conn):
            # counted, not compared as floats: no reservation left, nothing held reserved
            conn.execute(
                "INSERT INTO judge_budget_spend (scope, line, holder, spent_usd) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (scope, line, holder) DO UPDATE SET "
                "spent_usd = judge_budget_spend.spent_usd + excluded.spent_usd, "
                "pending = greatest(0, judge_budget_spend.pending - %s), "
                "reserved_usd = CASE WHEN judge_budget_spend.pending - %s <= 0 THEN 0 "
                "ELSE greatest(0, judge_budget_spend.reserved_usd - %s) END",
                (self.scope, self.line, self.holder, actual, settles, settles, reserved))

    def exhausted_message(self, next_cost: float) -> str:
        return (f"the judge budget of ${self.limit_usd:.2f} for {self.scope_words()} is used "
                f"up (${self.spent_usd:.4f} spent, the next call could cost up to "
                f"${next_cost:.4f}); raise judges.budget_usd (or EVAL_HARNESS_JUDGE_BUDGET_USD) "
                "and run again: what was judged is kept and cached")

    def scope_words(self) -> str:
        dataset, _, day = self.scope.rpartition("@")
        return f"dataset {dataset} on {day} (UTC; all its processes together)"


class SharedBudgetLine(SharedBudget, BudgetLine):
    """A budget line (retests, anchors) held in the store like :class:`SharedBudget`."""

    def __init__(self, conn: psycopg.Connection, limit_usd: float | None, *, scope: str,
                 line: str, holder: str, key: str, step: str) -> None:
        SharedBudget.__init__(self, conn, limit_usd, scope=scope, line=line, holder=holder)
        self.key, self.step = key, step
        self.exhausted: str | None = None
        self.refused = 0

    def exhausted_message(self, next_cost: float) -> str:
        return BudgetLine.exhausted_message(self, next_cost)


def spent_in_scope(conn: psycopg.Connection, scope: str, line: str = LABEL_LINE) -> float:
    """What every holder of ``scope`` spent on ``line`` so far."""
    value = conn.execute("SELECT coalesce(sum(spent_usd), 0) FROM judge_budget_spend "
                         "WHERE scope = %s AND line = %s", (scope, line)).fetchone()[0]
    conn.commit()
    return float(value)
