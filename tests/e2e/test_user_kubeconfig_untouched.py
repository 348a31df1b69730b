"""A whole run (bring-up, install, policy, round, teardown) never reads or writes ~/.kube/config.

The inner session runs with HOME pointing at a temp dir holding a sentinel ~/.kube/config and
without KUBECONFIG, so every tool that fell back to its default would land on the sentinel.
Its atime is set before its mtime first: with relatime (the usual mount option) any read then
moves atime, so "unchanged atime" really means "never read".
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.e2e.inner_run import start_inner

pytestmark = pytest.mark.desched_selftest

INNER = """
import pytest
from pytest_desched.descheduler.rounds import run_round

@pytest.mark.descheduler_e2e
def test_inner(desched_cluster, desched_settings, desched_release, desched_context):
    # kwokctl create/delete, helm show/template/upgrade/status/uninstall, kubectl diff,
    # the API clients and the round executor: every tool a run starts.
    ctx = desched_context(variant="pdb-lister-workaround")
    desched_release.apply_policy(ctx.policy)
    lab = ctx.lab()
    try:
        lab.create_namespace()
        lab.label_node(ctx.source)
        lab.deploy()
        rnd = run_round(desched_cluster, desched_release, "descheduler-home", desched_settings.run_dir)
        assert rnd.succeeded, rnd.logs[-2000:]
        assert desched_cluster.kubectl("get", "nodes").returncode == 0
    finally:
        lab.teardown()
"""

SENTINEL = """apiVersion: v1
kind: Config
current-context: users-own
contexts:
- name: users-own
  context: {cluster: users-own, user: users-own}
clusters:
- name: users-own
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: users-own
  user: {token: not-a-real-token}
"""


def test_whole_run_leaves_users_kubeconfig_unread_and_unchanged(
    tmp_path, desched_toolchain, monkeypatch
):
    home = tmp_path / "home"
    kube = home / ".kube" / "config"
    kube.parent.mkdir(parents=True)
    kube.write_text(SENTINEL)
    st = kube.stat()
    os.utime(kube, ns=(st.st_mtime_ns - 10**12, st.st_mtime_ns))  # atime before mtime
    before = kube.stat()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    workdir = tmp_path / "run"
    workdir.mkdir()
    proc = start_inner(workdir, INNER, desched_toolchain.cache_dir, "-q")
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0 and "1 passed" in out, out[-3000:]
    after = kube.stat()
    assert kube.read_text() == SENTINEL
    assert (after.st_mtime_ns, after.st_ctime_ns) == (before.st_mtime_ns, before.st_ctime_ns)
    assert after.st_atime_ns == before.st_atime_ns, "something read ~/.kube/config"
    assert sorted(p.name for p in home.rglob("*")) == [".kube", "config"], list(home.rglob("*"))
