"""Ctrl-C and SIGTERM: unwind the work, then finish the cleanup whatever else arrives.

Ground floor (imports nothing of the package). While a front end's work runs inside
`interrupts_unwind()`, SIGINT and SIGTERM raise KeyboardInterrupt, so `finally` blocks and
the session's `close()` run. Inside `shielded()` (a cleanup) a signal no longer raises: the
cleanup goes on and the user is told so; only a third signal abandons it, and then the
message names what is left and who removes it (`left_behind`). `interrupted()` tells a
cleanup that it runs because of a signal, so it may take the short way (delete a throwaway
cluster whole rather than uninstall what is in it first).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from pytest_desched.log import say
from pytest_desched.proc import kill_child_of

# Signals this process received while a front end's work ran: (signal number, monotonic time).
_received: list[tuple[int, float]] = []
# Set while a cleanup runs: what it cleans up (said to the user on a second signal).
_shield: list[str] = []
# What cleanups removed and verified gone, what was kept on request, and what an abandoned
# or failed cleanup left (each with who removes it): said in the one line on exit.
cleaned: list[str] = []
kept: list[str] = []
left_behind: list[str] = []
ABANDON_AFTER = 3  # the signal (counting the first) that abandons a running cleanup
# Set once a front end's work is over (its result or error decided): a signal then only
# records itself, so the exit line and code are the command's own, never a traceback.
_finishing: list[bool] = []
_late: list[int] = []  # signals that came while finishing (`late_signal`)
# Called at the first signal, before the work unwinds (`on_signal`).
_on_first: list[Callable[[], object]] = []


def interrupted() -> bool:
    """Whether a SIGINT or SIGTERM arrived since the work began."""
    return bool(_received)


def first_signal_at() -> float | None:
    """time.monotonic() of the first signal (for the time-to-exit figure), or None."""
    return _received[0][1] if _received else None


def reset() -> None:
    """Forget received signals (a new front-end run in the same process)."""
    _received.clear()
    _finishing.clear()
    _late.clear()
    for notes in (cleaned, kept, left_behind):
        notes.clear()


def sigterm_to_interrupt(signum: int, frame: Any) -> None:
    """The handler for SIGINT and SIGTERM: record, then unwind (or, shielded, carry on)."""
    _received.append((signum, time.monotonic()))
    if _finishing:  # the work is over and said: the caller exits with its own code, at once
        _late.append(signum)
        return
    if len(_received) == 1:
        for callback in list(_on_first):  # e.g. stop a worker thread now, not after our cleanup
            callback()
    if _shield and len(_received) < ABANDON_AFTER:
        name = signal.Signals(signum).name
        left = ABANDON_AFTER - len(_received)
        say(
            f"{name}: still cleaning up {_shield[-1]}; it finishes in seconds "
            f"({left} more signal{'s' if left > 1 else ''} abandon{'' if left > 1 else 's'} it: "
            "then the next run reaps what is left)"
        )
        return
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interrupts_unwind() -> Iterator[None]:
    """SIGINT and SIGTERM (CI cancel, `timeout`) unwind as KeyboardInterrupt while the block runs.

    Front ends wrap their work in it, so a cluster's teardown runs on SIGTERM as on Ctrl-C;
    the previous handlers are restored after, and nothing changes outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, sigterm_to_interrupt)
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        _finishing.clear()  # the next block's signals unwind again (an in-process caller)
        for signum, handler in previous.items():
            with suppress(ValueError, TypeError):
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def finishing() -> None:
    """The work is over: from now on a signal is recorded, never raised (see `late_signal`)."""
    if not _finishing:
        _finishing.append(True)


def late_signal() -> bool:
    """Whether a signal came after `finishing()`: the caller should exit now, with its code."""
    return bool(_late)


@contextmanager
def on_signal(callback: Callable[[], object]) -> Iterator[None]:
    """While the block runs, the first signal calls `callback` in the handler, before the
    main thread unwinds: a worker (WorkerStop.stop) then cleans up beside the main thread's
    own cleanup, not after it (a canary's two clusters were deleted one after the other)."""
    _on_first.append(callback)
    try:
        yield
    finally:
        _on_first.remove(callback)


@contextmanager
def shielded(what: str) -> Iterator[None]:
    """Run a cleanup that a second signal does not abandon (see the module docstring).

    Outside `interrupts_unwind` (a caller that kept Python's handlers) it only records
    what is being cleaned up; in another thread it does nothing. A signal held back is raised when the
    outermost cleanup ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only; a worker is stopped by WorkerStop
        return
    before = len(_received)
    _shield.append(what)
    try:
        yield
    finally:
        _shield.pop()
    # The cleanup finished; a signal it held back now ends the command (exit 130), as one
    # outside a cleanup would have.
    if not _shield and len(_received) > before:
        raise KeyboardInterrupt(f"signal {_received[-1][0]} (held back by the cleanup)")


def exit_message() -> str:
    """The line said on exit after a signal: what was removed (verified), kept, or left."""
    return "interrupted; " + (cleanup_summary() or "no cluster had been started")


def cleanup_summary() -> str:
    """What the cleanups removed (verified), kept or left, signal or not; "" when none ran."""
    parts = []
    if cleaned:
        parts.append("cleaned up (verified: " + "; ".join(cleaned) + ")")
    if kept:
        parts.append("kept as asked: " + "; ".join(kept))
    if left_behind:
        parts.append("NOT cleaned up: " + "; ".join(left_behind))
    return "; ".join(parts)


class WorkerStop:
    """Stop a worker thread's work at once on a signal, but never its cleanup.

    Signals reach only the main thread; a worker (the canary's candidate track) would run
    on to its next experiment boundary. `stop()` (main thread) raises KeyboardInterrupt in
    the worker unless it already began cleaning up; the worker calls `bind()` first and
    `cleaning_up()` as the first statement of its cleanup.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ident: int | None = None
        self._closing = False

    def bind(self) -> None:
        self._ident = threading.get_ident()

    def stop(self) -> bool:
        import ctypes

        with self._lock:
            if self._ident is None or self._closing:
                return False
            n = ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._ident), ctypes.py_object(KeyboardInterrupt)
            )
            if int(n) == 1:  # a thread waiting on a command runs no Python until it ends
                kill_child_of(self._ident)
            return int(n) == 1

    def cleaning_up(self) -> None:
        # An interrupt sent just before the lock was ours fires in here, at most once.
        while True:
            try:
                with self._lock:
                    self._closing = True
                return
            except KeyboardInterrupt:
                continue
