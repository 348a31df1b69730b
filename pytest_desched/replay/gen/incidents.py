"""The two incidents: small generated clusters whose every pod has one known fate under the
incident's policy (`Incident.expected`: fate, layer and checks per pod), so a replay can be
checked pod by pod: (a) `label_move`: a pool label moved to other nodes, so pods violate their
required node affinity; (b) `pdb_drain`: a node tainted for maintenance and cordoned, whose
pods are evicted unless a PDB at minAvailable refuses (429).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.gen.genbase import NODE_POOL_LABEL, SYSTEM_TAINT, ZONE_LABEL
from pytest_desched.replay.gen.generator import Gen, affinity_in


@dataclass
class Incident:
    """A snapshot, the policy it ran with, and each pod's expected fate in round 1."""

    name: str
    snapshot: Snapshot
    policy: str
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod -> fate facts
    story: str = ""


def with_descheduler(g: Gen, inc: Incident) -> Incident:
    """The incident's snapshot as a capture of a v0.36.0 CronJob running `inc.policy` would
    file it: the policy, the descheduler it names and a note naming the incident."""
    g.snap.policy = inc.policy
    g.snap.header["descheduler"] = {
        "kind": "CronJob",
        "namespace": "kube-system",
        "name": "descheduler",
        "version": "v0.36.0",
        "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
    }
    g.snap.header["notes"].append(f"incident: {inc.name}")
    return inc


def _policy(deschedule: dict[str, Any], extra_enabled: list[str] | None = None) -> str:
    import yaml

    name = deschedule["name"]
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "evictionFailureEventNotification": True,
        "profiles": [
            {
                "name": "incident",
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {
                            "nodeFit": True,
                            **(
                                {"podProtections": {"extraEnabled": extra_enabled}}
                                if extra_enabled
                                else {}
                            ),
                        },
                    },
                    deschedule,
                ],
                "plugins": {"deschedule": {"enabled": [name]}},
            }
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _expect(
    inc: Incident,
    pods: Iterable[dict[str, Any]],
    fate: str,
    layer: str,
    checks: list[str] | None = None,
    code: int | None = None,
) -> None:
    for p in pods:
        k = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        inc.expected[k] = {
            "fate": fate,
            "layer": layer,
            "checks": checks or [],
            "status_code": code,
        }


def _common(g: Gen, nodes: list[str], inc: Incident, system_nodes: list[str]) -> None:
    """DaemonSet pods everywhere, critical DNS: filtered by the evictor in every incident."""
    _expect(
        inc,
        g.daemonset("kube-system", "node-agent", nodes),
        "filtered",
        "evictor-filter",
        ["DaemonSetPods"],
    )
    dns = g.deployment(
        "kube-system",
        "cluster-dns",
        2,
        system_nodes,
        priority_class="system-cluster-critical",
        tolerations=[{"key": SYSTEM_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
        node_selector={NODE_POOL_LABEL: "system"},
    )
    # v0.36.0 defaults priorityThreshold to the system-critical value: both checks fail
    _expect(inc, dns, "filtered", "evictor-filter", ["SystemCriticalPods", "priorityThreshold"])


def label_move(seed: int = 1) -> Incident:
    """(a) The pool label moved from two zone-a nodes to two zone-b nodes; pods pinned to the
    pool by required node affinity now violate it. Expected, per workload: evicted (its PDB
    allows it), 429 (PDB at minAvailable), filtered (local storage, PVC, bare), nodeFit (also
    pinned to zone-a, where no pool node is left), and not picked (no affinity)."""
    g = Gen(seed)
    g.basics()
    inc = Incident("label-move", g.snap, "", story=label_move.__doc__ or "")
    g.node("node-a-sys-1", "zone-a", "system", taints=[SYSTEM_TAINT])
    g.node("node-b-sys-2", "zone-b", "system", taints=[SYSTEM_TAINT])
    old = ["node-a-pool-1", "node-a-pool-2"]
    for n in old:  # the label was here when the pods were scheduled, and is gone now
        g.node(n, "zone-a", None)
    new = ["node-b-gen-3", "node-b-gen-4"]
    for n in new:
        g.node(n, "zone-b", "batch")
    general = ["node-a-gen-5", "node-b-gen-6"]
    for n in general:
        g.node(n, "zone-a" if n.startswith("node-a") else "zone-b", "general")
    nodes = [n["metadata"]["name"] for n in g.snap.nodes]
    _common(g, nodes, inc, ["node-a-sys-1", "node-b-sys-2"])
    g.namespace("data", {"example.com/team": "data"})
    pool = affinity_in(NODE_POOL_LABEL, ["batch"])
    place = [old[i % 2] for i in range(4)]
    _expect(
        inc,
        g.deployment(
            "data", "etl", 4, old, placement=place, pdb={"maxUnavailable": 4}, affinity=pool
        ),
        "evicted",
        "api-server",
    )
    _expect(
        inc,
        g.deployment(
            "data",
            "etl-guarded",
            3,
            old,
            placement=place[:3],
            pdb={"minAvailable": 3},
            affinity=pool,
        ),
        "refused",
        "api-server",
        code=429,
    )
    _expect(
        inc,
        g.deployment(
            "data",
            "scratch",
            2,
            old,
            placement=place[:2],
            affinity=pool,
            volumes=[{"name": "tmp", "emptyDir": {}}],
        ),
        "filtered",
        "evictor-filter",
        ["PodsWithLocalStorage"],
    )
    zone_pinned = affinity_in(
        NODE_POOL_LABEL, ["batch"], [{"key": ZONE_LABEL, "operator": "In", "values": ["zone-a"]}]
    )
    _expect(
        inc,
        g.deployment("data", "etl-zone-a", 2, old, placement=place[:2], affinity=zone_pinned),
        "nodefit",
        "evictor-prefilter-nodefit",
        ["nodeFit"],
    )
    _expect(inc, g.statefulset("data", "kv", 2, old), "filtered", "evictor-filter", ["PodsWithPVC"])
    _expect(
        inc,
        [g.bare("data", "adhoc", old[0], affinity=pool)],
        "filtered",
        "evictor-filter",
        ["FailedBarePods"],
    )
    _expect(
        inc,
        g.deployment("data", "web", 4, general, pdb={"maxUnavailable": 1}),
        "not-picked",
        "policy",
    )
    inc.policy = _policy(
        {
            "name": "RemovePodsViolatingNodeAffinity",
            "args": {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]},
        },
        ["PodsWithPVC"],
    )
    return with_descheduler(g, inc)


def pdb_drain(seed: int = 2) -> Incident:
    """(b) A node tainted for maintenance and cordoned (a drain): RemovePodsViolatingNodeTaints
    evicts its pods, except one whose PDB is at minAvailable (429 from the API server); DaemonSet
    and critical pods are filtered; a pod tolerating the taint and pods elsewhere are not
    picked."""
    g = Gen(seed)
    g.basics()
    inc = Incident("pdb-drain", g.snap, "", story=pdb_drain.__doc__ or "")
    maint = {"key": "example.com/maintenance", "value": "drain", "effect": "NoSchedule"}
    g.node("node-a-sys-1", "zone-a", "system", taints=[SYSTEM_TAINT])
    g.node("node-b-sys-2", "zone-b", "system", taints=[SYSTEM_TAINT])
    drained = "node-a-gen-1"
    g.node(drained, "zone-a", "general")
    others = ["node-a-gen-2", "node-b-gen-3", "node-b-gen-4"]
    for n in others:
        g.node(n, "zone-a" if n.startswith("node-a") else "zone-b", "general")
    nodes = [n["metadata"]["name"] for n in g.snap.nodes]
    _common(g, nodes, inc, ["node-a-sys-1", "node-b-sys-2"])
    g.namespace("shop", {"example.com/team": "shop"})
    api = g.deployment(
        "shop", "api", 3, others, placement=[drained, others[0], others[1]], pdb={"minAvailable": 3}
    )
    _expect(inc, api[:1], "refused", "api-server", code=429)
    _expect(inc, api[1:], "not-picked", "policy")
    worker = g.deployment(
        "shop", "worker", 2, others, placement=[drained, drained], pdb={"maxUnavailable": 2}
    )
    _expect(inc, worker, "evicted", "api-server")
    tol = g.deployment(
        "shop",
        "maint-agent",
        1,
        others,
        placement=[drained],
        tolerations=[
            {"key": maint["key"], "operator": "Exists"},
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
        ],
    )
    _expect(inc, tol, "not-picked", "policy")
    _expect(
        inc,
        g.deployment("shop", "cart", 3, others, pdb={"maxUnavailable": 1}),
        "not-picked",
        "policy",
    )
    # the drain: the taint and the cordon come after the pods were placed
    node = g.node_obj(drained)
    node["spec"] = {
        "unschedulable": True,
        "taints": [maint, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    }
    inc.policy = _policy({"name": "RemovePodsViolatingNodeTaints", "args": {}})
    return with_descheduler(g, inc)


INCIDENTS = {"label-move": label_move, "pdb-drain": pdb_drain}
