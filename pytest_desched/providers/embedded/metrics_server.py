"""metrics-server on the embedded cluster: `metrics.k8s.io` from kwok's emulated kubelets.

What kwokctl v0.8.0 does and what this module adds (read in its source, pkg/kwokctl):

* `kwokctl create cluster --enable metrics-server --metrics-server-binary B` runs the binary
  (components/metrics_server.go: `--kubelet-preferred-address-types=InternalIP,...`,
  `--kubelet-use-node-status-port`, `--kubelet-insecure-tls`, `--metric-resolution=15s`) and
  applies its manifests with the Service turned into an ExternalName and the APIService
  pointed at it. The manifests come from `metricsServerManifests` (KwokctlConfiguration);
  unset, kwokctl downloads `components.yaml` from GitHub. Here they are the module's own
  `manifests/base` (a kustomization kwokctl builds with `kubectl kustomize`), from the Go
  module cache the pinned build filled: nothing is fetched.
* With metrics-server enabled and no Metric or ClusterResourceUsage given, kwokctl adds
  kwok's own `kustomize/metrics/resource` (the kubelet's /metrics/resource at
  `/metrics/nodes/{nodeName}/metrics/resource`) and `kustomize/metrics/usage` (usage from
  the pod annotations lab/usage_values.py writes, 1m CPU and 1Mi memory without them) to kwok.yaml.
* Nodes made here (not by `kwokctl scale node`) need the annotation its node template carries,
  `metrics.k8s.io/resource-metrics-path: /metrics/nodes/<name>/metrics/resource`
  (kustomize/kwokctl/resource/node.yaml): metrics-server v0.8.0 scrapes that path instead of
  /metrics/resource (scraper/client/resource/client.go), and kwok serves each node's there.
* What it leaves out: the binary runtime gives kwok-controller no `--node-ip`, so nodes
  report a test address (192.0.2.1 was seen) and metrics-server's scrape of
  `https://<InternalIP>:<daemonEndpoints port>` reaches nothing. `--node-ip=127.0.0.1`
  (KWOK_NODE_IP) puts every node's InternalIP on the host, where kwok-controller serves
  its kubelet endpoints on its own port (the node-initialize Stage writes both).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from pytest_desched.errors import ProviderError
from pytest_desched.kube import wait_for
from pytest_desched.tools.gobuild import go_env
from pytest_desched.tools.toolchain import Toolchain

METRICS_SERVER = "metrics-server"  # kwokctl's component name (consts.ComponentMetricsServer)
KWOK_NODE_IP = "127.0.0.1"
# metrics-server's shortest `--metric-resolution` (v0.8.0 options.go refuses less than 10s, and
# a kubelet request timeout above 9/10 of it: its 10s default is lowered); a node's CPU is a
# rate over two scrapes, so usage is served one resolution after the start.
METRIC_RESOLUTION = "10s"
KUBELET_REQUEST_TIMEOUT = "5s"


# What an idle node uses on its own (its kubelet, runtime and system daemons): metrics-server
# v0.8.0 drops a node whose CPU counter or memory reads 0 (scraper/client/resource/decode.go),
# and kwok sums a node's usage from its pods, so an empty kwok node would have no NodeMetrics
# at all, which a real node never lacks. One pod per node in kube-system carries it.
NODE_BASELINE = {"kwok.x-k8s.io/usage-cpu": "50m", "kwok.x-k8s.io/usage-memory": "256Mi"}


def baseline_pod(node: str, image: str) -> dict[str, object]:
    """The pod that gives `node` its own idle usage (bound to it, in kube-system)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"node-baseline-{node}",
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/name": "node-baseline"},
            "annotations": dict(NODE_BASELINE),
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "system", "image": image}],
            "tolerations": [{"operator": "Exists"}],
            "priorityClassName": "system-node-critical",
        },
    }


def create_baseline_pods(core: Any, nodes: list[str], image: str, timeout: float = 30) -> None:
    """Each node's baseline pod; retried while kube-system has no `default` ServiceAccount
    yet (the ServiceAccount admission refuses a pod until kube-controller-manager made it)."""
    from kubernetes.client.rest import ApiException

    left = list(nodes)

    def attempt() -> list[str]:
        while left:
            try:
                core.create_namespaced_pod("kube-system", baseline_pod(left[0], image))
            except ApiException as exc:
                if exc.status == 409:  # made by an attempt whose answer was lost
                    left.pop(0)
                    continue
                if exc.status == 403 and "serviceaccount" in str(exc.body or ""):
                    return left
                raise
            left.pop(0)
        return left

    wait_for(
        "kube-system's default ServiceAccount, for the nodes' baseline pods",
        attempt,
        lambda rest: not rest,
        timeout=timeout,
        max_interval=0.2,
    )


def resource_metrics_path(node: str) -> dict[str, str]:
    """The node annotation that sends metrics-server to kwok's emulated kubelet of `node`."""
    return {"metrics.k8s.io/resource-metrics-path": f"/metrics/nodes/{node}/metrics/resource"}


def manifests_dir(toolchain: Toolchain) -> Path:
    """The pinned module's `manifests/base` in the Go module cache (filled by its build;
    `go mod download` of the pin otherwise, from the module proxy like every build)."""
    comp = toolchain.versions.metrics_server
    env = go_env()
    try:
        res = subprocess.run(
            ["go", "mod", "download", "-json", f"{comp.module}@{comp.version}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        info = json.loads(res.stdout or "{}")
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise ProviderError(
            f"{comp.module}@{comp.version}: go mod download failed: {exc}"
        ) from None
    base = Path(str(info.get("Dir", ""))) / "manifests" / "base"
    if res.returncode != 0 or not (base / "kustomization.yaml").is_file():
        raise ProviderError(
            f"{comp.module}@{comp.version}: no manifests/base in the module cache "
            f"({(res.stderr or res.stdout)[-300:]}); run `desched tools metrics-server`"
        )
    return base


def kwokctl_options(toolchain: Toolchain) -> dict[str, object]:
    """KwokctlConfiguration options of a cluster with metrics-server: its manifests from the
    module cache, and a kubectl for kwokctl's `kubectl kustomize` when PATH has none."""
    return {
        "metricsServerManifests": [str(manifests_dir(toolchain))],
        "kubectlBinary": str(toolchain.path("kubectl")),
    }


def kwokctl_args(binary: Path) -> list[str]:
    """The `kwokctl create cluster` arguments that start metrics-server (the binary runtime)."""
    return ["--enable", METRICS_SERVER, "--metrics-server-binary", str(binary)]


def component_patches() -> list[dict[str, object]]:
    """KwokctlConfiguration `componentsPatches`: kwok-controller's node IP on the host, and
    metrics-server's resolution (each replacing the flag kwokctl sets) and kubelet timeout.

    Not `--extra-args`: kwokctl v0.8.0 files a second component's second `--extra-args` under
    the wrong patch (cmd/create/cluster/cluster.go mutationComponentPatches keys each component
    by its first flag's position among all of them) and panics with an index out of range.
    """

    def arg(key: str, value: str, override: bool) -> dict[str, object]:
        return {"key": key, "value": value, "override": override}

    return [
        {"name": "kwok-controller", "extraArgs": [arg("node-ip", KWOK_NODE_IP, True)]},
        {
            "name": METRICS_SERVER,
            "extraArgs": [
                arg("metric-resolution", METRIC_RESOLUTION, True),
                arg("kubelet-request-timeout", KUBELET_REQUEST_TIMEOUT, False),
            ],
        },
    ]
