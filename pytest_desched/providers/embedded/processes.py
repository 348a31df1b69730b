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
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.log import Reporter

# Clusters whose components a fault injector (faults.py) holds down on purpose: their
# liveness is not checked until it lets them go (a component it killed is no death).
HELD_DOWN: set[Path] = set()
LOG_LINES = 5
# The order a death report names dead components in: a cause before its effects (without
# etcd, kube-apiserver fails; without it, the controllers lose their leases and exit).
# What every death report says, and only a death report (port_collision.py tells them apart).
DIED = "its control plane died"
ORDER = ("etcd", "kube-apiserver", "kwok-controller", "kube-controller-manager", "kube-scheduler")
# How long a process just started may show no command line (`command_line`)
EXEC_WINDOW = 2.0


def reap(pids: list[int]) -> set[int]:
    """waitpid those that are our children (or adopted: the owner is a subreaper); the
    pids reaped.

    A zombie is not always reapable yet: the kernel holds back a thread-group leader that
    has exited until its last thread has too, while /proc already says Z. A killed Go
    component (kube-apiserver: hundreds of threads) shows that under load for a while.
    """
    done = set()
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                done.add(pid)
    return done


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has exited; only its parent's bookkeeping is left)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def unreaped(pids: list[int]) -> list[int]:
    """Reap what can be; the pids still running, or still this process's zombie (a leader
    whose threads are exiting: `reap`). What a wait for killed processes waits on: one
    that only checked `running` returned with such a zombie left for good."""
    reap(pids)
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE or proc.ppid() == os.getpid():
                left.append(pid)
    return left


def wait_exited(pids: list[int], name: str, report: Reporter, timeout: float = 10) -> None:
    """SIGKILL is delivered asynchronously: wait until every killed process has exited.

    Reaps those that are our children (or adopted: this process is a subreaper), so a
    cluster's deletion returns only when none of its processes runs any more; one that
    outlives the timeout is reported by pid, never silently left.
    """

    try:
        wait_for(
            f"the processes of cluster {name} to exit after SIGKILL",
            lambda: unreaped(pids),
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


def command_line(proc: psutil.Process) -> list[str]:
    """The process's command line; [] for a kernel thread or one that is gone.

    The kernel sets a new program's arguments only after it has closed the close-on-exec
    pipe its starter waits on: for a moment after a Popen (or kwokctl's start) returns, the
    process has its new executable and an empty command line (seen in most of 300 starts on
    a loaded 2-core machine). That moment is waited out; a kernel thread has no executable.
    """
    try:
        cmd = proc.cmdline()
        if cmd or not proc.exe():
            return cmd
        return Retrying(
            stop=stop_after_delay(EXEC_WINDOW),
            wait=wait_fixed(0.01),
            retry=retry_if_result(lambda c: not c),
            retry_error_callback=lambda _: [],
        )(proc.cmdline)
    except psutil.Error:
        return []


def _ours(proc: psutil.Process, cdir: Path, name: str | None) -> bool:
    """The process names the cluster's folder, or is a kwokctl working on cluster `name`
    (a killed owner's `kwokctl create` would go on starting components after a sweep)."""
    cmd = command_line(proc)
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
    What this process adopted of the cluster is reaped before it returns (`reap_adopted`).
    """
    recorded = {*pids, *component_pids(cdir).values()}
    adopted: dict[int, float] = {}  # pid -> create time, recorded while provably the cluster's
    dying: set[int] = set()
    todo = sorted(recorded)
    for _ in range(5):
        todo = sorted({*todo, *processes_under(cdir, name)})
        killed = []
        for pid in todo:
            try:
                proc = psutil.Process(pid)
                if adoptable(pid in recorded, proc.name(), proc.ppid()):
                    # Even with its command line gone (exiting, or a zombie already: what
                    # kwokctl delete stopped, or one that died before it)
                    adopted[pid] = proc.create_time()
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
            except psutil.Error:
                continue
            if pid == os.getpid() or not _ours(proc, cdir, name):
                continue  # a recycled pid, not one of this cluster's processes
            with contextlib.suppress(psutil.Error):
                if proc.ppid() != os.getpid() or pid in recorded:  # never a Popen's own child
                    adopted[pid] = proc.create_time()
                proc.send_signal(signal.SIGKILL)
                killed.append(pid)
        # Only those killed: a pid file's pid recycled by another process is not waited on.
        wait_exited(killed, name, report)
        dying.update(killed)
        todo = []
        if not killed:
            break
    reap_adopted(adopted, dying, name, report)
    return processes_under(cdir, name)


# The components kwokctl records a pid file for, as the kernel names them (15 characters).
COMPONENTS = frozenset(c[:15] for c in (*ORDER, "metrics-server"))


def adoptable(recorded: bool, comm: str, ppid: int) -> bool:
    """A component the deletion reaps even once its command line is gone (a zombie's is):
    kwokctl recorded it (its pid file), it is named as a component, and it is this
    process's child. Proof enough that no subprocess.Popen here owns it: none of them
    runs a component binary."""
    return recorded and comm in COMPONENTS and ppid == os.getpid()


def disposition(
    recorded_ctime: float, ctime: float, ppid: int, status: str, dying: set[int]
) -> str:
    """What to do with a process recorded as the cluster's (`reap_adopted`): `reap` (this
    process's zombie), `wait` (still exiting, or its parent is one of the killed: a subreaper
    gets it when that parent exits) or `skip` (its pid is another process's now, or another
    reaper has it: the watchdog is no subreaper, its cluster's orphans go to init)."""
    if abs(ctime - recorded_ctime) > 0.01:
        return "skip"
    if ppid == os.getpid():
        return "reap" if status == psutil.STATUS_ZOMBIE else "wait"
    return "wait" if ppid in dying else "skip"


def reap_recorded(adopted: dict[int, float], dying: set[int]) -> list[int]:
    """One pass of `reap_adopted`: reap those that are this process's zombies; the pids to
    wait for still."""
    left = []
    for pid, ctime in adopted.items():
        try:
            proc = psutil.Process(pid)
            what = disposition(ctime, proc.create_time(), proc.ppid(), proc.status(), dying)
        except psutil.Error:
            continue  # reaped already (by wait_exited, or its parent)
        if what == "wait" or (what == "reap" and not reap([pid])):
            left.append(pid)  # a zombie leader whose threads are still exiting too (`reap`)
    return left


def reap_adopted(
    adopted: dict[int, float], dying: set[int], name: str, report: Reporter, timeout: float = 5
) -> None:
    """Reap every process recorded as cluster `name`'s once it is this process's zombie.

    The owner is a child subreaper (cluster.become_subreaper): what outlives its parent
    (kwokctl's components, a killed kubelet's round pods) comes to it, and stays a zombie
    for the run's whole length unless reaped here. Only these pids: never waitpid(-1), which
    would take a subprocess.Popen's child from it (Popen then reports exit 0).
    """
    try:
        wait_for(
            f"the processes of cluster {name} to be reaped",
            lambda: reap_recorded(adopted, dying),
            lambda left: not left,
            timeout=timeout,
            max_interval=0.05,
        )
    except WaitTimeout as exc:
        report(str(exc))


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


def live_component(pid: int, cdir: Path) -> bool:
    """A recorded component's pid is alive and still the cluster's (not a recycled pid)."""
    try:
        return running(pid) and _ours(psutil.Process(pid), cdir, None)
    except psutil.Error:
        return False


def dead_components(cdir: Path) -> list[tuple[str, int]]:
    """(component, pid) of each recorded component that has exited.

    A component stopped on purpose has no pid file (kwokctl stop, faults.Faults.stop);
    one whose pid file stays while it is gone died. The pid file is read after the
    process check, so a restart that rewrote it meanwhile is not taken for a death.
    """
    dead = []
    for component, pid in component_pids(cdir).items():
        reap([pid])
        if live_component(pid, cdir):
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
        f"embedded cluster {name}: {DIED}: " + "\n".join(parts) + "\n"
        "The run cannot go on without it. Rerun; if it recurs, look for what killed it "
        "(memory limits: `dmesg`, the cgroup's memory.max) in the lines above"
    )
