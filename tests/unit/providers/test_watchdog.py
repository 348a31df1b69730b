"""The owner's watchdog and the liveness check, without a cluster.

A cluster here is a folder under `<root>/clusters/` with an owner record, and its
"components" are sleepers whose command line names the folder, as kwokctl's do. The owner
is a child process that starts the watchdog and is then SIGKILLed, as a CI timeout does.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import urllib3

from pytest_desched.errors import ControlPlaneDied, ProviderError
from pytest_desched.kube import (
    LIVENESS_CHECKS,
    api_failure,
    api_unavailable,
    check_liveness,
    wait_for,
)
from pytest_desched.providers.embedded.cluster import EmbeddedProvider
from pytest_desched.providers.embedded.owners import proc_start, write_record
from pytest_desched.providers.embedded.processes import HELD_DOWN, death_report, running
from pytest_desched.providers.embedded.watchdog import RELEASE, tear_down, watch
from pytest_desched.tools.toolchain import Toolchain
from tests.unit.processes import start_sleeper

NAME = "desched-main-1-abcd"


def cluster(root: Path, record: dict) -> Path:
    cdir = root / "clusters" / NAME
    (cdir / "pids").mkdir(parents=True)
    (cdir / "logs").mkdir()
    (root / "owners").mkdir(exist_ok=True)
    write_record(root / "owners" / f"{NAME}.json", record)
    return cdir


def component(cdir: Path, name: str) -> subprocess.Popen[bytes]:
    proc = start_sleeper(f"--data-dir={cdir}/{name}", start_new_session=True)
    (cdir / "pids" / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc


def gone(procs: list[subprocess.Popen[bytes]]) -> bool:
    return all(p.poll() is not None for p in procs)


# -- the pipe ---------------------------------------------------------------------------
def test_watch_tells_release_from_the_owners_death() -> None:
    header = json.dumps({"root": "/r", "name": NAME}).encode() + b"\n"
    assert watch(io.BytesIO(header + RELEASE)) == ({"root": "/r", "name": NAME}, True)
    assert watch(io.BytesIO(header)) == ({"root": "/r", "name": NAME}, False)
    assert watch(io.BytesIO(header + b"rel")) == ({"root": "/r", "name": NAME}, False)
    assert watch(io.BytesIO(b"not json\n")) == (None, False)  # nothing to act on


# -- what the owner's death leaves to it ------------------------------------------------
def test_tear_down_kills_the_cluster_and_removes_its_folders(tmp_path: Path) -> None:
    root = tmp_path / "clusters"
    cdir = cluster(root, {"pid": 1, "start": "0"})
    up = tmp_path / "up" / "run-x"
    up.mkdir(parents=True)
    (up / "cluster-name").write_text(NAME)
    other_up = tmp_path / "up" / "run-y"
    other_up.mkdir()
    (other_up / "cluster-name").write_text("another-cluster")
    procs = [component(cdir, "etcd"), component(cdir, "kube-apiserver")]
    stranger = start_sleeper("--not-this-cluster")
    try:
        said = tear_down(root, NAME)
        wait_for("the components to exit", lambda: gone(procs), bool, timeout=10)
        assert "deleted (0 processes, folder removed)" in said, said
        assert not cdir.exists() and not up.exists()
        assert not (root / "owners" / f"{NAME}.json").exists()
        assert other_up.is_dir() and stranger.poll() is None
    finally:
        for p in [*procs, stranger]:
            p.kill()
            p.wait()


def test_tear_down_leaves_a_kept_or_deleted_cluster(tmp_path: Path) -> None:
    root = tmp_path / "clusters"
    cdir = cluster(root, {"pid": 1, "start": "0", "keep": True})
    proc = component(cdir, "etcd")
    try:
        assert "kept" in tear_down(root, NAME)
        assert proc.poll() is None and cdir.is_dir()
        (root / "owners" / f"{NAME}.json").unlink()  # the owner deleted it: record goes last
        assert "nothing to do" in tear_down(root, NAME)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


OWNER = """
import sys, time
from pathlib import Path
from pytest_desched.providers.embedded.watchdog import Watchdog
dog = Watchdog(Path(sys.argv[1]), sys.argv[2])
if sys.argv[3] == "release":
    dog.release()
print(dog.proc.pid, flush=True)
time.sleep(60)
"""


def start_owner(root: Path, how: str) -> tuple[subprocess.Popen[str], int]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(root), NAME, how], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    dog = int(owner.stdout.readline())
    return owner, dog


@pytest.mark.parametrize("how", ["sigkill", "release"])
def test_sigkilled_owner_takes_its_cluster_with_it(tmp_path: Path, how: str) -> None:
    """SIGKILL the owner: its components and folder are gone within seconds, no later run
    needed. An owner that released its watchdog (it deleted or kept the cluster) leaves
    the cluster to itself: the watchdog ends and touches nothing."""
    root = tmp_path / "clusters"
    cdir = cluster(root, {"pid": 0, "start": None})
    procs = [component(cdir, "etcd"), component(cdir, "kwok-controller")]
    owner, dog = start_owner(root, how)
    record = root / "owners" / f"{NAME}.json"  # removed last, once nothing else is left
    write_record(
        root / "owners" / f"{NAME}.json", {"pid": owner.pid, "start": proc_start(owner.pid)}
    )
    try:
        if how == "release":
            wait_for("the released watchdog to end", lambda: not running(dog), bool, timeout=10)
            assert all(p.poll() is None for p in procs)
            assert cdir.is_dir()
            return
        t0 = time.monotonic()
        owner.send_signal(signal.SIGKILL)
        wait_for(
            "the cluster to go with its owner",
            lambda: gone(procs) and not cdir.exists() and not record.exists(),
            bool,
            timeout=10,
            max_interval=0.02,
        )
        print(f"owner SIGKILL -> 0 processes, folder removed in {time.monotonic() - t0:.2f}s")
        wait_for("the watchdog to end", lambda: not running(dog), bool, timeout=10)
        assert "deleted (0 processes, folder removed)" in (root / "watchdog.log").read_text()
    finally:
        for p in [owner, *procs]:
            p.kill()
            p.wait()


# -- liveness ---------------------------------------------------------------------------
def test_death_report_names_the_dead_component_and_its_log(tmp_path: Path) -> None:
    cdir = cluster(tmp_path, {"pid": 1})
    alive = component(cdir, "kube-apiserver")
    etcd = component(cdir, "etcd")
    (cdir / "logs" / "etcd.log").write_text("starting\nmmap failed: cannot allocate memory\n")
    try:
        assert death_report(cdir, NAME) is None
        etcd.kill()
        etcd.wait()
        said = death_report(cdir, NAME) or ""
        assert f"embedded cluster {NAME}" in said and f"etcd (pid {etcd.pid}) exited" in said
        assert "mmap failed: cannot allocate memory" in said
        assert "kube-apiserver" not in said
        HELD_DOWN.add(cdir)  # a fault injector stopped it on purpose
        assert death_report(cdir, NAME) is None
        HELD_DOWN.discard(cdir)
        (cdir / "pids" / "etcd.pid").unlink()  # stopped as `kwokctl stop` does
        assert death_report(cdir, NAME) is None
    finally:
        HELD_DOWN.discard(cdir)
        alive.kill()
        alive.wait()


def test_a_wait_ends_at_once_when_a_component_dies() -> None:
    """Before: a wait on a cluster whose etcd died ran its whole timeout, silently. A death
    once found is raised by every later check at once (not after the checks' interval),
    and it reads as an API failure: cleanups that give up on a dead server give up."""
    died = "embedded cluster x: its control plane died: etcd (pid 1) exited; the last lines"
    calls: list[int] = []
    LIVENESS_CHECKS["test-wait"] = lambda: calls.append(1) or f"{died} of its log:\n  oom"
    try:
        t0 = time.monotonic()
        with pytest.raises(ControlPlaneDied, match=r"etcd \(pid 1\) exited") as err:
            wait_for("something that never comes", lambda: False, bool, timeout=30)
        assert time.monotonic() - t0 < 2
        with pytest.raises(ControlPlaneDied):
            check_liveness()  # within the interval: no check ran, the death is known
        assert len(calls) == 1
        assert api_failure(err.value) == died.split("; the last")[0]
    finally:
        del LIVENESS_CHECKS["test-wait"]
    assert wait_for("it", lambda: 1, bool, timeout=1) == 1  # a stopped cluster's death: gone


def test_bring_up_names_a_component_that_died_at_start(tmp_path: Path) -> None:
    """etcd dies at start (out of memory): kwokctl would wait its whole `--wait` (60 s)
    silently; the bring-up ends within seconds naming etcd and its log's last line."""
    fake = tmp_path / "kwokctl"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "--version" ] && { echo "kwokctl version v0.8.0"; exit 0; }\n'
        f'd="$KWOK_WORKDIR/clusters/{NAME}"; mkdir -p "$d/pids" "$d/logs"\n'
        'echo "mmap failed: cannot allocate memory" > "$d/logs/etcd.log"\n'
        'true & echo $! > "$d/pids/etcd.pid"; wait\n'
        "exec sleep 60\n"
    )
    fake.chmod(0o755)
    tc = Toolchain(cache_dir=tmp_path / "cache", overrides={"kwokctl": fake}, use_path=False)
    provider = EmbeddedProvider(tc, root=tmp_path / "root", name=NAME, wait_timeout=60)
    provider.root.mkdir()
    t0 = time.monotonic()
    with pytest.raises(ProviderError) as err:
        provider._create(["create", "cluster", "--name", NAME])
    took = time.monotonic() - t0
    assert took < 10, took
    assert f"embedded cluster {NAME}: its control plane died: etcd (pid " in str(err.value)
    assert "mmap failed: cannot allocate memory" in str(err.value)


def test_a_failed_request_names_the_dead_component_not_only_the_timeout() -> None:
    """A request in flight when etcd died times out; the round's error names etcd (exit 3),
    not "request timed out" (a RoundError, exit 1)."""
    LIVENESS_CHECKS["test-request"] = lambda: "embedded cluster x: its control plane died: etcd"
    try:
        with (
            pytest.raises(ControlPlaneDied, match="control plane died: etcd"),
            api_unavailable(SimpleNamespace(), "waiting for round Job kube-system/x"),
        ):
            raise urllib3.exceptions.ReadTimeoutError(None, "/apis", "Read timed out.")  # type: ignore[arg-type]
    finally:
        del LIVENESS_CHECKS["test-request"]


def test_a_closed_pipe_of_a_live_owner_waits_for_its_end(tmp_path: Path) -> None:
    """An owner that dropped its provider unreleased closed the pipe while it lives: the
    cluster stays its (it may still use it) until it ends, zombie or gone."""
    root = tmp_path / "clusters"
    owner = start_sleeper("--owner")
    cdir = cluster(root, {"pid": owner.pid, "start": proc_start(owner.pid)})
    proc = component(cdir, "etcd")
    said: list[str] = []
    dog = threading.Thread(target=lambda: said.append(tear_down(root, NAME)), daemon=True)
    try:
        dog.start()
        dog.join(timeout=1.0)  # a window in which nothing may happen, not a wait for it
        assert dog.is_alive() and proc.poll() is None and cdir.is_dir()
        owner.kill()  # a zombie until reaped below: ended all the same
        dog.join(timeout=20)
        assert said and "deleted (0 processes, folder removed)" in said[0], said
        assert not cdir.exists()
    finally:
        for p in (owner, proc):
            p.kill()
            p.wait()
