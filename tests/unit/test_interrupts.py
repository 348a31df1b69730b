"""pytest_desched.interrupts: signals unwind the work, a cleanup finishes whatever arrives."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from pytest_desched import interrupts


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    """Process-wide signal state: fresh for each test, and none left for the next file's."""
    interrupts.reset()
    yield
    interrupts.reset()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_unwinds_the_work_then_handlers_are_restored(sig: int) -> None:
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt), interrupts.interrupts_unwind():
        os.kill(os.getpid(), sig)
    assert interrupts.interrupted()
    assert signal.getsignal(sig) is before


def test_second_signal_does_not_abandon_a_cleanup(capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C, then Ctrl-C again during the cleanup: the cleanup runs to its end."""
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), interrupts.interrupts_unwind():
        try:
            os.kill(os.getpid(), signal.SIGINT)
        finally:
            with interrupts.shielded("embedded cluster c1"):
                os.kill(os.getpid(), signal.SIGINT)  # the second one
                done.append("cluster deleted")
    assert done == ["cluster deleted"]
    err = capsys.readouterr().err
    assert "SIGINT: still cleaning up embedded cluster c1" in err
    assert "1 more signal abandons it" in err


def test_third_signal_abandons_and_the_exit_line_says_who_removes_what() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), interrupts.interrupts_unwind():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            with interrupts.shielded("embedded cluster c1"):
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)  # the third: abandon
                done.append("never")
    assert done == []
    interrupts.left_behind.append("embedded cluster c1: the next run's reaper deletes it")
    assert interrupts.exit_message() == (
        "interrupted; NOT cleaned up: embedded cluster c1: the next run's reaper deletes it"
    )


def test_signal_during_a_normal_cleanup_ends_the_command_after_it() -> None:
    """The work had finished; a Ctrl-C during its cleanup is held back, then exits 130."""
    done: list[str] = []
    with (
        pytest.raises(KeyboardInterrupt, match="held back"),
        interrupts.interrupts_unwind(),
        interrupts.shielded("release r"),
    ):
        with interrupts.shielded("cluster c"):  # nested: raised once, at the outermost
            os.kill(os.getpid(), signal.SIGINT)
            done.append("cluster")
        done.append("release")
    assert done == ["cluster", "release"]


def test_exit_message_lists_verified_kept_and_nothing() -> None:
    assert interrupts.exit_message() == "interrupted; no cluster had been started"
    interrupts.cleaned.append("embedded cluster a deleted (0 processes, folder removed)")
    interrupts.kept.append("embedded cluster b")
    assert interrupts.exit_message() == (
        "interrupted; cleaned up (verified: embedded cluster a deleted (0 processes, folder "
        "removed)); kept as asked: embedded cluster b"
    )


def test_worker_stop_interrupts_work_but_never_cleanup() -> None:
    stopper = interrupts.WorkerStop()
    started, seen = threading.Event(), []
    release = threading.Event()

    def work() -> None:
        stopper.bind()
        try:
            started.set()
            while not release.wait(0.01):  # a worker's long experiment
                pass
            seen.append("finished")  # pragma: no cover - stopped before
        except KeyboardInterrupt:
            seen.append("stopped")
        finally:
            stopper.cleaning_up()
            seen.append("cleaned")

    t = threading.Thread(target=work)
    t.start()
    started.wait(5)
    assert stopper.stop()
    t.join(5)
    assert seen == ["stopped", "cleaned"]
    assert not stopper.stop()  # in (or past) its cleanup: left alone


def test_a_signal_after_the_work_is_over_is_recorded_never_raised() -> None:
    """Once main's result is decided (finishing), a signal cannot turn it into another."""
    with interrupts.interrupts_unwind():
        interrupts.finishing()
        assert not interrupts.late_signal()
        os.kill(os.getpid(), signal.SIGTERM)  # would raise KeyboardInterrupt before
        assert interrupts.late_signal()
    with pytest.raises(KeyboardInterrupt), interrupts.interrupts_unwind():  # the next block
        os.kill(os.getpid(), signal.SIGTERM)
    interrupts.reset()
    assert not interrupts.late_signal()


def test_cleanup_summary_is_said_without_a_signal_too() -> None:
    assert interrupts.cleanup_summary() == ""
    interrupts.cleaned.append("embedded cluster a deleted (0 processes, folder removed)")
    assert interrupts.cleanup_summary() == (
        "cleaned up (verified: embedded cluster a deleted (0 processes, folder removed))"
    )


def test_worker_stop_kills_the_command_the_worker_waits_on() -> None:
    """A worker blocked in a child process runs no Python: its child is killed, so it stops."""
    import time

    from pytest_desched import proc

    waiting, seen = threading.Event(), []
    stopper = interrupts.WorkerStop()

    def work() -> None:
        stopper.bind()
        try:
            waiting.set()
            proc.run(["sleep", "30"], timeout=60)
            seen.append("ran to its end")
        except KeyboardInterrupt:
            seen.append("stopped")

    t = threading.Thread(target=work, daemon=True)
    t.start()
    assert waiting.wait(10)
    deadline = time.monotonic() + 10
    while t.ident not in proc._CHILDREN and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    assert stopper.stop()
    t.join(10)
    assert seen == ["stopped"] and time.monotonic() - t0 < 5
    assert t.ident not in proc._CHILDREN


def test_on_signal_calls_back_at_the_first_signal_before_unwinding() -> None:
    calls: list[str] = []
    with (
        pytest.raises(KeyboardInterrupt),
        interrupts.interrupts_unwind(),
        interrupts.on_signal(lambda: calls.append("stop the worker")),
    ):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            calls.append("unwinding")
    assert calls == ["stop the worker", "unwinding"]
    assert interrupts._on_first == []
