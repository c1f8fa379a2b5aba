"""A run the user stops (Ctrl-C, SIGINT; SIGTERM) stops the same way in every command.

* The first SIGINT or SIGTERM asks the run to stop. Work that stops itself at safe points
  runs inside :func:`cooperative` (the judges, the quality gates, calibration's writes): it
  is told at once (:func:`on_stop` listeners, :func:`requested`), sends no new paid request,
  stores what has arrived, and the block then raises :class:`Interrupted`. Anywhere else
  :class:`Interrupted` is raised where the program is, as Python raises KeyboardInterrupt
  (it is one, so psycopg cancels a running statement and open transactions roll back).
* A second signal while stopping ends the process at once, with the first one's exit code.
* The command then prints one line saying what was kept (:attr:`Interrupted.kept`) and exits
  128 + the signal number: 130 for SIGINT, 143 for SIGTERM.

The handlers are the command's (:func:`handle_stop_signals`, installed by ``eval-harness``
for every command). A library caller without them still gets the cooperative behaviour: a
:func:`cooperative` block installs the handler for its own duration, in the main thread.

An orchestrator running our code in-process may put its own handlers in place (Dagster
does, around each op, raising its own interrupt error). :func:`cooperative` blocks put ours
back for their duration, and while :func:`handle_stop_signals` is active every stop signal
also leaves its number on a wake-up socket, so a signal that another handler took is still
seen by :func:`requested` after that code returns.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOPPED_EXIT_CODES = tuple(128 + int(sig) for sig in STOP_SIGNALS)  # 130, 143


RERUN = "run the same command again to finish"
_SLEEP_STEP_S = 0.05  # how soon sleep() sees a stop


class Interrupted(KeyboardInterrupt):
    """The user stopped the run with ``signum``; ``kept`` says what is stored (for the line
    the command prints), when the code that stopped knows; ``next_step`` what to do."""

    def __init__(self, signum: int = signal.SIGINT, kept: str | None = None,
                 next_step: str = RERUN) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.kept = kept
        self.next_step = next_step

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a process a signal ended."""
        return 128 + self.signum

    def __str__(self) -> str:
        return interrupted_line(self)


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """The one line a command prints when ``exc`` stopped it."""
    kept = getattr(exc, "kept", None) or "the work finished so far is kept"
    return f"interrupted: {kept}; {getattr(exc, 'next_step', RERUN)}"


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None        # the first stop signal of this run
        self.kept: str | None = None          # what the stopped work said it kept
        self.depth = 0                        # cooperative blocks open in the main thread
        self.listeners: list[Callable[[], None]] = []
        self.hard_exit_hooks: list[Callable[[], None]] = []
        self.installed = False                # handle_stop_signals() is active
        self.wakeup: socket.socket | None = None
        self.handled = 0                      # stop signals _on_signal has seen this run


_state = _State()


def requested() -> int | None:
    """The signal number that asked the run to stop, or None."""
    _collect_missed()
    return _state.signum


def check(kept: str | None = None) -> None:
    """Raise :class:`Interrupted` if a stop was asked for (a safe point of long work)."""
    signum = requested()
    if signum is not None:
        raise Interrupted(signum, kept or _state.kept)


def sleep(seconds: float, kept: str | None = None) -> None:
    """``time.sleep(seconds)`` that a stop ends: raises :class:`Interrupted` as soon as a stop
    is asked for (before or during it), also inside a :func:`cooperative` block, where the
    signal itself raises nothing. For the synchronous waits of work that stops itself (a
    lock held by another process, polled)."""
    deadline = time.monotonic() + seconds
    check(kept)
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, _SLEEP_STEP_S))
        check(kept)


def note_kept(kept: str) -> None:
    """Record what stopped work kept, for a caller that only learns of the stop later (an
    in-process orchestrator turns our exception into a failed step)."""
    _state.kept = kept


@contextmanager
def on_stop(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` when a stop is asked for while the block runs (at once if one was
    asked before). It runs in the signal handler, so it must only schedule work, e.g.
    ``loop.call_soon_threadsafe(...)``, and not raise."""
    _state.listeners.append(callback)
    try:
        if requested() is not None:
            callback()
        yield
    finally:
        _state.listeners.remove(callback)


@contextmanager
def cooperative() -> Iterator[None]:
    """Run a block that stops itself at safe points: a stop signal only records the stop and
    tells the :func:`on_stop` listeners; when the block ends (or fails because of the stop)
    :class:`Interrupted` is raised. A stop asked for before the block raises at once."""
    check()
    main = threading.current_thread() is threading.main_thread()
    previous = {}
    if main:
        if _state.depth == 0:
            previous = {sig: signal.signal(sig, _on_signal) for sig in STOP_SIGNALS}
        _state.depth += 1
    failure = None
    try:
        yield
    except Exception as exc:
        if requested() is None:
            raise
        failure = exc  # what failed did so because of the stop
    finally:
        if main:
            _state.depth -= 1
            _restore(previous)
    signum = requested()
    if signum is not None:
        error = Interrupted(signum, _state.kept)
        if not _state.installed and _state.depth == 0:
            _forget()  # a library caller's next run starts afresh; a command's stop persists
        raise error from failure


def _restore(handlers: dict) -> None:
    for sig, handler in handlers.items():
        if handler is not None:  # None: set outside Python, cannot be put back
            signal.signal(sig, handler)


@contextmanager
def handle_stop_signals() -> Iterator[None]:
    """The command's handlers for SIGINT and SIGTERM while the block runs (main thread only;
    elsewhere the block runs unchanged). See the module docstring for the policy."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in STOP_SIGNALS}
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    old_wakeup = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    _state.installed, _state.wakeup = True, reader
    old_unraisable, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    try:
        yield
    finally:
        sys.unraisablehook = old_unraisable
        signal.set_wakeup_fd(old_wakeup)
        _restore(previous)
        reader.close()
        writer.close()
        _state.installed, _state.wakeup = False, None
        _forget()


def _unraisable(passed_on):
    """A hook for exceptions Python can only report (raised in a garbage-collection callback
    or a ``__del__``): an interrupt raised there, by our handler or Dagster's, once a stop
    was asked for, is that stop, which the wake-up socket still carries, so it is not printed
    as a traceback; anything else is passed on."""
    def hook(unraisable) -> None:
        interrupt = isinstance(unraisable.exc_value, KeyboardInterrupt) or (
            type(unraisable.exc_value).__name__ == "DagsterExecutionInterruptedError")
        if not (interrupt and requested() is not None):
            passed_on(unraisable)
    return hook


def at_hard_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` before a second stop signal ends the process at once (release what other
    processes would otherwise wait for, e.g. this process's handle on the embedded server)."""
    if hook not in _state.hard_exit_hooks:
        _state.hard_exit_hooks.append(hook)


def at_exit_unstoppable(hook: Callable[[], None]) -> None:
    """Run ``hook`` when the process exits, with stop signals ignored while it runs.

    Once a command has finished, what is left at exit is giving back what it holds (the
    embedded server: ``pg_ctl stop`` takes a second). A Ctrl-C landing then would break
    that shutdown half way and print a traceback from inside ``atexit`` for a command that
    already said it was done; ignoring it lets the shutdown end the way it began. Registered
    after the package's own exit hook, this one runs first (``atexit`` is last in, first out),
    so the package's hook finds the work done."""
    def run() -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
        hook()

    atexit.register(run)


def end_process(code: int) -> None:
    """End the process that ran one command, with ``code``, without the interpreter's final
    garbage collection (returns, to exit the usual way, while another thread still works).

    Exiting, Python looks through every object still alive for reference cycles; after
    ``run`` (Dagster, SQLAlchemy, pydantic, numpy, the store's rows) that took 3 s on a busy
    machine, all of the few seconds a stopped command may take. The command's work is done
    and written by now: the exit hooks run as at any exit (the embedded server's shutdown,
    logging's flush, temporary folders), the output is flushed, and the process ends; the
    system takes its memory back. Only for a stopped command's own process (``eval-harness``,
    ``python -m eval_harness.cli``, exiting 130 or 143), never for a caller that goes on (a
    test calling main), nor for a command that finished: its exit is the interpreter's own,
    which also closes what a library left open."""
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not main):
        return
    atexit._run_exitfuncs()  # as multiprocessing's children do before os._exit
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _forget() -> None:
    _state.signum, _state.kept, _state.handled = None, None, 0


def _on_signal(signum: int, frame) -> None:
    # The wake-up socket already holds this very signal: the stop recorded so far is
    # only taken from it by requested(), so count what this handler itself has seen.
    _state.handled += 1
    if _state.handled > 1:
        _second_signal(_state.signum or signum)
    if _state.signum is None:
        _state.signum = signum
    for listener in list(_state.listeners):
        try:
            listener()
        except Exception:  # a listener must not turn the stop into a crash
            pass
    if _state.depth == 0:
        raise Interrupted(_state.signum, _state.kept)


def _second_signal(first: int) -> None:
    """A stop signal while stopping: a command exits at once; a library caller gets
    :class:`Interrupted` right here, as a second Ctrl-C does in plain Python."""
    if not _state.installed:
        raise Interrupted(first, _state.kept)
    try:
        os.write(2, b"eval-harness: interrupted again: stopped at once; what was stored is "
                    b"kept; run the same command again to finish\n")
    except OSError:
        pass
    for hook in list(_state.hard_exit_hooks):
        try:
            hook()
        except BaseException:
            pass
    os._exit(128 + first)


def _collect_missed() -> None:
    """Record a stop signal another handler took (see the module docstring)."""
    reader = _state.wakeup
    if reader is None:
        return
    while True:
        try:
            data = reader.recv(512)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        if not data:
            return
        for number in data:
            if number in STOP_SIGNALS and _state.signum is None:
                _state.signum = number
