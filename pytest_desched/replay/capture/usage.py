"""Actual usage in a snapshot: what `metrics.k8s.io` served for each node and pod when it was
taken, so a utilization incident replays with the usage it saw (issue 50).

The snapshot's `usage` section (format.Snapshot.usage), beside `objects`:

    usage:
      source: metrics.k8s.io/v1beta1
      takenAt: 2026-12-06T19:00:00Z        # when the figures were read
      nodes: {node-1: {cpu: 2150m, memory: "8589934592"}}   # NodeMetrics: the node's own figure
      pods: {shop/api-7d9-x2: {cpu: 800m, memory: "134217728"}}  # PodMetrics, containers summed

CPU in millicores, memory in bytes: one unit each, so a replay and a reader never convert.
Why a section of its own and not annotations on the pods: the figures are the metrics source's,
not the objects', and the node's figure is not its pods' sum (the kubelet, the runtime, system
daemons and pods outside a scoped snapshot use CPU too); the replay serves both (rebuild/usage.py).

Old snapshots have no section and still load (`Snapshot.usage` None); the header says why
none was recorded (`header.usage.recorded: false` with `why`). Reading it is two list requests
(nodes, pods; per namespace when scoped), never a write: the snapshot stays read-only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_desched.log import Reporter
from pytest_desched.replay.objects import KINDS, collection_path

SOURCE = KINDS["NodeMetrics"].api_version  # metrics.k8s.io/v1beta1
USAGE_GROUP = KINDS["NodeMetrics"].group
USAGE_RESOURCES = (KINDS["NodeMetrics"].plural, KINDS["PodMetrics"].plural)  # listed only
NODES_PATH = collection_path("NodeMetrics")
PODS_PATH = collection_path("PodMetrics")
NO_USAGE = "no usage recorded"


def cpu_m(value: Any) -> int:
    """A CPU quantity in millicores, rounded up ("250m", "1", "1500000n" -> 2)."""
    from kubernetes.utils.quantity import parse_quantity  # heavy: the kubernetes package

    return math.ceil(parse_quantity(str(value)) * 1000)


def mem_b(value: Any) -> int:
    """A memory quantity in bytes, rounded up."""
    from kubernetes.utils.quantity import parse_quantity  # heavy: the kubernetes package

    return math.ceil(parse_quantity(str(value)))


def figure(cpu: int, memory: int) -> dict[str, str]:
    """One usage entry as the snapshot writes it: millicores and bytes."""
    return {"cpu": f"{cpu}m", "memory": str(memory)}


def parse_figure(entry: Mapping[str, Any]) -> tuple[int, int]:
    """(millicores, bytes) of one entry; ValueError names what is wrong."""
    try:
        return cpu_m(entry["cpu"]), mem_b(entry["memory"])
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
        raise ValueError(f"{dict(entry)!r} is not {{cpu, memory}} quantities ({exc})") from None


def problems(usage: Any, nodes: set[str]) -> list[str]:
    """What is wrong with a `usage` section, one line each (the snapshot refuses to load)."""
    if not isinstance(usage, Mapping):
        return [f"usage: is {type(usage).__name__}, not a mapping"]
    out: list[str] = []
    for what in ("nodes", "pods"):
        for name, entry in (usage.get(what) or {}).items():
            try:
                parse_figure(entry if isinstance(entry, Mapping) else {})
            except ValueError as exc:
                out.append(f"usage.{what}.{name}: {exc}")
                if len(out) >= 5:
                    return out
    stray = sorted(set(usage.get("nodes") or {}) - nodes)
    if stray:
        out.append(f"usage.nodes names {len(stray)} nodes the snapshot lacks, e.g. {stray[:3]}")
    return out


def summary(usage: Mapping[str, Any] | None, pods: int) -> dict[str, Any]:
    """The header's `usage` line: recorded or not, how much, from where."""
    if not usage:
        return {"recorded": False}
    n, p = len(usage.get("nodes") or {}), len(usage.get("pods") or {})
    return {
        "recorded": True,
        "source": usage.get("source", SOURCE),
        "takenAt": usage.get("takenAt"),
        "nodes": n,
        "pods": p,
        "podsWithout": max(pods - p, 0),
    }


def read_usage(
    api: Any,
    namespaces: list[str] | None,
    node_names: set[str],
    pod_keys: set[str],
    add_read: Any,
    report: Reporter,
    taken_at: str,
) -> tuple[dict[str, Any] | None, str | None]:
    """(usage section, None) from `metrics.k8s.io`, or (None, why none was recorded).

    Only the snapshot's nodes and pods are kept (a scoped snapshot lists its namespaces).
    `add_read(verb, what)` records each request (snapshot.Reads: list only).
    """
    # heavy: the kubernetes client, kept out of the snapshot format's import
    from kubernetes.client.rest import ApiException

    from pytest_desched.replay import kubeapi  # heavy: the kubernetes client

    def listed(path: str, what: str) -> list[dict[str, Any]]:
        add_read("list", what)
        return kubeapi.list_all(api, path)

    report("snapshot: reading usage from metrics.k8s.io (nodes, pods)")
    try:
        node_items = listed(NODES_PATH, "nodes.metrics.k8s.io")
        pod_items: list[dict[str, Any]] = []
        for ns in namespaces or [""]:
            path = collection_path("PodMetrics", ns or None)
            pod_items += listed(path, f"pods.metrics.k8s.io{f' in {ns}' if ns else ''}")
    except ApiException as exc:
        why = {
            404: "the cluster serves no metrics.k8s.io (no metrics-server)",
            503: "metrics.k8s.io is registered but its server is unavailable",
            403: "this identity may not list metrics.k8s.io (grant list on nodes and pods there)",
        }.get(exc.status or 0, f"metrics.k8s.io answered HTTP {exc.status}")
        report(f"snapshot: {NO_USAGE}: {why}")
        return None, f"{NO_USAGE}: {why}"
    nodes = {}
    for it in node_items:
        name = (it.get("metadata") or {}).get("name")
        u = it.get("usage") or {}
        if name in node_names and "cpu" in u and "memory" in u:
            nodes[name] = figure(cpu_m(u["cpu"]), mem_b(u["memory"]))
    pods = {}
    for it in pod_items:
        m = it.get("metadata") or {}
        k = f"{m.get('namespace')}/{m.get('name')}"
        containers = it.get("containers") or []
        if k not in pod_keys or not containers:
            continue
        cpu = sum(cpu_m((c.get("usage") or {}).get("cpu", "0")) for c in containers)
        mem = sum(mem_b((c.get("usage") or {}).get("memory", "0")) for c in containers)
        pods[k] = figure(cpu, mem)
    if not nodes:
        why = f"metrics.k8s.io served no figure for any of the {len(node_names)} nodes"
        report(f"snapshot: {NO_USAGE}: {why}")
        return None, f"{NO_USAGE}: {why}"
    report(
        f"snapshot: usage of {len(nodes)}/{len(node_names)} nodes and {len(pods)}/"
        f"{len(pod_keys)} pods recorded from {SOURCE}"
    )
    return {"source": SOURCE, "takenAt": taken_at, "nodes": nodes, "pods": pods}, None
