"""One command, each notice once: the scope in which a fallback notice is said at most once.

A :class:`~eval_harness.judges.client.session.FallbackNotices` says each notice once per run; but
one command is many runs to the person who typed it: ``eval-harness run`` is a nightly job, a gate
job per day and a report job, each with several steps and judge sessions, and ``gate`` builds
its judged gates in the definitions, the resources and each check. So "OPENAI_API_KEY is not
set, so local:lexical judges ..." came 17 times out of one ``run.sh``. The command line opens
:func:`said_once_per_command` around the whole command (its Dagster runs execute in the same
process), and inside it a notice any run has said is not said again. Outside it (notebooks,
the test suite, a long-lived Dagster code server) each run still says its own.

Kept out of :mod:`eval_harness.judges.client.session` so the command line can open the scope without
importing the provider SDKs at start-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# The notices said in the command running in this process; None: no command scope open.
_said_in_command: set[str] | None = None


@contextmanager
def said_once_per_command() -> Iterator[None]:
    """Within: each distinct notice is said at most once, whichever run says it first."""
    global _said_in_command
    outer = _said_in_command
    _said_in_command = set() if outer is None else outer  # nested: the outer command's
    try:
        yield
    finally:
        _said_in_command = outer


def first_in_command(notice: str) -> bool:
    """Whether ``notice`` should be said now: always outside a command scope; inside, only
    the first time (it is recorded as said)."""
    if _said_in_command is None:
        return True
    if notice in _said_in_command:
        return False
    _said_in_command.add(notice)
    return True
