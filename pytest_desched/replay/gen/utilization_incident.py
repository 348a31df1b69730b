"""The runbook's opening incident as a generated snapshot with usage recorded: a low-utilization
policy on actual usage over a whole pool of at least 100 nodes (issue 50).

Every node has 4 CPUs. Three *hot* nodes use about 85% of them by actual usage (a `checkout`
pod at 2 CPUs, a `cache` pod with an emptyDir at 1.2 CPUs, the node agent, and what the node
itself uses beyond its pods), twelve *cold* ones about 3%, the rest about 27% (two pods at
450m each): under LowNodeUtilization (thresholds cpu 20, targetThresholds cpu 50, on
`KubernetesMetrics`) the hot nodes are overutilized, the cold ones underutilized, the rest in
between. On each hot node one pod is evictable (`cache` has local storage, the agent is a
DaemonSet's), so the round evicts exactly the three `checkout` pods: `Incident.expected`.

By requests every node is under 16%, so the same policy on requests (or a replay with
`--assume-usage requests`) evicts nothing: the usage recorded is what makes the incident.
The node figures are recorded above their pods' sum (the kubelet and system daemons, 100-150m),
as a real NodeMetrics is, so the replay must serve the node's own figure (rebuild/usage.py).
"""

from __future__ import annotations

from typing import Any

import yaml

from pytest_desched.replay.capture.format import key
from pytest_desched.replay.capture.usage import SOURCE, figure, summary
from pytest_desched.replay.gen.generator import Gen
from pytest_desched.replay.gen.incidents import Incident, with_descheduler

NODE_CPU_M, NODE_MEM_MI = 4000, 16384
LOW, TARGET = 20, 50  # percent of allocatable CPU, by actual usage
MI = 1024 * 1024


def _policy() -> str:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": 1,
        "maxNoOfPodsToEvictTotal": 10,
        "evictionFailureEventNotification": True,
        "metricsProviders": [{"source": "KubernetesMetrics"}],
        "profiles": [
            {
                "name": "incident",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"nodeFit": True}},
                    {
                        "name": "LowNodeUtilization",
                        "args": {
                            "thresholds": {"cpu": LOW},
                            "targetThresholds": {"cpu": TARGET},
                            "metricsUtilization": {"source": "KubernetesMetrics"},
                        },
                    },
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
            }
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def utilization_hotspot(seed: int = 3, nodes: int = 102, hot: int = 3, cold: int = 12) -> Incident:
    """The incident (see the module docstring); `nodes` >= hot + cold + 1."""
    if nodes < hot + cold + 1 or hot < 1:
        raise ValueError(f"nodes={nodes}: at least hot + cold + 1 ({hot + cold + 1})")
    g = Gen(seed)
    g.basics()
    inc = Incident("utilization-hotspot", g.snap, "", story=__doc__ or "")
    names = [f"node-{i:03d}" for i in range(1, nodes + 1)]
    for i, n in enumerate(names):
        g.node(n, f"zone-{'abc'[i % 3]}", "general", cpu_m=NODE_CPU_M, mem_mi=NODE_MEM_MI)
    hot_nodes, mid_nodes = names[:hot], names[hot + cold :]  # the cold ones run the agent only
    g.namespace("shop", {"example.com/team": "shop"})
    use: dict[str, tuple[int, int]] = {}  # pod key -> (cpu m, memory bytes), as recorded

    def record(pods: list[dict[str, Any]], cpu: int, mem_mi: int) -> list[dict[str, Any]]:
        for p in pods:
            use[key(p)] = (cpu, mem_mi * MI)
        return pods

    agents = record(g.daemonset("kube-system", "node-agent", names), 30, 48)
    checkout = record(
        g.deployment("shop", "checkout", hot, hot_nodes, cpu="250m", placement=hot_nodes), 2000, 900
    )
    cache = record(
        g.deployment(
            "shop",
            "cache",
            hot,
            hot_nodes,
            cpu="250m",
            placement=hot_nodes,
            volumes=[{"name": "scratch", "emptyDir": {}}],
        ),
        1200,
        2048,
    )
    place = [n for n in mid_nodes for _ in range(2)]
    half = len(place) // 2
    web = record(
        g.deployment("shop", "web", half, mid_nodes, cpu="250m", placement=place[:half]), 450, 300
    )
    api = record(
        g.deployment(
            "shop", "api", len(place) - half, mid_nodes, cpu="250m", placement=place[half:]
        ),
        450,
        300,
    )
    system = {n: (150 if n in hot_nodes else 100, 512 * MI) for n in names}
    node_use = {n: list(system[n]) for n in names}
    for p in g.snap.pods:
        cpu, mem = use[key(p)]
        node_use[p["spec"]["nodeName"]][0] += cpu
        node_use[p["spec"]["nodeName"]][1] += mem
    g.snap.usage = {
        "source": SOURCE,
        "takenAt": g.snap.header["takenAt"],
        "nodes": {n: figure(c, m) for n, (c, m) in node_use.items()},
        "pods": {k: figure(c, m) for k, (c, m) in sorted(use.items())},
    }
    g.snap.header["usage"] = summary(g.snap.usage, len(g.snap.pods))
    for p in checkout:
        inc.expected[key(p)] = _fate("evicted", "api-server")
    for p in [*cache, *agents, *web, *api]:
        if key(p) not in inc.expected:
            inc.expected[key(p)] = _fate("not-evicted", None)
    inc.policy = _policy()
    return with_descheduler(g, inc)


def _fate(fate: str, layer: str | None) -> dict[str, Any]:
    return {"fate": fate, "layer": layer, "checks": [], "status_code": None}


def evicted(inc: Incident) -> set[str]:
    """The pods the incident's round evicts (by namespace/name)."""
    return {p for p, want in inc.expected.items() if want["fate"] == "evicted"}
