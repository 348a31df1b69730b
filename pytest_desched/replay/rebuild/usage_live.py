"""The replay cluster's side of served usage (rebuild/usage.py decides what): where kwok serves
kubelet endpoints, the per-node usage pods, and the wait until metrics-server serves every
figure the round will read, so round 1 never reads a node as missing or idle."""

from __future__ import annotations

import time
from typing import Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import wait_for
from pytest_desched.log import Reporter
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.usage import NODES_PATH, PODS_PATH, cpu_m, mem_b
from pytest_desched.replay.objects import object_path
from pytest_desched.replay.rebuild.usage import ServedUsage
from pytest_desched.replay.rebuild.writes import create_all

# The provider's own idle-usage pods (providers/embedded/metrics_server.baseline_pod): bound
# to its workers, which the restore deletes, so they go with them.
PROVIDER_BASELINE_PREFIX = "node-baseline-"
# metrics-server serves a CPU rate over two scrapes of kwok's cumulative counter, which kwok
# computes at the moment it answers: on a loaded machine (load 38 on 2 cores) the served rate
# of a 1030m node moved between 980m and 1110m from scrape to scrape (measured, 102 nodes),
# and the descheduler reads one such sample. Memory is the annotation itself.
CPU_TOLERANCE_M, CPU_TOLERANCE_SHARE = 10, 0.10
MEM_TOLERANCE_B = 1024 * 1024


def kubelet_endpoint(api: Any, workers: list[str]) -> dict[str, Any] | None:
    """{address, daemonEndpoints} of a node kwok initialized (the provider's worker): where
    it serves every node's kubelet endpoints; None when no worker has them."""
    for w in workers:
        node = kubeapi.get_or_none(api, object_path("Node", None, w)) or {}
        st = node.get("status") or {}
        ip = next(
            (a["address"] for a in st.get("addresses") or [] if a.get("type") == "InternalIP"),
            None,
        )
        port = ((st.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
        if ip and port:
            return {"address": ip, "daemonEndpoints": st["daemonEndpoints"]}
    return None


def drop_provider_baselines(api: Any, workers: list[str]) -> None:
    """The provider's idle-usage pods of the workers the restore deletes (not incident pods)."""
    for w in workers:
        path = object_path("Pod", "kube-system", f"{PROVIDER_BASELINE_PREFIX}{w}")
        try:
            kubeapi.request(api, "DELETE", path, {"gracePeriodSeconds": 0})
        except ApiException as exc:
            if exc.status != 404:
                raise


def _close(got: int, want: int) -> bool:
    return abs(got - want) <= max(CPU_TOLERANCE_M, want * CPU_TOLERANCE_SHARE)


def serve(
    api: Any,
    served: ServedUsage,
    image: str,
    runner: str | None,
    timeout: float,
    report: Reporter,
    wait: bool = True,
) -> dict[str, Any]:
    """Create each node's usage pod, then wait until metrics-server serves every node at its
    planned figure (CPU within 10m or 10%, memory within 1Mi) and every pod with a figure; the
    runner node too (the descheduler's usage client refuses a round with a node it lacks).
    Returns the facts for the restore's result; on timeout fails naming what was missing.
    `wait=False` (a policy that reads no usage): served, not waited for (two scrapes, ~25 s)."""
    if runner is not None:
        served.node_rest.setdefault(runner, (1, 1024 * 1024))
    t0 = time.monotonic()
    create_all(api, served.node_pods(image), tolerate_exists=True)
    facts: dict[str, Any] = {
        "origin": served.origin,
        "pods": len(served.pods),
        "nodes": len(served.nodes),
        "pods_without": served.pods_without,
        "below_sum": served.below_sum,
    }
    if not wait:
        report("usage: served; not waited for (the policy reads no actual utilization)")
        return {**facts, "served_in_s": None, "waited": False}
    report(
        f"usage: {len(served.pods)} pods and {len(served.nodes)} nodes to serve "
        f"({served.origin}); waiting for metrics-server to scrape them (two scrapes, ~10 s each)"
    )
    want_nodes = dict(served.nodes)
    pods = set(served.pods)

    def probe() -> tuple[dict[str, tuple[int, int]], set[str]]:
        try:
            nodes = kubeapi.list_all(api, NODES_PATH)
            listed = kubeapi.list_all(api, PODS_PATH)
        except ApiException as exc:
            if exc.status in (404, 503):  # the APIService not available yet
                return {}, set()
            raise
        got = {
            str(n["metadata"]["name"]): (cpu_m(n["usage"]["cpu"]), mem_b(n["usage"]["memory"]))
            for n in nodes
            if "cpu" in (n.get("usage") or {})
        }
        have = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in listed}
        return got, have

    def missing(seen: tuple[dict[str, tuple[int, int]], set[str]]) -> list[str]:
        got, have = seen
        off = [
            n
            for n, (cpu, mem) in want_nodes.items()
            if n not in got or not _close(got[n][0], cpu) or abs(got[n][1] - mem) > MEM_TOLERANCE_B
        ]
        if runner is not None and runner not in got:
            off.append(runner)
        return off + sorted(pods - have)

    def describe(seen: tuple[dict[str, tuple[int, int]], set[str]]) -> str:
        got, _ = seen
        left = missing(seen)
        shown = [f"{x} (served {got.get(x)}, planned {want_nodes.get(x)})" for x in left[:5]]
        return f"{len(left)} not served as planned: {shown}"

    got, _ = wait_for(
        "metrics-server to serve the snapshot's usage",
        probe,
        lambda seen: not missing(seen),
        timeout=timeout,
        describe=describe,
        max_interval=2.0,
        progress=report,
    )
    dev = max((abs(got[n][0] - c) for n, (c, _) in want_nodes.items()), default=0)
    waited = round(time.monotonic() - t0, 1)
    report(f"usage: metrics-server serves every node and pod as planned ({waited}s)")
    return {
        **facts,
        "waited": True,
        "served_in_s": waited,
        "max_node_cpu_deviation_m": dev,
        "nodes_served": {n: {"cpu_m": c, "memory": m} for n, (c, m) in sorted(got.items())},
    }
