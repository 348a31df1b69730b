"""On real kind only: the round Job's pod is a container of the descheduler image built here.

Runs with `--desched-provider=kind` (make e2e-kind); skipped on every other provider. One
positive round, then, for the Job's pod: the kubelet ran it in containerd from the image the
kind_node build loaded (same config digest as in Docker, labelled with the Go module it was
built from), with the chart's securityContext and probes in its spec, its ServiceAccount
token mounted by the kubelet (the API server's audit log shows the eviction made with a
token bound to that pod and node), and the pod log is the descheduler's own.
"""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.desched_selftest

BUILT_FROM = "io.github.pytest-desched.built-from"


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def kind_cluster(desched_cluster):
    if desched_cluster.provider != "kind":
        pytest.skip("real kind only (make e2e-kind)")
    return desched_cluster


def test_round_job_runs_the_built_image_as_a_container(
    kind_cluster, desched_experiment, desched_toolchain
):
    v = desched_toolchain.versions
    res = desched_experiment("positive", variant="pdb-lister-workaround")
    assert res.evictions == 1
    job = res.records[-1]["job"]
    assert job["executor"] == "in-cluster" and job["succeeded"]
    pods = kind_cluster.core.list_namespaced_pod(
        job["namespace"], label_selector=f"batch.kubernetes.io/controller-uid={job['uid']}"
    ).items
    assert len(pods) == 1
    pod = pods[0]
    container, status = pod.spec.containers[0], pod.status.container_statuses[0]

    # A container in the node's containerd, from the image Docker holds (kind load), which
    # is the one built here.
    assert container.image == v.descheduler_image
    assert status.container_id.startswith("containerd://")
    assert status.state.terminated.exit_code == 0
    docker_id = _docker("image", "inspect", "--format", "{{.Id}}", v.descheduler_image).strip()
    label = _docker(
        "image",
        "inspect",
        "--format",
        f'{{{{index .Config.Labels "{BUILT_FROM}"}}}}',
        v.descheduler_image,
    ).strip()
    assert label == f"{v.descheduler.module}@{v.descheduler.version}"
    cid = status.container_id.removeprefix("containerd://")
    listed = json.loads(_docker("exec", pod.spec.node_name, "crictl", "ps", "-a", "-o", "json"))
    ours = [c for c in listed["containers"] if c["id"] == cid]
    assert [c["imageRef"] for c in ours] == [docker_id]
    inspected = json.loads(_docker("exec", pod.spec.node_name, "crictl", "inspect", cid))
    runtime_spec = inspected["info"]["runtimeSpec"]
    assert runtime_spec["process"]["user"]["uid"] == 1000
    assert runtime_spec["root"].get("readonly") is True
    assert runtime_spec["process"]["capabilities"].get("effective", []) == []

    # The chart's pod: its securityContext and probes, the kubelet-mounted token.
    sc = container.security_context
    assert (sc.run_as_non_root, sc.read_only_root_filesystem, sc.privileged) == (
        True,
        True,
        False,
    )
    assert sc.capabilities.drop == ["ALL"]
    assert container.liveness_probe.http_get.path == "/healthz"
    mounts = {m.mount_path: m for m in container.volume_mounts}
    token = mounts["/var/run/secrets/kubernetes.io/serviceaccount"]
    volumes = {vol.name: vol for vol in pod.spec.volumes}
    assert volumes[token.name].projected is not None

    # The API server saw the eviction made with a token bound to this very pod and node.
    assert kind_cluster.audit_log is not None
    entries = [json.loads(line) for line in kind_cluster.audit_log.read_text().splitlines()]
    evictions = [
        e
        for e in entries
        if e["verb"] == "create"
        and e["requestURI"].endswith("/eviction")
        and e["user"].get("extra", {}).get("authentication.kubernetes.io/pod-name")
        == [pod.metadata.name]
    ]
    assert evictions, "no audited eviction made with the round pod's bound token"
    extra = evictions[0]["user"]["extra"]
    assert extra["authentication.kubernetes.io/node-name"] == [pod.spec.node_name]
    assert evictions[0]["user"]["username"] == "system:serviceaccount:kube-system:descheduler"

    log = kind_cluster.kubectl("-n", job["namespace"], "logs", f"job/{job['name']}").stdout
    assert "descheduler" in log.lower()
