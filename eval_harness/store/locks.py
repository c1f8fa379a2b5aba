"""Session-level advisory locks: what must not run twice at once, across processes.

A session lock ends with its connection, so a killed process never leaves one behind. Keys
are text (``hashtext`` maps them to Postgres' lock space); each owner names its own prefix.
Keyed locks (:func:`try_keyed_locks`) lock one key of a named space each, without waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import psycopg

from eval_harness.store.liveness import statements_cancelled_on_stop


def take_session_lock(conn: psycopg.Connection, key: str, *,
                      on_wait: Callable[[], None] | None = None, shared: bool = False) -> None:
    """Take the advisory lock ``key`` for the session (``shared``: in share mode, which only
    an exclusive holder blocks); if another session holds it, call ``on_wait()`` once (to
    say so) and wait for it, or for a stop signal (the wait then fails with
    ``QueryCanceled``)."""
    mode = "_shared" if shared else ""
    if on_wait is not None:
        if conn.execute(f"SELECT pg_try_advisory_lock{mode}(hashtext(%s))",
                        (key,)).fetchone()[0]:
            return
        on_wait()
    with statements_cancelled_on_stop(conn):  # a stop signal ends the wait
        conn.execute(f"SELECT pg_advisory_lock{mode}(hashtext(%s))", (key,))


@contextmanager
def session_lock(conn: psycopg.Connection, key: str, *,
                 on_wait: Callable[[], None] | None = None,
                 shared: bool = False) -> Iterator[None]:
    """Hold the advisory lock ``key`` while the block runs (see :func:`take_session_lock`).

    Commits ``conn`` after taking and after releasing the lock (a non-autocommit connection
    would otherwise keep a transaction open around the block); a failed transaction is rolled
    back before the release.
    """
    take_session_lock(conn, key, on_wait=on_wait, shared=shared)
    conn.commit()
    try:
        yield
    finally:
        if not conn.closed:
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                conn.rollback()
            conn.execute(f"SELECT pg_advisory_unlock{'_shared' if shared else ''}(hashtext(%s))",
                         (key,))
            conn.commit()


# ---------------------------------------------------------------------------------------
# Keyed locks: one lock per key (a query's text, say) within a named space. They live in
# Postgres' two-int4 key space, (hashtext(space), hashtext(key)), which never overlaps the
# single-bigint keys above. Two keys of one space that hash alike share a lock: a run then
# waits for what it did not need to, never the other way round.


def try_keyed_locks(conn: psycopg.Connection, space: str, keys: Sequence[str]) -> set[str]:
    """Take, without waiting, the session lock of every key of ``keys`` in ``space`` that no
    other session holds; returns the keys taken (a session may take a lock it holds again,
    and must then release it as often). One statement; the caller commits."""
    rows = conn.execute(
        "SELECT key FROM unnest(%s::text[]) AS key "
        "WHERE pg_try_advisory_lock(hashtext(%s), hashtext(key))",
        (list(dict.fromkeys(keys)), space)).fetchall()
    return {row[0] for row in rows}


def release_keyed_locks(conn: psycopg.Connection, space: str, keys: Sequence[str]) -> None:
    """Release the session's lock of each of ``keys`` in ``space`` once (the caller commits)."""
    if keys:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s), hashtext(key)) "
                     "FROM unnest(%s::text[]) AS key", (space, list(keys)))
