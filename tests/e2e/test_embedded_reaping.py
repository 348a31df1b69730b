"""Deleting an embedded cluster leaves no zombie child of the process that owned it.

The owner is a child subreaper (cluster.become_subreaper): kwokctl's daemonized components,
and whatever else outlives its parent under it, are adopted by the pytest process. Before
the deletion reaped every adopted process it could prove was the cluster's, a long run
gathered them: 79 zombies (etcd, kube-apiserver, controllers, kwok, metrics-server,
`python`) in one pytest process after ~30 clusters.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psutil
import pytest

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.providers.embedded.cluster import EmbeddedProvider, unique_name
from pytest_desched.providers.embedded.processes import COMPONENTS, component_pids
from pytest_desched.tools.toolchain import Toolchain

pytestmark = pytest.mark.desched_selftest


def _children() -> dict[tuple[int, float], str]:
    """This process's children: (pid, create time) -> "name status"."""
    out = {}
    for child in psutil.Process(os.getpid()).children():
        with contextlib.suppress(psutil.NoSuchProcess):  # reaped meanwhile
            out[(child.pid, child.create_time())] = f"{child.name()} {child.status()}"
    return out


def _new_children(old: dict[tuple[int, float], str]) -> dict[tuple[int, float], str]:
    """Children that were not there at the test's start (an earlier test's are not ours;
    psutil's create times are compared with each other, never with the wall clock)."""
    return {k: v for k, v in _children().items() if k not in old}


def _kill_dead(cdir: Path, component: str) -> int:
    """SIGKILL the cluster's `component` (its kwokctl pid file) and wait until it is a zombie."""
    pid = component_pids(cdir)[component]
    proc = psutil.Process(pid)
    proc.kill()
    # psutil's wait, not kube.wait_for: that runs the cluster's liveness check, whose
    # death report reaps the dead component (processes.dead_components), as a run's next
    # wait would; here the deletion must do it.
    deadline = time.monotonic() + 10
    while (status := proc.status()) != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, (
            f"{component} (pid {pid}) still {status} 10 s after SIGKILL"
        )
        time.sleep(0.02)
    return pid


@pytest.mark.parametrize("died", ["", "etcd"], ids=["deleted", "component-died-first"])
def test_deleted_embedded_cluster_leaves_no_zombie_child(
    desched_toolchain: Toolchain, tmp_path: Path, died: str
) -> None:
    """Both a plain deletion and one after a component died (as a fault or the OOM killer
    leaves it: a zombie adopted by this process, that kwokctl delete no longer sees)."""
    old = _children()
    provider = EmbeddedProvider(
        desched_toolchain,
        name=unique_name("reap"),
        workers=2,
        kubeconfig_dir=tmp_path,
        metrics_sources=(KUBERNETES_METRICS,),
    )
    try:
        cluster = provider.start()
        cdir = provider.cluster_dir
        assert cluster.core.list_node().items, f"no node in {cluster.name}"
        if died:
            _kill_dead(cdir, died)
        before = _new_children(old)
    finally:
        provider.stop()
    assert provider.teardown is not None and not provider.teardown["left"], provider.teardown
    assert not cdir.exists(), f"{cdir} left"
    # Its components (adopted: kwokctl exited), the stand-in kubelet and the watchdog were
    # children of this process: each must be reaped when stop() returns, not left to a
    # later Popen's cleanup or this process's exit (a `desched` command exits right after,
    # and a subreaper above it inherits what is left).
    named = " ".join(before.values())
    assert "etcd" in named and "metrics-server" in named and "python" in named, before
    now = _new_children(old)
    left = {f"{desc} (pid {pid})" for (pid, ctime), desc in now.items() if (pid, ctime) in before}
    # New since: a component kwokctl started during the deletion. Only components: another
    # thread's Popen child may be a zombie for a moment before its Popen waits for it.
    zombies = {
        f"{desc} (pid {pid})"
        for (pid, _), desc in now.items()
        if desc.endswith(" zombie") and desc.split()[0] in COMPONENTS
    }
    assert not (left | zombies), (
        f"deleting embedded cluster {cluster.name} left children of pid {os.getpid()}: "
        f"{sorted(left | zombies)}"
    )
