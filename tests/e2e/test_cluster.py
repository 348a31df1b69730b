"""The session cluster itself: a real 1.36 control plane with Ready workers."""

from __future__ import annotations

import json

import pytest

from pytest_desched.kube import node_ready

pytestmark = pytest.mark.desched_selftest


def test_cluster_has_ready_workers_and_pinned_server(desched_cluster, desched_toolchain):
    v = desched_toolchain.versions
    assert desched_cluster.server_version() == v.kubernetes.version
    nodes = {n.metadata.name: n for n in desched_cluster.core.list_node().items}
    assert set(desched_cluster.workers) <= set(nodes)
    assert len(desched_cluster.workers) >= 3
    for name in desched_cluster.workers:
        n = nodes[name]
        assert node_ready(n), name
        labels = n.metadata.labels
        assert labels["kubernetes.io/hostname"] == name
        assert labels["topology.kubernetes.io/zone"]
        if desched_cluster.provider == "embedded":
            assert n.status.allocatable["cpu"] == "4"
            assert n.status.allocatable["pods"] == "110"


def test_kubectl_through_the_fixture_never_touches_user_kubeconfig(
    desched_cluster, tmp_path, monkeypatch
):
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    out = desched_cluster.kubectl("get", "nodes", "-o", "json").stdout
    names = {i["metadata"]["name"] for i in json.loads(out)["items"]}
    assert set(desched_cluster.workers) <= names
    assert not (home / ".kube" / "config").exists()
    # the Helm the run chose (4 by default, 3 with --desched-helm=3), not another on PATH
    helm = desched_cluster.toolchain.versions.helm.version
    assert desched_cluster.helm("version", "--short").stdout.startswith(helm), helm
