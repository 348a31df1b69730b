"""What an embedded cluster's deletion reaps of the processes its owner adopted (processes.py).

The owner is a child subreaper: only pids proven the cluster's are waited for, never a
subprocess.Popen's own child (Popen would then report exit 0 for it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

import psutil
import pytest

from pytest_desched.providers.embedded.processes import (
    COMPONENTS,
    adoptable,
    disposition,
    reap_adopted,
    reap_recorded,
    unreaped,
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


# The leader thread exits alone (the exit syscall, not exit_group) while another thread lives
# on until the parent writes to its stdin: what a killed many-threaded Go component
# (kube-apiserver) looks like for a while under load.
_LEADER_FIRST = """
import ctypes, os, sys, threading
def last():
    sys.stdin.buffer.read(1)
    os._exit(0)
threading.Thread(target=last).start()
ctypes.CDLL(None).syscall({nr}, 0)
"""
SYS_EXIT = {"x86_64": 60, "aarch64": 93}


@pytest.mark.skipif(os.uname().machine not in SYS_EXIT, reason="the exit syscall's number")
def test_a_zombie_leader_is_waited_for_until_it_can_be_reaped() -> None:
    """/proc says Z as soon as the leader has exited, but the kernel holds it back from
    waitpid until its last thread is gone: a reaper that took Z for "reaped" left the
    zombie for good (the CI failure: `kube-apiserver zombie` after a deletion)."""
    read, write = os.pipe()
    code = _LEADER_FIRST.format(nr=SYS_EXIT[os.uname().machine])
    pid = os.posix_spawn(
        sys.executable,
        [sys.executable, "-c", code],
        os.environ,
        file_actions=[(os.POSIX_SPAWN_DUP2, read, 0)],
    )
    os.close(read)
    proc = psutil.Process(pid)
    try:
        deadline = time.monotonic() + 10
        while proc.status() != Z:
            assert time.monotonic() < deadline, f"leader (pid {pid}) still {proc.status()}"
            time.sleep(0.01)
        ctime = proc.create_time()
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # Z, and not reapable yet
        assert reap_recorded({pid: ctime}, set()) == [pid]  # still to wait for
        assert unreaped([pid]) == [pid]
        threading.Timer(0.3, os.write, (write, b"x")).start()  # its last thread exits
        reap_adopted({pid: ctime}, set(), "c", pytest.fail, timeout=10)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).create_time() != ctime
    finally:
        os.close(write)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
