"""Progress bars for long command-line work, shown only to a person watching a terminal.

Library functions never draw anything: they take ``progress: ProgressCallback | None`` and
call ``progress(done, total)`` as work completes (``done`` so far, out of ``total``; ``total``
None when it is not known). Commands wrap the call in :func:`progress_bar`, which yields such
a callback drawing a tqdm bar on stderr when stderr is a terminal, and ``None`` otherwise, so
logs, CI output, pipes and ``--json`` stay free of bar characters (and the library skips work
done only to report progress). ``TQDM_DISABLE=1`` turns the bars off in a terminal too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

ProgressCallback = Callable[[int, "int | None"], None]


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes, closed streams)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def draws_bars(stream: TextIO | None = None) -> bool:
    """Whether progress bars belong on ``stream`` (default: stderr, read now, so a redirected
    ``sys.stderr`` counts): only when it is a terminal. Our own bars and those of libraries
    we load (model loading, embedding batches) follow this one rule."""
    return is_terminal(sys.stderr if stream is None else stream)


@contextmanager
def progress_bar(description: str, *, unit: str = "it",
                 stream: TextIO | None = None) -> Iterator[ProgressCallback | None]:
    """A ``progress(done, total)`` callback drawing a bar on ``stream`` (default stderr), or
    None when ``stream`` is not a terminal. The bar is removed when the block ends, so the
    command's own output follows on a clean line."""
    stream = sys.stderr if stream is None else stream
    if not draws_bars(stream):
        yield None
        return
    from tqdm import tqdm  # a fifth of a second, paid only when a bar is drawn on a terminal

    bar = tqdm(total=None, desc=description, unit=unit, file=stream, leave=False,
               dynamic_ncols=True)

    def report(done: int, total: int | None = None) -> None:
        if total is not None and total != bar.total:
            bar.total = max(total, done)
            bar.refresh()
        if done != bar.n:
            bar.update(done - bar.n)

    try:
        yield report
    finally:
        bar.close()
