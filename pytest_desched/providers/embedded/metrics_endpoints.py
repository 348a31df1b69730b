"""The emulated kubelets' resource-metrics endpoints, and the two ways one of them goes bad.

metrics-server v0.8.0 scrapes each node at the path its annotation
`metrics.k8s.io/resource-metrics-path` names (scraper/client/resource/client.go), on the
node's InternalIP and kubelet port, where kwok-controller serves the paths of its `Metric`
objects (metrics_server.py). Two faults of a metrics source happen there, each with kwok
itself and one node annotation, nothing stubbed:

* **absent** (the node missing from `metrics.k8s.io`): the node's path is one kwok does not
  serve, so its scrape gets a 404. metrics-server stores only the nodes a scrape answered
  (storage/node.go Store builds `last` from the batch alone), so the node drops out of the
  NodeMetrics list one resolution later, while the API answers for every other node: the
  kubelet of one node whose metrics endpoint is gone.
* **stale** (counters that stopped advancing): the node's path is kwok's second Metric,
  `FROZEN_PATH`, which serves the node's CPU counter and memory from the node's own
  annotations (`FROZEN_CPU`, `FROZEN_MEMORY`), set to what kwok served at the freeze. kwok's
  samples carry no timestamp, so metrics-server stamps each scrape with its own time
  (decode.go) and serves the rate of a counter that does not move: CPU 0, with a fresh
  `timestamp`. A stuck cAdvisor behind a live kubelet looks like this to metrics-server. It
  cannot tell, and neither can its reader.

The frozen Metric is in every cluster that runs metrics-server (`write_config`, one more
`kwokctl -c` file): it serves nothing until a node is pointed at it. kwokctl adds its default
Metric only when the configuration has none (pkg/kwokctl/runtime/cluster.go), so the file
carries kwok's own default (read from the pinned module, not copied) beside the frozen one.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.errors import ProviderError
from pytest_desched.providers.embedded.metrics_server import resource_metrics_path
from pytest_desched.tools.gobuild import go_env

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster
    from pytest_desched.tools.toolchain import Toolchain

PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
FROZEN_CPU = "desched.example.com/frozen-cpu-seconds"
FROZEN_MEMORY = "desched.example.com/frozen-memory-bytes"
FROZEN_METRIC = "desched-frozen-resource"
FROZEN_PATH = "/metrics/nodes/{nodeName}/metrics/frozen"
ABSENT_PATH = "/metrics/nodes/{nodeName}/metrics/absent"  # no Metric serves it: 404
DEFAULT_METRIC = "kustomize/metrics/resource/metrics-resource.yaml"
CONFIG_FILE = "kwok-metrics.yaml"


def resource_path(path: str, node: str) -> str:
    return path.replace("{nodeName}", node)


def frozen_metric() -> dict[str, Any]:
    """kwok's Metric at FROZEN_PATH: a node's counters from its own annotations."""

    def frozen(key: str) -> str:
        return f'double(node.metadata.annotations["{key}"])'

    return {
        "kind": "Metric",
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "metadata": {"name": FROZEN_METRIC},
        "spec": {
            "path": FROZEN_PATH,
            "metrics": [
                {"name": "scrape_error", "dimension": "node", "kind": "gauge", "value": "0"},
                {
                    "name": "node_cpu_usage_seconds_total",
                    "dimension": "node",
                    "kind": "counter",
                    "help": "Cumulative cpu time consumed by the node in core-seconds (frozen)",
                    "value": frozen(FROZEN_CPU),
                },
                {
                    "name": "node_memory_working_set_bytes",
                    "dimension": "node",
                    "kind": "gauge",
                    "help": "Current working set of the node in bytes (frozen)",
                    "value": frozen(FROZEN_MEMORY),
                },
            ],
        },
    }


def kwok_module_dir(toolchain: Toolchain) -> Path:
    """The pinned kwok module in the Go module cache (its build filled it)."""
    comp = toolchain.versions.kwok
    try:
        res = subprocess.run(
            ["go", "mod", "download", "-json", f"{comp.module}@{comp.version}"],
            capture_output=True,
            text=True,
            env=go_env(),
            timeout=120,
            check=False,
        )
        info = json.loads(res.stdout or "{}")
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise ProviderError(
            f"{comp.module}@{comp.version}: go mod download failed: {exc}"
        ) from None
    d = Path(str(info.get("Dir", "")))
    if res.returncode != 0 or not (d / DEFAULT_METRIC).is_file():
        raise ProviderError(
            f"{comp.module}@{comp.version}: no {DEFAULT_METRIC} in the module cache "
            f"({(res.stderr or res.stdout)[-300:]}); run `desched tools kwok`"
        )
    return d


def same_descriptors(metric: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """`metric` with each series' help as `default` spells it for the same name.

    kwok registers every Metric's series in one registry per node: a second descriptor of
    the same name with another help string is refused ("a previously registered descriptor
    ... has different label names or a different help string"), and whichever Metric a node
    registered first wins, so the other path served no node series for it (seen: the
    resource path of two nodes out of three without node_cpu_usage_seconds_total)."""
    helps = {m["name"]: m.get("help") for m in default["spec"]["metrics"]}
    for m in metric["spec"]["metrics"]:
        if m["name"] in helps:
            if helps[m["name"]] is None:
                m.pop("help", None)
            else:
                m["help"] = helps[m["name"]]
    return metric


def write_config(cluster_dir: Path, toolchain: Toolchain) -> Path:
    """The kwokctl configuration with kwok's default Metric and the frozen one."""
    default = yaml.safe_load((kwok_module_dir(toolchain) / DEFAULT_METRIC).read_text())
    frozen = same_descriptors(frozen_metric(), default)
    out = cluster_dir / CONFIG_FILE
    out.write_text(yaml.safe_dump_all([default, frozen], sort_keys=False))
    return out


def kubelet_counters(cluster: Cluster, node: str) -> dict[str, float]:
    """The node's CPU counter (core-seconds) and memory (bytes) as kwok serves them now,
    read the way metrics-server reads them (its InternalIP and kubelet port, no TLS check)."""
    n = cluster.core.read_node(node)
    ip = next(a.address for a in n.status.addresses if a.type == "InternalIP")
    port = n.status.daemon_endpoints.kubelet_endpoint.port
    path = (n.metadata.annotations or {}).get(PATH_ANNOTATION) or "/metrics/resource"
    url = f"https://{ip}:{port}{path}"
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=10, context=ctx) as resp:
            text = resp.read().decode()
    except OSError as exc:
        raise ProviderError(f"node {node}: kwok's kubelet endpoint {url}: {exc}") from None
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("node_cpu_usage_seconds_total", "node_memory_working_set_bytes"):
            found[name] = float(value.split()[0])
    if len(found) != 2:
        raise ProviderError(f"node {node}: {url} served no node counters: {text[:300]!r}")
    return {
        "cpu": found["node_cpu_usage_seconds_total"],
        "memory": found["node_memory_working_set_bytes"],
    }


def _annotate(cluster: Cluster, node: str, ann: Mapping[str, str | None]) -> None:
    cluster.core.patch_node(node, {"metadata": {"annotations": dict(ann)}})


@contextlib.contextmanager
def node_absent(cluster: Cluster, node: str) -> Iterator[str]:
    """`node`'s metrics endpoint not served inside (a 404 at its scrape); restored after."""
    _annotate(cluster, node, {PATH_ANNOTATION: resource_path(ABSENT_PATH, node)})
    try:
        yield resource_path(ABSENT_PATH, node)
    finally:
        _annotate(cluster, node, resource_metrics_path(node))


@contextlib.contextmanager
def node_frozen(cluster: Cluster, node: str) -> Iterator[dict[str, float]]:
    """`node`'s counters held at what kwok serves now, inside; live again after. Yields
    the frozen values."""
    now = kubelet_counters(cluster, node)
    _annotate(
        cluster,
        node,
        {
            FROZEN_CPU: repr(now["cpu"]),
            FROZEN_MEMORY: repr(now["memory"]),
            PATH_ANNOTATION: resource_path(FROZEN_PATH, node),
        },
    )
    try:
        yield now
    finally:
        _annotate(
            cluster,
            node,
            {FROZEN_CPU: None, FROZEN_MEMORY: None, **resource_metrics_path(node)},
        )
