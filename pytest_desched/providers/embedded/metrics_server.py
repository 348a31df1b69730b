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

from pytest_desched.errors import ProviderError
from pytest_desched.tools.gobuild import go_env
from pytest_desched.tools.toolchain import Toolchain

METRICS_SERVER = "metrics-server"  # kwokctl's component name (consts.ComponentMetricsServer)
KWOK_NODE_IP = "127.0.0.1"
# metrics-server's shortest `--metric-resolution` (v0.8.0 options.go refuses less than 10s, and
# a kubelet request timeout above 9/10 of it: its 10s default is lowered); a node's CPU is a
# rate over two scrapes, so usage is served one resolution after the start.
METRIC_RESOLUTION = "10s"
KUBELET_REQUEST_TIMEOUT = "5s"


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
    """The `kwokctl create cluster` arguments that start metrics-server and let it reach kwok."""
    return [
        "--enable",
        METRICS_SERVER,
        "--metrics-server-binary",
        str(binary),
        "--extra-args",
        f"kwok-controller=node-ip={KWOK_NODE_IP}",
        "--extra-args",
        f"{METRICS_SERVER}=metric-resolution={METRIC_RESOLUTION}",
        "--extra-args",
        f"{METRICS_SERVER}=kubelet-request-timeout={KUBELET_REQUEST_TIMEOUT}",
    ]
