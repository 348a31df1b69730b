"""An embedded cluster's own processes: find them, kill them all, and tell a dead one.

kwokctl starts each component (etcd, kube-apiserver, kwok, kube-controller-manager,
kube-scheduler) in a session of its own and records its pid in `<cluster>/pids/`; the
stand-in kubelet and round pods' descheduler processes name the cluster's folder on their
command line too. A deletion (cluster.delete_cluster), the owner's watchdog (watchdog.py)
and the liveness check every wait runs (kube.LIVENESS_CHECKS) all read them here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import psutil

from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.log import Reporter

# Clusters whose components a fault injector (faults.py) holds down on purpose: their
# liveness is not checked until it lets them go (a component it killed is no death).
HELD_DOWN: set[Path] = set()
LOG_LINES = 5
# The order a death report names dead components in: a cause before its effects (without
# etcd, kube-apiserver fails; without it, the controllers lose their leases and exit).
ORDER = ("etcd", "kube-apiserver", "kwok-controller", "kube-controller-manager", "kube-scheduler")


def reap(pids: list[int]) -> None:
    """waitpid those that are our children (or adopted: the owner is a subreaper)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has exited; only its parent's bookkeeping is left)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_exited(pids: list[int], name: str, report: Reporter, timeout: float = 10) -> None:
    """SIGKILL is delivered asynchronously: wait until every killed process has exited.

    Reaps those that are our children (or adopted: this process is a subreaper), so a
    cluster's deletion returns only when none of its processes runs any more; one that
    outlives the timeout is reported by pid, never silently left.
    """

    def still_running() -> list[int]:
        reap(pids)
        return [p for p in pids if running(p)]

    try:
        wait_for(
            f"the processes of cluster {name} to exit after SIGKILL",
            still_running,
            lambda left: not left,
            timeout=timeout,
            max_interval=0.05,
        )
    except WaitTimeout as exc:
        report(str(exc))


def component_pids(cdir: Path) -> dict[str, int]:
    """Component name -> the pid kwokctl recorded for it (`<cluster>/pids/<name>.pid`)."""
    out = {}
    for f in (cdir / "pids").glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            out[f.stem] = int(f.read_text().strip())
    return out


def _ours(proc: psutil.Process, cdir: Path, name: str | None) -> bool:
    """The process names the cluster's folder, or is a kwokctl working on cluster `name`
    (a killed owner's `kwokctl create` would go on starting components after a sweep)."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return False
    if any(str(cdir) in arg for arg in cmd):
        return True
    return bool(name and cmd and Path(cmd[0]).name == "kwokctl" and name in cmd[1:])


def processes_under(cdir: Path, name: str | None = None) -> list[int]:
    """Running (not zombie) processes of this cluster (see `_ours`), never this process."""
    return [
        p.pid
        for p in psutil.process_iter(["status"])
        if p.pid != os.getpid()
        and p.info["status"] != psutil.STATUS_ZOMBIE
        and _ours(p, cdir, name)
    ]


def kill_cluster_processes(
    cdir: Path, name: str, report: Reporter, pids: tuple[int, ...] = ()
) -> list[int]:
    """SIGKILL every process of the cluster until a scan finds none; the pids left.

    A pass can race with a spawn: the stand-in kubelet may start a round's descheduler
    between the scan and its own kill (and a live `kwokctl create` a component). So it
    scans again after each pass. A pid file's pid recycled by a stranger is not touched.
    `pids`: ones read before the pid files went (kwokctl delete removes them).
    """
    todo = [*pids, *component_pids(cdir).values()]
    for _ in range(5):
        todo = sorted({*todo, *processes_under(cdir, name)})
        killed = []
        for pid in todo:
            try:
                proc = psutil.Process(pid)
            except psutil.Error:
                continue
            if pid == os.getpid() or not _ours(proc, cdir, name):
                continue  # a recycled pid, not one of this cluster's processes
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
                killed.append(pid)
        # Only those killed: a pid file's pid recycled by another process is not waited on.
        wait_exited(killed, name, report)
        todo = []
        if not killed:
            break
    return processes_under(cdir, name)


def remove_cluster(
    root: Path, name: str, report: Reporter, pids: tuple[int, ...] = ()
) -> dict[str, Any]:
    """Kill the cluster's processes and remove its folder; the owner record goes last.

    Needs no kwokctl and no API server: what a dead owner's watchdog can always do. Returns
    `processes_left` and `dir_left`; while either is, the owner record stays, so a later
    run's reaper retries.
    """
    cdir = root / "clusters" / name
    left_pids = kill_cluster_processes(cdir, name, report, pids)
    if cdir.exists():
        shutil.rmtree(cdir, ignore_errors=True)
    left = {"processes_left": left_pids, "dir_left": cdir.exists()}
    if not left_pids and not left["dir_left"]:
        (root / "owners" / f"{name}.json").unlink(missing_ok=True)
    return left


def dead_components(cdir: Path) -> list[tuple[str, int]]:
    """(component, pid) of each recorded component that has exited.

    A component stopped on purpose has no pid file (kwokctl stop, faults.Faults.stop);
    one whose pid file stays while it is gone died. The pid file is read after the
    process check, so a restart that rewrote it meanwhile is not taken for a death.
    """
    dead = []
    for component, pid in component_pids(cdir).items():
        reap([pid])
        with contextlib.suppress(psutil.Error):
            if running(pid) and _ours(psutil.Process(pid), cdir, None):
                continue
        if component_pids(cdir).get(component) == pid:
            dead.append((component, pid))
    return dead


def log_tail(cdir: Path, component: str, lines: int = LOG_LINES) -> str:
    """The last lines of a component's log (`<cluster>/logs/<component>.log`)."""
    log = cdir / "logs" / f"{component}.log"
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"  (no log at {log})"
    return "\n".join(f"  {t[:300]}" for t in tail) or f"  ({log} is empty)"


def death_report(cdir: Path, name: str) -> str | None:
    """One error naming each dead component of cluster `name` with its log's last lines;
    None while every recorded component runs (or a fault holds them down)."""
    if cdir in HELD_DOWN:
        return None
    rank = {c: i for i, c in enumerate(ORDER)}
    dead = sorted(dead_components(cdir), key=lambda d: (rank.get(d[0], len(ORDER)), d[0]))
    if not dead:
        return None
    parts = [
        f"{component} (pid {pid}) exited; the last lines of its log:\n{log_tail(cdir, component)}"
        for component, pid in dead
    ]
    return (
        f"embedded cluster {name}: its control plane died: " + "\n".join(parts) + "\n"
        "The run cannot go on without it. Rerun; if it recurs, look for what killed it "
        "(memory limits: `dmesg`, the cgroup's memory.max) in the lines above"
    )
