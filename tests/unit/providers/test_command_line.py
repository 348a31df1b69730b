"""A component's command line read right after its start (processes.command_line)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_desched.providers.embedded import processes
from pytest_desched.providers.embedded.processes import command_line, dead_components


class _JustExeced:
    """A process caught between its exec and its arguments: an executable, no arguments yet
    (what /proc showed for most of 300 Popen starts on a loaded 2-core machine)."""

    def __init__(self, empty_reads: int, exe: str = "/usr/bin/etcd") -> None:
        self.reads = 0
        self.empty_reads = empty_reads
        self._exe = exe

    def cmdline(self) -> list[str]:
        self.reads += 1
        return [] if self.reads <= self.empty_reads else [self._exe, "--data-dir=/c/etcd"]

    def exe(self) -> str:
        return self._exe


def test_a_just_started_process_is_read_again_until_its_arguments_show() -> None:
    proc = _JustExeced(empty_reads=3)
    assert command_line(proc) == ["/usr/bin/etcd", "--data-dir=/c/etcd"]  # type: ignore[arg-type]
    assert proc.reads == 4


def test_a_kernel_thread_is_not_waited_for() -> None:
    proc = _JustExeced(empty_reads=10**6, exe="")  # kernel threads have no executable
    start = time.monotonic()
    assert command_line(proc) == []  # type: ignore[arg-type]
    assert proc.reads == 1 and time.monotonic() - start < 0.5


def test_arguments_that_never_show_end_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "EXEC_WINDOW", 0.2)
    assert command_line(_JustExeced(empty_reads=10**6)) == []  # type: ignore[arg-type]


def test_a_component_just_started_is_never_taken_for_dead(tmp_path: Path) -> None:
    """The check kwokctl's restart runs at once: 50 fresh starts, each one alive."""
    (tmp_path / "pids").mkdir()
    for _ in range(50):
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)])
        try:
            (tmp_path / "pids" / "etcd.pid").write_text(str(p.pid))
            assert dead_components(tmp_path) == []
        finally:
            p.kill()
            p.wait()
