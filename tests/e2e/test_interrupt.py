"""Ctrl-C in the middle of a round leaves no process, cluster, namespace or label behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from pytest_desched.kube import wait_for
from pytest_desched.providers.base import choose_provider
from tests.e2e.commands import descendants, reap_orphans
from tests.e2e.inner_run import start_inner

pytestmark = pytest.mark.desched_selftest

INNER = """
import pytest

@pytest.mark.descheduler_e2e
def test_inner(desched_experiment):
    desched_experiment("positive", variant="pdb-lister-workaround")
"""


def _live_cmdlines() -> dict[int, str]:
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # exited; only the parent's bookkeeping remains
            out[int(d.name)] = (
                (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except (OSError, IndexError):
            continue
    return out


def _inner_api(kubeconfig: Path):
    from kubernetes import client, config

    return client.BatchV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def _embedded_inner_cluster(proc, cache: Path) -> tuple[str, Path, Path]:
    """The inner run's embedded cluster, found by its owner file (the inner pid)."""
    owners = cache / "clusters" / "owners"

    def mine() -> list[str]:
        found = []
        for f in owners.glob("*.json"):
            try:
                if json.loads(f.read_text()).get("pid") == proc.pid:
                    found.append(f.stem)
            except (OSError, ValueError):
                pass
        return found

    name = wait_for("the inner run's cluster", mine, bool, timeout=120)[0]
    cdir = cache / "clusters" / "clusters" / name
    return name, cdir, cdir / "kubeconfig.yaml"


def _kind_inner_cluster(proc, kind: Path, workdir: Path) -> tuple[str, Path, Path]:
    """The inner run's kind cluster: its name carries the inner pid (unique_name)."""
    from pytest_desched.providers.kind import kind_clusters

    prefix = f"desched-kind-main-{proc.pid}-"

    def mine() -> list[str]:
        return [c for c in kind_clusters(kind) if c.startswith(prefix)]

    name = wait_for("the inner run's kind cluster", mine, bool, timeout=300)[0]
    kdir = workdir / "bt" / "desched0" / "kind"
    return name, kdir, kdir / "kubeconfig"


def _wait_inner_round(
    proc, cache: Path, provider: str = "embedded", **kind
) -> tuple[str, Path, str]:
    """The inner run's cluster (name, directory) once its first round Job exists."""
    if provider == "kind":
        name, cdir, kubeconfig = _kind_inner_cluster(proc, **kind)
    else:
        name, cdir, kubeconfig = _embedded_inner_cluster(proc, cache)
    # kind's kubeconfig file exists (empty) before the cluster does: wait for its content
    wait_for(
        "inner kubeconfig", lambda: kubeconfig.is_file() and kubeconfig.stat().st_size, bool, 300
    )
    batch = _inner_api(kubeconfig)

    def round_jobs() -> list[str]:
        try:
            jobs = batch.list_namespaced_job("kube-system", _request_timeout=5).items
        except Exception:  # the inner API server may not answer yet
            return []
        return [j.metadata.name for j in jobs if j.metadata.name.startswith("descheduler-positive")]

    return (
        name,
        cdir,
        wait_for("a round Job in the inner cluster", round_jobs, bool, timeout=300)[0],
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_round_leaves_nothing_behind(
    tmp_path, desched_settings, desched_toolchain, sig, record_property
):
    """On the session's provider: embedded (processes, directory) or kind (node containers)."""
    provider = choose_provider(desched_settings.provider)
    cache = desched_toolchain.cache_dir
    proc = start_inner(tmp_path, INNER, cache, "-q", f"--desched-provider={provider}")
    kind = (
        {"kind": desched_toolchain.path("kind"), "workdir": tmp_path} if provider == "kind" else {}
    )
    try:
        name, cdir, job = _wait_inner_round(proc, cache, provider, **kind)
        t0 = time.monotonic()
        os.killpg(proc.pid, sig)  # what a terminal's Ctrl-C (or CI's cancel) does
        out, _ = proc.communicate(timeout=180)
        record_property("signal_to_exit_s", round(time.monotonic() - t0, 2))
        print(f"pytest session: {signal.Signals(sig).name} -> exit in {time.monotonic() - t0:.2f}s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, out
    assert "KeyboardInterrupt" in out or "Interrupted" in out or "signal" in out, out[-3000:]
    if provider == "kind":
        from pytest_desched.providers.kind import kind_clusters

        assert name not in kind_clusters(kind["kind"]), f"kind cluster {name} left: {out[-2000:]}"
        return
    # the session's last word: what its cleanup verified (pytest_desched.interrupts)
    assert f"embedded cluster {name} deleted (0 processes, folder removed)" in out, out[-3000:]
    assert not cdir.exists(), f"cluster dir {cdir} left behind"
    assert not (cache / "clusters" / "owners" / f"{name}.json").exists()
    # This cluster's processes only (a round pod's command line names the cluster's dir):
    # other runs on the same machine may have round pods of their own.
    left = {pid: c for pid, c in _live_cmdlines().items() if name in c}
    assert not left, f"processes left after interrupting round {job}: {left}"


def test_killed_run_is_reaped_by_the_next(tmp_path, desched_toolchain):
    """SIGKILL leaves no chance to clean up; the embedded provider's next start reaps it.

    The cluster's watchdog deletes it at once (tests/e2e/test_owner_killed.py); here the
    watchdog is SIGKILLed first (the OOM killer may take it too), so only the next start's
    reaper is left. The embedded provider's own reaper, so the inner run is embedded
    whatever the session's provider (a SIGKILLed kind run leaves its node containers).
    """
    from pytest_desched.providers.embedded.cluster import reap_stale

    cache = desched_toolchain.cache_dir
    proc = start_inner(tmp_path, INNER, cache, "-q", "--desched-provider=embedded")
    try:
        name, cdir, _ = _wait_inner_round(proc, cache)
        dogs = [
            c
            for c in psutil.Process(proc.pid).children()
            if "embedded.watchdog" in " ".join(c.cmdline())
        ]
        assert dogs, "the inner run's cluster has no watchdog"
        for dog in dogs:  # pending before the owner's death closes its pipe: it never reads
            dog.kill()
        orphans = descendants(proc.pid)  # this process's once the inner run is killed
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert cdir.exists()
    assert any(name in c for c in _live_cmdlines().values()), "expected orphaned components"
    reaped = reap_stale(desched_toolchain, cache / "clusters")
    assert name in reaped
    assert not cdir.exists()
    assert not {pid: c for pid, c in _live_cmdlines().items() if name in c}
    reap_orphans(proc.pid, {**orphans, **{d.pid: d.create_time() for d in dogs}}, name)


@pytest.mark.parametrize("interrupt", [True, False], ids=["SIGINT-mid-round", "to-completion"])
def test_existing_cluster_run_leaves_no_namespace_label_or_release(
    tmp_path, desched_cluster, desched_toolchain, desched_release, interrupt
):
    """The existing-cluster provider pointed at this session's cluster, run to completion or
    interrupted mid-round: its lab namespace, node labels, release objects and round Jobs
    are all gone afterwards, and nothing it did not create was touched."""
    import yaml

    from pytest_desched.lab.inputs import POOL_LABEL
    from pytest_desched.providers.base import NODE_OPT_IN_LABEL

    core, batch = desched_cluster.core, desched_cluster.batch
    ctx = (
        desched_cluster.context
        or yaml.safe_load(desched_cluster.kubeconfig.read_text())["current-context"]
    )
    workers = desched_cluster.workers[:3]
    release, namespace = "desched-inner", "lab-inner"
    for n in workers:
        core.patch_node(n, {"metadata": {"labels": {NODE_OPT_IN_LABEL: "true"}}})
    proc = start_inner(
        tmp_path,
        INNER,
        desched_toolchain.cache_dir,
        "-q",
        "--desched-provider=existing",
        "--desched-allow-existing",
        f"--desched-existing-context={ctx}",
        f"--desched-existing-kubeconfig={desched_cluster.kubeconfig}",
        f"--desched-release={release}",
        f"--desched-namespace={namespace}",
    )
    try:

        def inner_round() -> list[str]:
            return [
                j.metadata.name
                for j in batch.list_namespaced_job("kube-system").items
                if j.metadata.name.startswith("descheduler-positive")
                and any(o.name.startswith(release) for o in j.metadata.owner_references or [])
            ]

        job = wait_for("the inner run's round Job", inner_round, bool, timeout=120)[0]
        if interrupt:
            os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for n in workers:
            core.patch_node(n, {"metadata": {"labels": {NODE_OPT_IN_LABEL: None}}})
    if interrupt:
        assert proc.returncode != 0, out[-3000:]
    else:  # the experiment passes on an existing cluster too
        assert proc.returncode == 0 and "1 passed" in out, out[-3000:]
    assert namespace not in {ns.metadata.name for ns in core.list_namespace().items}, out[-3000:]
    labelled = [
        n.metadata.name for n in core.list_node().items if POOL_LABEL in (n.metadata.labels or {})
    ]
    assert not labelled, f"pool label left on {labelled} after interrupting {job}"
    sel = f"app.kubernetes.io/instance={release}"
    assert not core.list_namespaced_config_map("kube-system", label_selector=sel).items
    assert not core.list_namespaced_service_account("kube-system", label_selector=sel).items
    assert not desched_cluster.rbac.list_cluster_role(label_selector=sel).items
    assert not desched_cluster.rbac.list_cluster_role_binding(label_selector=sel).items
    assert not inner_round(), "round Jobs of the interrupted release left behind"
    assert desched_cluster.helm("status", release, "-n", "kube-system", check=False).returncode != 0
    # This session's own release was not touched by the inner run's cleanup.
    assert (
        desched_cluster.helm(
            "status", desched_release.name, "-n", "kube-system", check=False
        ).returncode
        == 0
    )
    assert desched_cluster.workdir is not None  # the embedded cluster's round pods live there
    mine = f"{desched_cluster.workdir}/desched-pod-"  # this session's round pods only
    assert not {pid: c for pid, c in _live_cmdlines().items() if mine in c}
