"""The store under a long run: noticing at once that it went away, and cancelling a statement
the user stopped the run in.

A connection the harness is not using has nothing to read. When the server ends the session
(a shutdown, a crash, ``pg_terminate_backend``) its socket becomes readable: the server's
last message, then the end of the stream. An event loop running paid work (the judges) can
watch for that and stop sending requests right away, instead of learning of it from the
first reply it fails to store.

Work that stops itself at safe points (:func:`eval_harness.stopping.cooperative`) is not
interrupted inside a statement, so a statement that waits (for a lock another run holds)
would hold the stop up: :func:`statements_cancelled_on_stop` cancels it instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial

import psycopg
from psycopg import pq

from eval_harness import stopping


@contextmanager
def watch_idle_connection(conn: psycopg.Connection, on_lost: Callable[[BaseException], object],
                          loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Call ``on_lost(error)`` (once, on ``loop``) when ``conn``'s server ends its session
    while the block runs. Sound only while every statement on ``conn`` runs on ``loop``'s
    thread and reads its whole result before the loop runs again (psycopg's synchronous
    calls do), so that anything readable between them comes from the server unasked."""
    try:
        fd = conn.fileno()
    except psycopg.Error:  # already closed or lost: its first use will say so
        yield
        return

    def readable() -> None:
        try:
            conn.pgconn.consume_input()
        except psycopg.Error as exc:
            error: BaseException = exc
        else:
            if conn.pgconn.status == pq.ConnStatus.OK:
                return  # the server's last words (or a notice); the end of the stream follows
            error = psycopg.OperationalError("the connection to the store was lost")
        loop.remove_reader(fd)
        on_lost(error)

    try:
        loop.add_reader(fd, readable)
        watching = True
    except NotImplementedError:  # a loop that cannot watch sockets (Windows' proactor):
        watching = False         # the first failed read or write says it then
    try:
        yield
    finally:
        if watching:
            loop.remove_reader(fd)


@contextmanager
def statements_cancelled_on_stop(*conns: psycopg.Connection) -> Iterator[None]:
    """While the block runs, a stop signal cancels the statement running on any of
    ``conns`` (it then fails with ``QueryCanceled``; its transaction rolls back)."""
    with ExitStack() as stack:
        for conn in conns:
            stack.enter_context(stopping.on_stop(partial(_cancel_running, conn)))
        yield


def _cancel_running(conn: psycopg.Connection) -> None:
    """Cancel ``conn``'s statement if one is running (called from the signal handler, which
    runs in the thread that waits for that statement; an idle connection is left alone, so
    the next statement is never the one cancelled)."""
    try:
        if conn.closed or conn.pgconn.transaction_status != pq.TransactionStatus.ACTIVE:
            return
        conn.cancel_safe(timeout=5.0)
    except psycopg.Error:
        pass  # the store is gone: the statement fails anyway
