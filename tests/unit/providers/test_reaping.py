"""What an embedded cluster's deletion reaps of the processes its owner adopted (processes.py).

The owner is a child subreaper: only pids proven the cluster's are waited for, never a
subprocess.Popen's own child (Popen would then report exit 0 for it).
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

from pytest_desched.providers.embedded.processes import (
    COMPONENTS,
    adoptable,
    disposition,
    reap_recorded,
)

ME = -1  # stands for this process (the ids must not name a pid: xdist workers differ)
Z, R = psutil.STATUS_ZOMBIE, psutil.STATUS_RUNNING


def test_components_as_the_kernel_names_them() -> None:
    assert "kube-controller" in COMPONENTS  # kube-controller-manager, cut to 15 characters
    assert {"etcd", "kube-apiserver", "kwok-controller", "metrics-server"} <= COMPONENTS
    assert "python" not in COMPONENTS and "prometheus" not in COMPONENTS


@pytest.mark.parametrize(
    ("recorded", "comm", "ppid", "expected"),
    [
        (True, "etcd", ME, True),
        (False, "etcd", ME, False),  # no kwokctl pid file names it
        (True, "python", ME, False),  # the stand-in kubelet: a Popen's own child
        (True, "etcd", 1, False),  # another reaper's
    ],
)
def test_adoptable(recorded: bool, comm: str, ppid: int, expected: bool) -> None:
    assert adoptable(recorded, comm, os.getpid() if ppid == ME else ppid) is expected


@pytest.mark.parametrize(
    ("ctime", "ppid", "status", "dying", "expected"),
    [
        (100.0, ME, Z, set(), "reap"),
        (100.0, ME, R, set(), "wait"),  # SIGKILLed, not exited yet
        (100.0, 4242, Z, {4242}, "wait"),  # its killed parent hands it over when it exits
        (100.0, 1, Z, set(), "skip"),  # init's (the watchdog is no subreaper)
        (100.0, 4242, R, set(), "skip"),  # a living stranger's
        (250.0, ME, Z, set(), "skip"),  # the pid recycled: another process
    ],
)
def test_disposition(ctime: float, ppid: int, status: str, dying: set[int], expected: str) -> None:
    ppid = os.getpid() if ppid == ME else ppid
    assert disposition(100.0, ctime, ppid, status, dying) == expected


def _zombie() -> tuple[int, float]:
    """A child that is no Popen's (as an adopted component is not), exited, unreaped."""
    pid = os.posix_spawn("/bin/true", ["true"], {})
    proc = psutil.Process(pid)
    deadline = time.monotonic() + 10
    while proc.status() != Z:
        assert time.monotonic() < deadline, f"/bin/true (pid {pid}) still {proc.status()}"
        time.sleep(0.01)
    return pid, proc.create_time()


def test_reap_recorded_reaps_a_recorded_zombie_only() -> None:
    pid, ctime = _zombie()
    other, other_ctime = _zombie()
    try:
        assert reap_recorded({pid: ctime}, set()) == []
        assert not psutil.pid_exists(pid) or psutil.Process(pid).create_time() != ctime
        # Recorded with another create time (its pid recycled): not this cluster's, left.
        assert reap_recorded({other: other_ctime + 60}, set()) == []
        assert psutil.Process(other).status() == Z
    finally:
        os.waitpid(other, 0)
