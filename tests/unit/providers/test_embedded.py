"""The embedded provider's pure parts: names, node manifests, owner records, reaping.

`kwokctl` is a fake script given to a real Toolchain as an override; it answers the version
probe and records every other call, so no cluster is created or deleted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pytest_desched.providers.base import ProviderError
from pytest_desched.providers.embedded.cluster import (
    KWOK_NODE_ANNOTATION,
    EmbeddedProvider,
    NodeSpec,
    node_manifest,
    reap_stale,
    unique_name,
)
from pytest_desched.providers.embedded.owners import (
    UNREADABLE_GRACE_S,
    owner_alive,
    read_record,
    stale_up_dirs,
    write_record,
    write_up_owner,
)
from pytest_desched.providers.embedded.owners import proc_start as _proc_start
from pytest_desched.tools.toolchain import Toolchain
from tests.unit.processes import start_sleeper


# -- unique_name -------------------------------------------------------------------------
def test_unique_name_differs_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    names = {unique_name() for _ in range(20)}
    assert len(names) == 20
    for n in names:
        assert re.fullmatch(rf"desched-main-{os.getpid()}-[0-9a-f]{{4}}", n), n


def test_unique_name_includes_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    a, b = unique_name("desched-kind"), unique_name("desched-kind")
    assert a.startswith(f"desched-kind-gw3-{os.getpid()}-")
    assert a != b
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw4")
    assert "-gw4-" in unique_name()


# -- node_manifest -------------------------------------------------------------------------
def test_node_manifest_default_spec() -> None:
    m = node_manifest("ab12-worker-1", "zone-a", NodeSpec())
    assert m["kind"] == "Node" and m["apiVersion"] == "v1"
    assert m["metadata"]["name"] == "ab12-worker-1"
    assert m["status"]["allocatable"] == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert m["status"]["capacity"] == m["status"]["allocatable"]
    labels = m["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "ab12-worker-1"
    assert labels["topology.kubernetes.io/zone"] == "zone-a"
    assert labels["kubernetes.io/os"] == "linux"
    assert m["metadata"]["annotations"][KWOK_NODE_ANNOTATION] == "fake"


def test_node_manifest_custom_spec() -> None:
    m = node_manifest("n", "zone-c", NodeSpec(cpu="2", memory="8Gi", pods="30"))
    assert m["status"]["allocatable"] == {"cpu": "2", "memory": "8Gi", "pods": "30"}


# -- owner_alive -------------------------------------------------------------------------
@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen(["/bin/sh", "-c", "exit 0"])
    proc.wait()
    return proc.pid


def test_owner_alive_for_own_process() -> None:
    assert owner_alive({"pid": os.getpid(), "start": _proc_start(os.getpid())})


def test_owner_dead_pid(dead_pid: int) -> None:
    assert _proc_start(dead_pid) is None
    assert not owner_alive({"pid": dead_pid, "start": "12345"})


def test_owner_recycled_pid_is_not_alive() -> None:
    start = _proc_start(os.getpid())
    assert start is not None
    assert not owner_alive({"pid": os.getpid(), "start": str(int(start) + 1)})
    assert not owner_alive({"pid": os.getpid()})  # a record without start time


def test_owner_missing_pid_is_not_alive() -> None:
    assert not owner_alive({})
    assert not owner_alive({"pid": 0, "start": None})


# -- reap_stale -------------------------------------------------------------------------
@pytest.fixture
def kwokctl(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "kwokctl-calls.txt"
    fake = tmp_path / "fakebin" / "kwokctl"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "kwokctl version v0.8.0 go1.26.8 (linux/amd64)"; '
        "exit 0; fi\n"
        f'echo "KWOK_WORKDIR=$KWOK_WORKDIR KUBECONFIG=${{KUBECONFIG:-unset}} $*" >> {log}\n'
    )
    fake.chmod(0o755)
    return fake, log


@pytest.fixture
def toolchain(tmp_path: Path, kwokctl: tuple[Path, Path]) -> Toolchain:
    return Toolchain(
        cache_dir=tmp_path / "cache", overrides={"kwokctl": kwokctl[0]}, use_path=False
    )


def owner(root: Path, name: str, record: dict | str) -> Path:
    (root / "owners").mkdir(parents=True, exist_ok=True)
    (root / "clusters" / name).mkdir(parents=True, exist_ok=True)
    (root / "clusters" / name / "kubeconfig.yaml").write_text("apiVersion: v1\n")
    p = root / "owners" / f"{name}.json"
    p.write_text(record if isinstance(record, str) else json.dumps(record))
    return p


def test_reap_stale_deletes_only_dead_unkept_owners(
    tmp_path: Path,
    toolchain: Toolchain,
    kwokctl: tuple[Path, Path],
    dead_pid: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/should/not/leak")
    root = tmp_path / "root"
    me = {"pid": os.getpid(), "start": _proc_start(os.getpid())}
    owner(root, "alive", me)
    owner(root, "dead", {"pid": dead_pid, "start": "1"})
    owner(root, "kept", {"pid": dead_pid, "start": "1", "keep": True})
    owner(root, "recycled", {"pid": os.getpid(), "start": "0"})
    old = time.time() - UNREADABLE_GRACE_S - 1
    os.utime(owner(root, "corrupt", "{not json"), (old, old))  # a killed run's, long ago
    reports: list[str] = []

    reaped = reap_stale(toolchain, root, reports.append)

    assert sorted(reaped) == ["corrupt", "dead", "recycled"]
    calls = kwokctl[1].read_text().splitlines()
    assert sorted(calls) == sorted(
        f"KWOK_WORKDIR={root} KUBECONFIG=/dev/null delete cluster --name {n} --kubeconfig /dev/null"
        for n in ("corrupt", "dead", "recycled")
    )
    for n in ("corrupt", "dead", "recycled"):
        assert not (root / "clusters" / n).exists()
        assert not (root / "owners" / f"{n}.json").exists()
    for n in ("alive", "kept"):
        assert (root / "clusters" / n / "kubeconfig.yaml").is_file()
        assert (root / "owners" / f"{n}.json").is_file()
    assert any("dead" in r and str(dead_pid) in r for r in reports)


def test_reap_stale_kills_leftover_components_but_not_recycled_pids(
    tmp_path: Path, toolchain: Toolchain, dead_pid: int
) -> None:
    root = tmp_path / "root"
    owner(root, "dead", {"pid": dead_pid, "start": "1"})
    cdir = root / "clusters" / "dead"
    # a component of that cluster (its cluster dir on the command line) and a stranger
    # whose pid was recycled into the cluster's pid files
    component = start_sleeper(f"--config={cdir}/etcd.yaml")
    stranger = start_sleeper("--stranger")
    try:
        pids = cdir / "pids"
        pids.mkdir()
        (pids / "etcd.pid").write_text(f"{component.pid}\n")
        (pids / "kube-apiserver.pid").write_text(f"{stranger.pid}\n")
        (pids / "garbage.pid").write_text("not a pid")
        assert reap_stale(toolchain, root, lambda _: None) == ["dead"]
        # killed (-9), or already reaped by delete_cluster's waitpid (0): not a 60 s sleep
        assert component.wait(timeout=10) in (-9, 0)
        assert stranger.poll() is None
    finally:
        for p in (component, stranger):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_reap_stale_without_owners_dir_does_nothing(
    tmp_path: Path, toolchain: Toolchain, kwokctl: tuple[Path, Path]
) -> None:
    assert reap_stale(toolchain, tmp_path / "nothing-here") == []
    assert not kwokctl[1].exists()


def test_reap_stale_reports_failed_kwokctl_delete(tmp_path: Path, dead_pid: int) -> None:
    fake = tmp_path / "kwokctl"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = "--version" ] && { echo "kwokctl version v0.8.0"; exit 0; }\nexit 7\n'
    )
    fake.chmod(0o755)
    tc = Toolchain(cache_dir=tmp_path / "cache", overrides={"kwokctl": fake}, use_path=False)
    root = tmp_path / "root"
    owner(root, "dead", {"pid": dead_pid, "start": "1"})
    reports: list[str] = []
    assert reap_stale(tc, root, reports.append) == ["dead"]
    assert any("exit 7" in r for r in reports)
    assert not (root / "clusters" / "dead").exists()  # removed even though kwokctl failed


def test_reap_stale_leaves_a_record_being_written(
    tmp_path: Path, toolchain: Toolchain, kwokctl: tuple[Path, Path]
) -> None:
    """A record read between its writer's truncate and write is empty. A canary's two tracks
    start at once in one process, each reaping first: one took the other's empty record for a
    dead owner and deleted that cluster under its `kwokctl create` (open .../pki/ca.key: no
    such file or directory). Young and unreadable is being written: left alone."""
    root = tmp_path / "root"
    owner(root, "being-written", "")
    owner(root, "half-written", '{"pid": 12')
    reports: list[str] = []
    assert reap_stale(toolchain, root, reports.append) == []
    assert reports == [] and not kwokctl[1].exists()  # no kwokctl delete
    for n in ("being-written", "half-written"):
        assert (root / "clusters" / n / "kubeconfig.yaml").is_file()
        assert (root / "owners" / f"{n}.json").is_file()


def test_read_record_gone_young_and_old(tmp_path: Path) -> None:
    """Gone (its owner deleted it after the listing): nothing to reap. Unparseable: None while
    young, {} (no live owner) once older than the grace."""
    p = tmp_path / "r.json"
    assert read_record(p) is None
    p.write_text("")
    assert read_record(p) is None
    assert read_record(p, now=p.stat().st_mtime + UNREADABLE_GRACE_S + 1) == {}
    p.write_text("[1, 2]")  # parses, but is no record
    assert read_record(p, now=p.stat().st_mtime + UNREADABLE_GRACE_S + 1) == {}
    write_record(p, {"pid": 7, "start": "1"})
    assert read_record(p) == {"pid": 7, "start": "1"}
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]  # no temporary left


def test_write_record_is_whole_for_a_concurrent_reader(tmp_path: Path) -> None:
    """A reader thread never sees a record half-written (Path.write_text, as start() wrote it,
    showed an empty file to 38,710 of 40,471 such reads in 3 s)."""
    p = tmp_path / "owners" / "c.json"
    p.parent.mkdir()
    write_record(p, {"pid": 1})
    seen: list[str] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            seen.append(p.read_text())

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(300):
            write_record(p, {"pid": i, "start": "x" * (i % 50)})
    finally:
        done.set()
        t.join()
    partial = [text for text in seen if not text.endswith("}")]
    assert len(seen) > 0 and partial == []


def test_half_made_cluster_is_deleted_even_when_keep_was_asked(
    tmp_path: Path, toolchain: Toolchain, kwokctl: tuple[Path, Path], dead_pid: int
) -> None:
    """Interrupted inside start(): keep asked, but a cluster is kept only once it came up."""
    p = EmbeddedProvider(toolchain, workers=2, name="desched-half", keep=True)
    owner(p.root, "desched-half", {"pid": dead_pid, "start": "1", "created": 1.0})
    p._created = True  # start() wrote the owner record, then was interrupted
    p.report = lambda _: None
    p.stop()
    assert not (p.root / "owners" / "desched-half.json").exists()
    assert not (p.root / "clusters" / "desched-half").exists()
    assert "delete cluster --name desched-half" in kwokctl[1].read_text()
    assert p.teardown is not None and not p.teardown["left"]
    assert "desched-half deleted (0 processes, folder removed)" in p.teardown["text"]


def test_stale_up_dirs_spares_kept_live_and_young_legacy_folders(
    tmp_path: Path, dead_pid: int
) -> None:
    root, up = tmp_path / "clusters", tmp_path / "up"
    owner(root, "kept-one", {"pid": dead_pid, "start": "1", "keep": True})
    names = ("kept", "live", "dead", "legacy-young", "legacy-old", "being-written")
    dirs = {n: up / f"run-{n}" for n in names}
    for d in dirs.values():
        d.mkdir(parents=True)
    (dirs["kept"] / "cluster-name").write_text("kept-one")
    (dirs["kept"] / "owner.json").write_text(json.dumps({"pid": dead_pid, "start": "1"}))
    write_up_owner(dirs["live"])  # this process: a running `up`
    (dirs["dead"] / "owner.json").write_text(json.dumps({"pid": dead_pid, "start": "1"}))
    (dirs["dead"] / "cluster-name").write_text("gone")
    os.utime(dirs["legacy-old"], (1.0, 1.0))
    (dirs["being-written"] / "owner.json").write_text("")  # an `up` writing it now
    assert stale_up_dirs(up, root) == [dirs["dead"], dirs["legacy-old"]]


# -- EmbeddedProvider --------------------------------------------------------------------
def test_embedded_provider_needs_two_workers(toolchain: Toolchain) -> None:
    with pytest.raises(ProviderError, match="workers >= 2"):
        EmbeddedProvider(toolchain, workers=1)


def test_embedded_provider_paths(toolchain: Toolchain, tmp_path: Path) -> None:
    p = EmbeddedProvider(toolchain, workers=2, name="desched-x")
    assert p.root == tmp_path / "cache" / "clusters"
    assert p.kubeconfig == p.root / "clusters" / "desched-x" / "kubeconfig.yaml"
    p.stop()  # never started: nothing to delete and no kwokctl call
    assert not (tmp_path / "kwokctl-calls.txt").exists()


def test_kept_cluster_is_marked_and_not_reaped(
    tmp_path: Path, toolchain: Toolchain, kwokctl: tuple[Path, Path], dead_pid: int
) -> None:
    p = EmbeddedProvider(toolchain, workers=2, name="desched-kept", keep=True)
    owner(p.root, "desched-kept", {"pid": dead_pid, "start": "1", "created": 1.0})
    p._created = True  # as after start(); start itself needs a cluster
    p.cluster = object()  # type: ignore[assignment]  # start() finished
    hints: list[str] = []
    p.report = hints.append
    p.stop()
    record = json.loads((p.root / "owners" / "desched-kept.json").read_text())
    assert record == {"pid": dead_pid, "start": "1", "created": 1.0, "keep": True}
    assert "kwokctl delete cluster --name desched-kept" in hints[0]
    assert f"KWOK_WORKDIR={p.root}" in hints[0]
    # the owner is dead, yet a later run leaves the kept cluster alone
    assert reap_stale(toolchain, p.root, hints.append) == []
    assert (p.root / "clusters" / "desched-kept").is_dir()
    assert not kwokctl[1].exists()
