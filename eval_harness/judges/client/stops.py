"""Why a judge run stops early, and the sentence each stop ends with.

Every stop is a :class:`RunStopped` with a ``kind``: ``budget``, ``quota``, ``auth`` (see
:mod:`eval_harness.judges.client.runner`), ``interrupt`` (the user's SIGINT or SIGTERM, see
:mod:`eval_harness.stopping`) and ``store`` (the store went away under the run).

A stopped run must not sit out a wait it no longer needs (a rate limiter's slot, a retry
backoff, a provider's pause, a budget reservation, a batch poll): every such wait goes
through :func:`wait_unless`, which ends it the moment the stop's event is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from eval_harness.judges.client.providers import provider as provider_named

if TYPE_CHECKING:  # the commands import this module: it must not load the provider SDKs
    from eval_harness.judges.client.retry import ErrorInfo


T = TypeVar("T")
STOPPED = object()  # what wait_unless returns when the stop came first


class RunStopped(RuntimeError):
    """The run cannot go on: no more calls are sent (cached replies are still answered)."""

    kind = "stopped"


class BudgetExhausted(RunStopped):
    """The run's judge budget does not cover the next call; nothing more is sent."""

    kind = "budget"


class QuotaExhausted(RunStopped):
    """A provider refused a call because the account has no quota or credit left; waiting
    cannot fix it, so nothing more is sent."""

    kind = "quota"


class AuthenticationRejected(RunStopped):
    """A provider rejected the API key (401) or refused it the permission (403); every later
    call would be refused the same way, so nothing more is sent."""

    kind = "auth"


class RunInterrupted(RunStopped):
    """The user stopped the run (SIGINT / SIGTERM): nothing more is sent."""

    kind = "interrupt"


class StoreLost(RunStopped):
    """The store cannot be read or written any more (server stopped, connection lost): no
    reply could be stored, so nothing more is bought. ``error`` is the store's own error."""

    kind = "store"

    def __init__(self, message: str, error: BaseException | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.kept: str | None = None  # what the stopped work had stored, when it knows


STOPS = {cls.kind: cls for cls in (BudgetExhausted, QuotaExhausted, AuthenticationRejected,
                                    RunInterrupted)}
# stops after which a call waiting for a slot is not sent: the provider would refuse it, the
# user asked to stop, or its reply could not be stored
REFUSING_STOPS = ("quota", "auth", "interrupt", "store")
# what a request sent before a stop signal gets to deliver: short enough that a stopped
# command exits within 3 s of the signal (issue #31), long enough for a relevance reply
INTERRUPT_GRACE_SECONDS = 2.0


async def wait_unless(stop: asyncio.Event, waiting: Awaitable[T]) -> T | object:
    """``waiting``'s result, or :data:`STOPPED` as soon as ``stop`` is set (at once if it is
    set already): ``waiting`` is then cancelled, so a rate limiter, a sleep or a future
    waited for is left as if never waited on.

    Whatever finished first wins: a wait that completed in the same turn of the event loop as
    the stop returns its result (the caller checks the stop next, as after any wait).
    """
    if stop.is_set():
        if asyncio.iscoroutine(waiting):
            waiting.close()  # never started: nothing to cancel
        return STOPPED
    task = asyncio.ensure_future(waiting)
    # an error of a wait this caller no longer awaits (it was cancelled) is not "unretrieved"
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
    return task.result() if task.done() else STOPPED


def auth_message(provider: str, base_url: str | None, error: ErrorInfo) -> str:
    """The one sentence a run stopped by ``error`` (kind ``auth``) ends with."""
    where = f" at {base_url}" if base_url else " (its default server)"
    what = ("rejected the API key" if error.status_code != 403
            else "rejected the API key (it lacks the permission for this request)")
    try:
        variable = provider_named(provider).key_variable
    except LookupError:
        variable = None
    fix = f"set a valid key in {variable}" if variable else "set a valid key"
    return (f"the {provider} server{where} {what} (HTTP {error.status_code}, {error.code}), "
            f"so the run stopped; {fix} (or point the base URL at the right server) and run "
            "again (what was judged is kept and cached)")


def quota_message(provider: str, base_url: str | None, error: ErrorInfo) -> str:
    """The one sentence a run stopped by ``error`` (kind ``quota``) ends with."""
    where = f" at {base_url}" if base_url else ""
    status = f", HTTP {error.status_code}" if error.status_code else ""
    return (f"the {provider} account{where} has no quota or credit left ({error.code}{status}), "
            "which waiting does not fix, so the run stopped; add credit or raise its spend "
            "limit with the provider and run again (what was judged is kept and cached)")
