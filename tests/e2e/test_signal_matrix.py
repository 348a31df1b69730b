"""SIGINT and SIGTERM at each moment of each `desched` command: nothing is left, and it says so.

Every point waits on something observable (a line on stderr, a folder appearing), sends the
signal the way it comes in real life (SIGINT to the whole process group, as a terminal's
Ctrl-C does; SIGTERM to the process alone, as `timeout` or a CI cancel does), then checks:
exit 130, no process naming the command's clusters, no cluster folder, owner record or
`up/run-*` folder (except a cluster `up` finished and kept), and the last line saying what
was verified. The time from the signal to the exit is recorded (`signal_to_exit_s`).

The commands run as subprocesses with this session's tool cache (nothing is rebuilt).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from pytest_desched.kube import wait_for
from pytest_desched.tools.toolchain import Toolchain

pytestmark = pytest.mark.desched_selftest

DESCHED = Path(sys.executable).with_name("desched")  # the venv's console script
# Issue 32: every command honours SIGTERM within 2 s (measured 0.02-0.9 s at load 5-9 on the
# 2-core VM). The one exception is a signal during the normal end-of-run cleanup: it is held
# back until that cleanup (the release's uninstall in the runbook's order, the report) ends.
SIGNAL_TO_EXIT_BOUND_S = 2.0
HELD_BACK_BOUND_S = 10.0  # measured 0.9-4.1 s at load 5-9
STARTING = re.compile(r"starting embedded cluster (\S+)")
CLEANING = "interrupted: cleaning up"
STILL_CLEANING = "still cleaning up"


@dataclass
class Cmd:
    """A running `desched` command, its output read line by line as it comes."""

    proc: subprocess.Popen[str]
    tmp: Path
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


def _start(cache: Path, tmp: Path, *argv: str) -> Cmd:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESCHED_")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("KUBECONFIG", None)
    env.update(DESCHED_CACHE_DIR=str(cache), TMPDIR=str(tmp))
    proc = subprocess.Popen(
        [str(DESCHED), *argv],
        env=env,
        cwd=tmp,  # ./desched-artifacts/ (the CLI's default evidence folder) lands here
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    cmd = Cmd(proc, tmp, cache)
    for stream, lines in ((proc.stdout, cmd.out), (proc.stderr, cmd.err)):
        t = threading.Thread(target=lambda s=stream, ls=lines: ls.extend(s), daemon=True)
        t.start()
        cmd.readers.append(t)
    return cmd


def _send(cmd: Cmd, sig: int) -> None:
    if sig == signal.SIGINT:
        os.killpg(cmd.proc.pid, sig)  # Ctrl-C: the terminal signals the foreground group
    else:
        cmd.proc.send_signal(sig)  # `timeout`, `kill`, a CI cancel: the process alone


def _wait_point(cmd: Cmd, what: str, reached: Callable[[Cmd], object], timeout: float = 240):
    def seen() -> tuple[object, int | None]:
        return reached(cmd), cmd.proc.poll()

    got, rc = wait_for(
        what, seen, lambda s: bool(s[0]) or s[1] is not None, timeout=timeout, max_interval=0.02
    )
    assert got, f"the command ended (exit {rc}) before {what}:\n{cmd.text()}"
    return got


def _interrupt(
    cmd: Cmd, sig: int, second: bool = False, record: Callable[[str, object], None] | None = None
) -> float:
    """Send `sig` (and, with `second`, the same again once cleanup says it runs); exit time."""
    t0 = time.monotonic()
    _send(cmd, sig)
    if second:  # once the cleanup runs: after a signal it says so (inside a cleanup: "still")
        _wait_point(cmd, "the cleanup to run", lambda c: c.said(CLEANING) or c.said(STILL_CLEANING))
        _send(cmd, sig)
    try:
        cmd.proc.wait(timeout=180)
    finally:
        if cmd.proc.poll() is None:
            os.killpg(cmd.proc.pid, signal.SIGKILL)
    took = round(time.monotonic() - t0, 2)
    cmd.wait(timeout=30)
    if record is not None:
        record("signal_to_exit_s", took)
    print(f"signal {signal.Signals(sig).name} -> exit {cmd.proc.returncode} in {took}s")
    return took


def _cluster_processes(name: str) -> dict[int, str]:
    out = {}
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        line = " ".join(p.info["cmdline"] or [])
        if name in line:
            out[p.pid] = line[:200]
    return out


def _up_dirs_of(cache: Path, pid: int) -> list[Path]:
    found = []
    for d in (cache / "up").glob("run-*"):
        try:
            if json.loads((d / "owner.json").read_text()).get("pid") == pid:
                found.append(d)
        except (OSError, ValueError):
            continue
    return found


def _assert_nothing_left(cmd: Cmd, kept: tuple[str, ...] = ()) -> None:
    names = cmd.clusters()
    for name in names:
        if name in kept:
            continue
        assert not _cluster_processes(name), (
            f"processes of {name} left: {_cluster_processes(name)}\n{cmd.text()}"
        )
        assert not (cmd.cache / "clusters" / "clusters" / name).exists(), cmd.text()
        assert not (cmd.cache / "clusters" / "owners" / f"{name}.json").exists(), cmd.text()
    if not kept:
        assert not _up_dirs_of(cmd.cache, cmd.proc.pid), cmd.text()


def _assert_says_verified(cmd: Cmd) -> None:
    assert cmd.proc.returncode == 130, cmd.text()
    last = cmd.err[-1] if cmd.err else ""
    assert last.startswith("[desched] interrupted; "), cmd.text()
    assert "NOT cleaned up" not in last, cmd.text()
    for name in cmd.clusters():
        assert f"embedded cluster {name} deleted (0 processes, folder removed)" in last, last


@pytest.fixture
def run_cmd(desched_toolchain: Toolchain, tmp_path: Path) -> Callable[..., Cmd]:
    started: list[Cmd] = []

    def start(*argv: str) -> Cmd:
        (tmp_path / "tmp").mkdir(exist_ok=True)
        cmd = _start(desched_toolchain.cache_dir, tmp_path / "tmp", *argv)
        started.append(cmd)
        return cmd

    yield start
    for cmd in started:  # a failed assertion must not leave a command running
        if cmd.proc.poll() is None:
            os.killpg(cmd.proc.pid, signal.SIGKILL)
            cmd.proc.wait()


def _line(needle: str) -> Callable[[Cmd], bool]:
    return lambda c: c.said(needle) > 0


def _round_running(c: Cmd) -> bool:
    """A round pod's work folder exists: the stand-in kubelet runs the descheduler."""
    return any(
        any((c.cache / "clusters" / "clusters" / n).glob("desched-pod-*")) for n in c.clusters()
    )


def _teardown_started(c: Cmd) -> bool:
    """close() says `cleaning up <cluster>` inside its shield, before anything is removed.

    (The HTML report is no such point: it is drawn beside the teardown and may be written
    last, after which the run exits 0 before a second signal.)
    """
    return any(line.startswith("[desched] cleaning up ") for line in c.err)


SIGS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}

# (command point, signal): each point with both signals where it is cheap (bring-up), one
# signal each where a point costs a whole cluster; the two kinds alternate across points.
UP_POINTS = {
    "bring-up": _line("starting embedded cluster"),
    "install": _line("chart render checked"),
}


@pytest.mark.parametrize(
    "point,sig",
    [
        ("bring-up", "SIGINT"),
        ("bring-up", "SIGTERM"),
        ("install", "SIGTERM"),
        ("install", "SIGINT"),
    ],
)
def test_up_interrupted_leaves_nothing(run_cmd, record_property, point: str, sig: str) -> None:
    cmd = run_cmd("up")
    _wait_point(cmd, f"desched up's {point}", UP_POINTS[point])
    took = _interrupt(cmd, SIGS[sig], record=record_property)
    _assert_says_verified(cmd)
    _assert_nothing_left(cmd)
    assert "kept embedded cluster" not in cmd.text()
    assert not cmd.out, "no export line for a cluster that is not there"
    assert took < SIGNAL_TO_EXIT_BOUND_S


def test_up_keeps_only_a_finished_cluster_and_down_removes_all_of_it(
    run_cmd, desched_toolchain: Toolchain
) -> None:
    cmd = run_cmd("up")
    cmd.wait(timeout=240)
    assert cmd.proc.returncode == 0, cmd.text()
    [name] = cmd.clusters()
    owner = desched_toolchain.cache_dir / "clusters" / "owners" / f"{name}.json"
    assert json.loads(owner.read_text())["keep"] is True
    assert _cluster_processes(name)
    [up_dir] = _up_dirs_of(desched_toolchain.cache_dir, cmd.proc.pid)
    down = run_cmd("down", name)
    down.wait(timeout=120)
    assert down.proc.returncode == 0, down.text()
    assert f"deleted embedded cluster {name} (0 processes, folder removed)" in down.text()
    assert not up_dir.exists()
    _assert_nothing_left(cmd)


RUN_POINTS = {
    "bring-up": _line("starting embedded cluster"),
    "install": _line("chart render checked"),
    "round": _round_running,
    "teardown": _teardown_started,
}


@pytest.mark.parametrize(
    "point,sig,second",
    [
        ("bring-up", "SIGTERM", False),
        ("install", "SIGINT", False),
        ("round", "SIGTERM", False),
        ("round", "SIGINT", True),  # Ctrl-C, then Ctrl-C again while it cleans up
        ("teardown", "SIGINT", True),  # the run ended; Ctrl-C twice during its own cleanup
    ],
)
def test_run_interrupted_leaves_nothing(
    run_cmd, tmp_path: Path, record_property, point: str, sig: str, second: bool
) -> None:
    cmd = run_cmd("run", "positive", "--artifacts", str(tmp_path / "art"))
    _wait_point(cmd, f"desched run's {point}", RUN_POINTS[point])
    took = _interrupt(cmd, SIGS[sig], second=second, record=record_property)
    _assert_says_verified(cmd)
    _assert_nothing_left(cmd)
    if second:  # at teardown the first signal too came during the (normal) cleanup
        assert cmd.said(STILL_CLEANING) == (2 if point == "teardown" else 1), cmd.text()
    assert took < (HELD_BACK_BOUND_S if point == "teardown" else SIGNAL_TO_EXIT_BOUND_S)


def test_canary_interrupted_stops_both_tracks(run_cmd, record_property) -> None:
    """SIGINT while both tracks install: the candidate's worker thread stops too, at once."""
    cmd = run_cmd(
        "canary", "--candidate", "version:v0.36.0", "--experiment", "positive", "--no-static"
    )
    _wait_point(
        cmd,
        "both tracks' installs",
        lambda c: c.said("[baseline] chart render checked") and c.said("[candidate] chart render"),
    )
    took = _interrupt(cmd, signal.SIGINT, record=record_property)
    assert len(cmd.clusters()) == 2, cmd.text()
    _assert_says_verified(cmd)
    _assert_nothing_left(cmd)
    assert took < SIGNAL_TO_EXIT_BOUND_S


def test_replay_interrupted_mid_round(run_cmd, tmp_path: Path, record_property) -> None:
    from pytest_desched.replay.incidents import label_move

    snap = label_move().snapshot.write(tmp_path / "incident.yaml")
    cmd = run_cmd("replay", str(snap), "--output-file", str(tmp_path / "ledger.md"))
    _wait_point(cmd, "the replay's round", _round_running)
    took = _interrupt(cmd, signal.SIGTERM, record=record_property)
    _assert_says_verified(cmd)
    _assert_nothing_left(cmd)
    assert not (tmp_path / "ledger.md").exists()
    assert took < SIGNAL_TO_EXIT_BOUND_S


def test_snapshot_interrupted_leaves_no_copy_of_the_kubeconfig(
    run_cmd, desched_cluster, tmp_path: Path, record_property
) -> None:
    """SIGINT while kwokctl exports: its temp folder (a kubeconfig copy) and -o are gone."""
    import yaml

    ctx = yaml.safe_load(desched_cluster.kubeconfig.read_text())["current-context"]
    out = tmp_path / "snap.yaml"
    cmd = run_cmd(
        "snapshot",
        "--context",
        ctx,
        "--kubeconfig",
        str(desched_cluster.kubeconfig),
        "--exporter",
        "kwokctl",
        "--output-file",
        str(out),
    )
    _wait_point(cmd, "kwokctl's export folder", lambda c: any(c.tmp.glob("desched-snapshot-*")))
    took = _interrupt(cmd, signal.SIGINT, record=record_property)
    assert cmd.proc.returncode == 130, cmd.text()
    assert cmd.err[-1].startswith("[desched] interrupted; "), cmd.text()
    assert not any(cmd.tmp.glob("desched-snapshot-*")), cmd.text()
    assert not out.exists(), "a half-written snapshot"
    assert took < SIGNAL_TO_EXIT_BOUND_S
