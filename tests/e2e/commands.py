"""`desched` commands run as subprocesses of their own, watched while they run.

Shared by the signal matrix, the SIGKILL (owner killed), dead-control-plane and two-users
tests: each starts a command with this session's tool cache (nothing is rebuilt) and an empty
$TMPDIR of its own (`tests/commands.py`), reads its output line by line as it comes, waits on
an observable point, and checks afterwards that nothing of it is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from pytest_desched.kube import wait_for
from pytest_desched.providers.embedded.processes import reap_adopted
from pytest_desched.tools.toolchain import Toolchain
from tests.commands import DESCHED, child_env, start, stop

STARTING = re.compile(r"starting embedded cluster (\S+)")
CLEANING = "interrupted: cleaning up"
STILL_CLEANING = "still cleaning up"


@dataclass
class Cmd:
    """A running `desched` command, its output read line by line as it comes."""

    proc: subprocess.Popen[str]
    tmp: Path  # its $TMPDIR and working folder
    cache: Path
    err: list[str] = field(default_factory=list)
    out: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    def wait(self, timeout: float) -> int:
        """The exit code, once the process ended and its last lines were read."""
        rc = self.proc.wait(timeout=timeout)
        for t in self.readers:
            t.join(timeout=10)  # they end at the pipes' EOF
        return rc

    def text(self) -> str:
        return "\n".join([*self.out, "--- stderr", *self.err])[-5000:]

    def clusters(self) -> list[str]:
        return [m.group(1) for line in self.err if (m := STARTING.search(line))]

    def said(self, needle: str) -> int:
        return sum(needle in line for line in self.err)

    def scratch(self) -> list[str]:
        """What is in its $TMPDIR (a run's temporary folders: `desched-*`), as relative paths."""
        return sorted(str(p.relative_to(self.tmp)) for p in self.tmp.glob("desched-*"))


def start_cmd(cache: Path, tmp: Path, *argv: str) -> Cmd:
    # cwd: ./desched-artifacts/ (the CLI's default evidence folder) lands in its own folder.
    # The provider pinned: these commands are interrupted, killed and checked through an
    # embedded cluster's processes and folders; under `make e2e-kind` a Docker engine answers
    # and `auto` would choose kind (a command's own --provider still wins).
    env = child_env(tmp, cache, DESCHED_PROVIDER="embedded")
    proc = start([str(DESCHED), *argv], env, cwd=tmp.parent)
    cmd = Cmd(proc, tmp, cache)
    for stream, lines in ((proc.stdout, cmd.out), (proc.stderr, cmd.err)):
        t = threading.Thread(target=lambda s=stream, ls=lines: ls.extend(s), daemon=True)
        t.start()
        cmd.readers.append(t)
    return cmd


@pytest.fixture
def run_cmd(desched_toolchain: Toolchain, tmp_path: Path) -> Iterator[Callable[..., Cmd]]:
    """Start `desched ARGV`; each command gets an empty $TMPDIR (tmp_path/tmp-N) of its own,
    or the `tmp` given (two jobs of one CI runner share one)."""
    started: list[Cmd] = []

    def run(*argv: str, tmp: Path | None = None) -> Cmd:
        if tmp is None:
            tmp = tmp_path / f"tmp-{len(started)}"
        tmp.mkdir(exist_ok=True)
        cmd = start_cmd(desched_toolchain.cache_dir, tmp, *argv)
        started.append(cmd)
        return cmd

    yield run
    for cmd in started:  # a failed assertion must not leave a command running
        stop(cmd.proc, read=False)


def send(cmd: Cmd, sig: int) -> None:
    if sig == signal.SIGINT:
        os.killpg(cmd.proc.pid, sig)  # Ctrl-C: the terminal signals the foreground group
    else:
        cmd.proc.send_signal(sig)  # `timeout`, `kill`, a CI cancel: the process alone


def wait_point(cmd: Cmd, what: str, reached: Callable[[Cmd], object], timeout: float = 240):
    def seen() -> tuple[object, int | None]:
        return reached(cmd), cmd.proc.poll()

    got, rc = wait_for(
        what, seen, lambda s: bool(s[0]) or s[1] is not None, timeout=timeout, max_interval=0.02
    )
    assert got, f"the command ended (exit {rc}) before {what}:\n{cmd.text()}"
    return got


def interrupt(
    cmd: Cmd, sig: int, second: bool = False, record: Callable[[str, object], None] | None = None
) -> float:
    """Send `sig` (and, with `second`, the same again once cleanup says it runs); exit time."""
    t0 = time.monotonic()
    send(cmd, sig)
    if second:  # once the cleanup runs: after a signal it says so (inside a cleanup: "still")
        wait_point(cmd, "the cleanup to run", lambda c: c.said(CLEANING) or c.said(STILL_CLEANING))
        send(cmd, sig)
    try:
        cmd.proc.wait(timeout=180)
    finally:
        stop(cmd.proc, read=False)
    took = round(time.monotonic() - t0, 2)
    cmd.wait(timeout=30)
    if record is not None:
        record("signal_to_exit_s", took)
    print(f"signal {signal.Signals(sig).name} -> exit {cmd.proc.returncode} in {took}s")
    return took


def cluster_processes(name: str) -> dict[int, str]:
    out = {}
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        line = " ".join(p.info["cmdline"] or [])
        if name in line:
            out[p.pid] = line[:200]
    return out


def descendants(pid: int) -> dict[int, float]:
    """The processes below a command (pid -> create time), recorded while it runs: what
    this (subreaper) process adopts if the command is killed (`reap_orphans`)."""
    out = {}
    with contextlib.suppress(psutil.NoSuchProcess):
        for p in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                out[p.pid] = p.create_time()
    return out


def reap_orphans(pid: int, recorded: dict[int, float], name: str) -> None:
    """Reap what killed command `pid` (of cluster `name`) left to this process (components,
    kubelet, watchdog, recorded by `descendants`: none is a Popen of ours), as the owner of
    a deleted cluster does (processes.py), and check none is left a zombie here."""
    reap_adopted(recorded, {pid}, name, print)
    ours = []
    for p in psutil.Process(os.getpid()).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.pid in recorded and p.status() == psutil.STATUS_ZOMBIE:
                ours.append(f"{p.name()} (pid {p.pid})")
    assert not ours, f"zombies the killed command {pid} left to pid {os.getpid()}: {ours}"


def up_dirs_of(cache: Path, pid: int) -> list[Path]:
    found = []
    for d in (cache / "up").glob("run-*"):
        try:
            if json.loads((d / "owner.json").read_text()).get("pid") == pid:
                found.append(d)
        except (OSError, ValueError):
            continue
    return found


def assert_nothing_left(cmd: Cmd, kept: tuple[str, ...] = ()) -> None:
    names = cmd.clusters()
    for name in names:
        if name in kept:
            continue
        assert not cluster_processes(name), (
            f"processes of {name} left: {cluster_processes(name)}\n{cmd.text()}"
        )
        assert not (cmd.cache / "clusters" / "clusters" / name).exists(), cmd.text()
        assert not (cmd.cache / "clusters" / "owners" / f"{name}.json").exists(), cmd.text()
    if not kept:
        assert not up_dirs_of(cmd.cache, cmd.proc.pid), cmd.text()
        assert not cmd.scratch(), f"temporary folders left in {cmd.tmp}: {cmd.scratch()}"


def assert_says_verified(cmd: Cmd) -> None:
    assert cmd.proc.returncode == 130, cmd.text()
    last = cmd.err[-1] if cmd.err else ""
    assert last.startswith("[desched] interrupted; "), cmd.text()
    assert "NOT cleaned up" not in last, cmd.text()
    for name in cmd.clusters():
        assert f"embedded cluster {name} deleted (0 processes, folder removed)" in last, last


def round_running(c: Cmd) -> bool:
    """A round pod's work folder exists: the stand-in kubelet runs the descheduler."""
    return any(
        any((c.cache / "clusters" / "clusters" / n).glob("desched-pod-*")) for n in c.clusters()
    )
