"""Usage served back on the replay cluster through the path the incident's descheduler read:
metrics-server scraping kwok's emulated kubelets, which serve what each pod's kwok usage
annotations say (lab/usage_values.py). Pure: what to write, decided before the restore.

* **Pods:** each restored pod carries `kwok.x-k8s.io/usage-cpu` / `-memory`: its recorded
  PodMetrics sum, divided among its containers (kwok applies a pod's annotation to each
  container, and PodMetrics sums them); rounded up, so a pod of n containers may read up to
  n-1 millicores more. A pod the snapshot has no figure for uses kwok's default (1m, 1Mi),
  as does a replacement a controller makes during the replay (the ledger notes both).
* **Nodes: the node's recorded figure, not its pods' sum.** kwok computes a node's usage as
  its pods' sum, but a real node's NodeMetrics also counts the kubelet, the runtime, system
  daemons, and the pods a scoped snapshot did not list; LowNodeUtilization classifies nodes
  by that figure, so the sum alone would read nodes emptier than the incident's descheduler
  saw them (and could turn an overutilized node into an in-between one). Each node gets one
  pod of its own in kube-system (`desched-node-usage-<node>`: bare, system-node-critical, no
  requests, so the evictor never takes it and scheduling never counts it) carrying the
  difference, at least 1m / 1Mi (metrics-server drops a node that reads 0: an empty node
  would have no figure at all). A node whose recorded figure is below its pods' sum (the two
  are read moments apart) is served the sum plus that floor; the count is noted.
* **`--assume-usage requests`** (the user's stated assumption for a snapshot without usage):
  every pod uses what its containers request, every node its pods' sum. Never implied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.lab.usage_values import USAGE_ANNOTATIONS
from pytest_desched.replay.capture.format import Snapshot, key
from pytest_desched.replay.capture.usage import cpu_m, mem_b, parse_figure

ASSUMPTIONS = ("requests",)
NODE_USAGE_PREFIX = "desched-node-usage-"
NODE_USAGE_LABEL = ("app.kubernetes.io/name", "desched-node-usage")
NODE_USAGE_NAMESPACE = "kube-system"
FLOOR = (1, 1024 * 1024)  # 1m, 1Mi: kwok's own default for a pod without annotations
RESOURCE_METRICS_PATH = "metrics.k8s.io/resource-metrics-path"


@dataclass
class ServedUsage:
    """What the replay cluster serves: per pod and per node (millicores, bytes), and how."""

    origin: str  # "recorded" | "assumed: requests"
    pods: dict[str, tuple[int, int]] = field(default_factory=dict)  # pod key -> figure
    nodes: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> served figure
    node_rest: dict[str, tuple[int, int]] = field(default_factory=dict)  # the node pod's share
    below_sum: list[str] = field(default_factory=list)  # nodes recorded below their pods' sum
    pods_without: int = 0

    def pod_annotations(self, pod: dict[str, Any]) -> dict[str, str]:
        """The kwok usage annotations of one restored pod (empty: no figure for it)."""
        fig = self.pods.get(key(pod))
        if fig is None:
            return {}
        n = _containers(pod)
        return {
            USAGE_ANNOTATIONS["cpu"]: f"{fig[0] // n}m",
            USAGE_ANNOTATIONS["memory"]: str(fig[1] // n),
        }

    def node_pods(self, image: str) -> list[dict[str, Any]]:
        """One pod per node carrying what the node uses beyond its pods (see the docstring)."""
        out = []
        for node, (cpu, mem) in sorted(self.node_rest.items()):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{NODE_USAGE_PREFIX}{node}"[:253],
                        "namespace": NODE_USAGE_NAMESPACE,
                        "labels": {NODE_USAGE_LABEL[0]: NODE_USAGE_LABEL[1]},
                        "annotations": {
                            USAGE_ANNOTATIONS["cpu"]: f"{cpu}m",
                            USAGE_ANNOTATIONS["memory"]: str(mem),
                        },
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "system", "image": image}],
                        "tolerations": [{"operator": "Exists"}],
                        "priorityClassName": "system-node-critical",
                    },
                }
            )
        return out

    def note(self) -> str:
        """The ledger's line: what was served, from where, and what it could not keep."""
        head = (
            "usage: the snapshot's recorded figures served through metrics.k8s.io"
            if self.origin == "recorded"
            else "usage ASSUMED (--assume-usage requests): each pod uses its requests, each "
            "node its pods' sum; the snapshot recorded none"
        )
        out = (
            f"{head} (metrics-server on kwok): {len(self.pods)} pods, {len(self.nodes)} nodes "
            "at their own figure (pods' sum + a per-node system pod)"
        )
        if self.pods_without:
            out += f"; {self.pods_without} pods without a figure use kwok's 1m/1Mi"
        if self.below_sum:
            out += (
                f"; {len(self.below_sum)} nodes recorded below their pods' sum are served the "
                f"sum (e.g. {self.below_sum[:3]})"
            )
        return out + "; a replacement made during the replay uses 1m/1Mi (no figure exists)"


def _containers(pod: dict[str, Any]) -> int:
    return max(len((pod.get("spec") or {}).get("containers") or []), 1)


def _even(fig: tuple[int, int], pod: dict[str, Any]) -> tuple[int, int]:
    """`fig` rounded up to what kwok serves: one annotation per container, summed, at least
    1m / 1Mi each (metrics-server drops a container whose counter reads 0)."""
    n = _containers(pod)
    per = (max(math.ceil(fig[0] / n), FLOOR[0]), max(math.ceil(fig[1] / n), FLOOR[1]))
    return per[0] * n, per[1] * n


def metrics_path_annotation(node: str) -> dict[str, str]:
    """Where metrics-server v0.8.0 scrapes `node` on kwok (the annotation kwok's own node
    template carries; providers/embedded/metrics_server.py)."""
    return {RESOURCE_METRICS_PATH: f"/metrics/nodes/{node}/metrics/resource"}


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """A pod's CPU (millicores) and memory (bytes) requests, summed over its containers."""
    cpu = mem = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += cpu_m(req.get("cpu", "0"))
        mem += mem_b(req.get("memory", "0"))
    return cpu, mem


def check_assumption(assume: str | None) -> str | None:
    """`--assume-usage` checked before anything starts."""
    if assume is not None and assume not in ASSUMPTIONS:
        raise ConfigError(
            f"--assume-usage {assume!r}: the one assumption offered is 'requests' (each pod "
            "uses what it requests)"
        )
    return assume


def served_usage(
    snap: Snapshot, assume: str | None = None, restored: set[str] | None = None
) -> ServedUsage | None:
    """What to serve for `snap`: its recorded usage, the user's assumption (which wins when
    given), or None (nothing to serve). `restored`: the pod keys the restore writes (a pod
    it leaves out uses nothing on the replay cluster; its node's own pod carries its share)."""
    bound = [
        p
        for p in snap.pods
        if (p.get("spec") or {}).get("nodeName") and (restored is None or key(p) in restored)
    ]
    if assume == "requests":
        served = ServedUsage("assumed: requests")
        served.pods = {key(p): _even(pod_requests(p), p) for p in bound}
        recorded_nodes: dict[str, tuple[int, int]] = {}
    elif snap.usage:
        served = ServedUsage("recorded")
        recorded = snap.usage.get("pods") or {}
        served.pods = {
            key(p): _even(parse_figure(recorded[key(p)]), p) for p in bound if key(p) in recorded
        }
        served.pods_without = len(bound) - len(served.pods)
        recorded_nodes = {
            str(n): parse_figure(f) for n, f in (snap.usage.get("nodes") or {}).items()
        }
    else:
        return None
    sums: dict[str, list[int]] = {str(n["metadata"]["name"]): [0, 0] for n in snap.nodes}
    for p in bound:
        # kwok's default for a pod without annotations: 1m / 1Mi per container
        fig = served.pods.get(key(p)) or _even((0, 0), p)
        s = sums.setdefault(str(p["spec"]["nodeName"]), [0, 0])
        s[0] += fig[0]
        s[1] += fig[1]
    for node, (cpu, mem) in sums.items():
        want = recorded_nodes.get(node)
        if want is not None and (want[0] < cpu or want[1] < mem):
            served.below_sum.append(node)
        rest = (max(want[0] - cpu, FLOOR[0]), max(want[1] - mem, FLOOR[1])) if want else FLOOR
        served.node_rest[node] = rest
        served.nodes[node] = (cpu + rest[0], mem + rest[1])
    return served


def annotate(pods: list[dict[str, Any]], served: ServedUsage) -> None:
    """Each planned pod gets its kwok usage annotations (in place)."""
    for pod in pods:
        ann = served.pod_annotations(pod)
        if ann:
            pod["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), **ann}
