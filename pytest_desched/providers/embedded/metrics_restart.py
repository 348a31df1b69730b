"""metrics-server's start-up race on a loaded machine, handled the way a kubelet would.

metrics-server v0.8.0 reads the `extension-apiserver-authentication` ConfigMap once at start
and panics when that read fails (cmd/metrics-server/metrics-server.go:37, "unable to load
configmap based request-header-client-ca-file"). kwokctl's binary runtime starts it right
after kube-apiserver, and under load (a load average near 50 was seen) the API server's TLS
handshake takes longer than the client's 10 s: metrics-server exits before the cluster is up,
and the bring-up failed as "its control plane died". In a real cluster its Deployment's
kubelet restarts it. Here, while the cluster is created, a metrics-server that died of exactly
this is spared (`spared`), and once kwokctl is done it is started again (`restart`) as
`kwokctl start cluster` starts any stopped component (faults.py does the same); any other
death is still one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from pytest_desched.errors import ProviderError
from pytest_desched.kube import wait_for
from pytest_desched.providers.embedded.metrics_server import METRICS_SERVER
from pytest_desched.providers.embedded.processes import (
    component_pids,
    dead_components,
    log_tail,
)

START_RACE = "unable to load configmap based request-header-client-ca-file"
ATTEMPTS = 3


def start_race(cdir: Path) -> bool:
    """metrics-server is dead of the start-up race, and nothing else is dead."""
    dead = dead_components(cdir)
    return [c for c, _ in dead] == [METRICS_SERVER] and START_RACE in log_tail(cdir, METRICS_SERVER)


def restart(
    cdir: Path, name: str, kwokctl: Callable[..., Any], report: Callable[[str], None]
) -> int:
    """Start a metrics-server that lost the start-up race again (up to ATTEMPTS times);
    returns the restarts made. ProviderError when it keeps dying."""
    made = 0
    while start_race(cdir):
        if made == ATTEMPTS:
            raise ProviderError(
                f"embedded cluster {name}: metrics-server died at start {made + 1} times, "
                f"each of the start-up race:\n{log_tail(cdir, METRICS_SERVER)}"
            )
        made += 1
        report(f"metrics-server lost its start-up race with a loaded API server; restart {made}")
        # Reaped before its pid file goes: kwokctl has exited, so the dead one is this
        # (subreaper) process's zombie, and the deletion would no longer know its pid.
        for pid in [pid for c, pid in component_pids(cdir).items() if c == METRICS_SERVER]:
            # psutil's wait reaps a child, and only once it can be (processes.reap)
            try:
                proc = psutil.Process(pid)
                # only our own dead child (a pid file's pid recycled, or a live one, is not)
                if proc.ppid() == os.getpid() and proc.status() == psutil.STATUS_ZOMBIE:
                    proc.wait(timeout=10)
            except psutil.NoSuchProcess:
                pass
            except psutil.TimeoutExpired as exc:
                raise ProviderError(
                    f"embedded cluster {name}: the dead metrics-server (pid {pid}) was not "
                    "reapable 10 s after it died; delete the cluster and start it again"
                ) from exc
        (cdir / "pids" / f"{METRICS_SERVER}.pid").unlink(missing_ok=True)
        kwokctl("start", "cluster", "--name", name, "--timeout", "60s", timeout=120)
        wait_for(
            "the restarted metrics-server to run (or die again)",
            lambda: (METRICS_SERVER in component_pids(cdir), start_race(cdir)),
            lambda s: s[0] or s[1],
            timeout=30,
            max_interval=0.25,
        )
    return made
