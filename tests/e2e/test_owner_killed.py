"""SIGKILL a `desched` command (as a CI timeout does): its cluster goes with it, at once.

Before, kwokctl's components (etcd, kube-apiserver, kwok, the controllers) and the stand-in
kubelet ran on in sessions of their own until a later run's reaper found them. Now the
cluster's watchdog (providers/embedded/watchdog.py) sees the owner die and deletes it:
no process names the cluster, no cluster folder, owner record or `up/run-*` folder is left,
within WATCHDOG_BOUND_S, with no later run. The run's own temporary folders
($TMPDIR/desched-*, pointed at an empty folder) go too: its scratch keeper
(pytest_desched/scratch.py) removes those it was told of when the owner's pipe closes. `sigkill_to_clean_s` is recorded.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_desched.kube import wait_for
from tests.e2e.commands import (
    Cmd,
    cluster_processes,
    descendants,
    reap_orphans,
    round_running,
    up_dirs_of,
    wait_point,
)

# serial: the bounds here are wall-clock seconds, measured with no other test of the run
# beside them (tests/concurrency.py; other workers' clusters would stretch them)
pytestmark = [pytest.mark.desched_selftest, pytest.mark.serial]

WATCHDOG_BOUND_S = 10.0  # measured: see docs/reliability.md


def _components_up(c: Cmd) -> bool:
    """kwokctl has started kube-apiserver (etcd before it): the control plane runs."""
    return any(
        (c.cache / "clusters" / "clusters" / n / "pids" / "kube-apiserver.pid").is_file()
        for n in c.clusters()
    )


def _left(cmd: Cmd, name: str) -> list[str]:
    root = cmd.cache / "clusters"
    return [
        *(f"process {pid}: {line}" for pid, line in cluster_processes(name).items()),
        *[f"folder {p}" for p in [root / "clusters" / name] if p.exists()],
        *[f"owner record {p}" for p in [root / "owners" / f"{name}.json"] if p.exists()],
        *(f"up folder {d}" for d in up_dirs_of(cmd.cache, cmd.proc.pid)),
        *(f"temporary folder {cmd.tmp / p}" for p in cmd.scratch()),
    ]


def _sigkill_and_wait_clean(
    cmd: Cmd, record_property: Callable[[str, object], None], scratch: bool = True
) -> None:
    """`scratch`: the command has made its temporary folder by now (`up` keeps its own in the
    cache instead)."""
    [name] = cmd.clusters()
    assert cluster_processes(name), f"no process of {name} to begin with:\n{cmd.text()}"
    assert not scratch or cmd.scratch(), f"no temporary folder in {cmd.tmp} to begin with"
    orphans = descendants(
        cmd.proc.pid
    )  # this process's to reap if it is a subreaper (reap_orphans)
    t0 = time.monotonic()
    cmd.proc.send_signal(signal.SIGKILL)  # the process alone, as `timeout -s KILL` does
    cmd.wait(timeout=30)
    left = wait_for(
        f"everything of cluster {name} to go with its SIGKILLed owner",
        lambda: _left(cmd, name),
        lambda seen: not seen,
        timeout=WATCHDOG_BOUND_S,
        max_interval=0.05,
    )
    took = round(time.monotonic() - t0, 2)
    record_property("sigkill_to_clean_s", took)
    print(f"SIGKILL -> 0 processes, 0 folders of {name} in {took}s")
    assert not left
    reap_orphans(cmd.proc.pid, orphans, name)


def test_sigkill_at_bring_up(run_cmd, record_property) -> None:
    cmd = run_cmd("up")
    wait_point(cmd, "desched up's control plane", _components_up)
    _sigkill_and_wait_clean(cmd, record_property, scratch=False)


def test_sigkill_mid_round(run_cmd, tmp_path: Path, record_property) -> None:
    cmd = run_cmd("run", "positive", "--artifacts", str(tmp_path / "art"))
    wait_point(cmd, "desched run's round", round_running)
    _sigkill_and_wait_clean(cmd, record_property)


def test_sigkill_mid_replay(run_cmd, tmp_path: Path, record_property) -> None:
    from pytest_desched.replay.gen.incidents import label_move

    snap = label_move().snapshot.write(tmp_path / "incident.yaml")
    cmd = run_cmd("replay", str(snap), "--output-file", str(tmp_path / "ledger.md"))
    wait_point(cmd, "the replay's round", round_running)
    _sigkill_and_wait_clean(cmd, record_property)
