"""The one progress reporter: whole lines under threads, the current stderr, one tag each."""

from __future__ import annotations

import logging
import re
import sys
import threading

import pytest

from pytest_desched import log


def test_lines_from_many_threads_never_interleave(capsys: pytest.CaptureFixture[str]) -> None:
    """Two canary tracks used to merge into one line ("...[candidate] starting"): never again."""
    n_threads, n_lines = 8, 400

    def talk(i: int) -> None:
        for j in range(n_lines):
            log.say(f"[track-{i}] starting embedded cluster c-{i}-{j} (kwokctl, binary runtime)")

    threads = [threading.Thread(target=talk, args=(i,)) for i in range(n_threads)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    lines = capsys.readouterr().err.splitlines()
    shape = re.compile(
        r"^\[desched\] \[track-(\d)\] starting embedded cluster c-\1-\d+ \(kwokctl, binary runtime\)$"
    )
    bad = [line for line in lines if not shape.match(line)]
    assert not bad, bad[:3]
    assert len(lines) == n_threads * n_lines


class _Writes:
    """A stderr that records each write call (the unit a reader on the pipe may split at)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_line_is_one_write_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """print() writes the text and the newline apart; another thread's line lands in between."""
    stream = _Writes()
    monkeypatch.setattr(sys, "stderr", stream)
    log.say("[baseline] starting embedded cluster a")
    log.tagged("kind-node")("built")
    assert stream.calls == [
        "[desched] [baseline] starting embedded cluster a\n",
        "[kind-node] built\n",
    ]


def test_the_stream_is_looked_up_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    log.say("first")
    assert capsys.readouterr().err == "[desched] first\n"
    log.tagged("desched canary")("second, 100% done")
    assert capsys.readouterr().err == "[desched canary] second, 100% done\n"


def test_progress_is_not_printed_twice_by_root_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    extra = logging.StreamHandler()  # a user's basicConfig-like root handler on stderr
    root.addHandler(extra)
    try:
        log.say("once")
    finally:
        root.removeHandler(extra)
    assert capsys.readouterr().err.count("once") == 1


def test_the_pytest_reporter_writes_a_line_in_one_call() -> None:
    """Under pytest the session reports through the terminal writer: one call a line too."""
    from types import SimpleNamespace

    from pytest_desched.plugin.reporting import terminal_reporter

    writes: list[str] = []
    tw = SimpleNamespace(write=lambda text, **_: writes.append(text), line=None)
    config = SimpleNamespace(
        pluginmanager=SimpleNamespace(getplugin=lambda name: None),
        get_terminal_writer=lambda: tw,
    )
    report = terminal_reporter(config)  # type: ignore[arg-type]
    threads = [threading.Thread(target=report, args=(f"track {i} up",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(writes) == [f"[desched] track {i} up\n" for i in range(4)]
