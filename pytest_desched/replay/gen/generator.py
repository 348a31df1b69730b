"""Deterministic realistic clusters in the snapshot format, for tests, benchmarks and incidents.

Same seed, same file, byte for byte (`random.Random(seed)`, a fixed `takenAt`, UIDs drawn
from the same generator). A cluster has zones, node pools (general, batch, system with a
dedicated taint), kube-system DaemonSets (one with a hostPath: local storage) and a
system-critical DNS Deployment, per team namespace Deployments (some with PDBs, some with
emptyDir), StatefulSets with PVCs bound to local PVs, priority classes, a few bare pods.
Pods are placed first-fit on the nodes their selectors allow, within allocatable.

The incidents built on it live in `incidents`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.gen.genbase import (
    CPU,
    HOST_LABEL,
    MEM,
    NODE_POOL_LABEL,
    SYSTEM_TAINT,
    GenBase,
)


@dataclass(frozen=True)
class Shape:
    """How big and how varied a generated cluster is."""

    seed: int = 1
    nodes: int = 12
    pods: int = 120  # a target: DaemonSets add one pod per eligible node
    zones: int = 3
    teams: int = 3
    batch_share: float = 0.2
    system_share: float = 0.1
    node_cpu_m: int = 16000
    node_mem_mi: int = 65536
    node_pods: int = 110


class Gen(GenBase):
    """Builds one snapshot: workloads on top of the primitives."""

    def owner(
        self, kind: str, ns: str, name: str, spec: dict[str, Any], section: str
    ) -> dict[str, Any]:
        created, _ = self.age(86400, 60 * 86400)
        obj = {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": self.uid(),
                "labels": dict(spec["template"]["metadata"]["labels"]),
                "creationTimestamp": created,
                "generation": 1,
            },
            "spec": spec,
            "status": {},
        }
        self.snap.items(section).append(obj)
        self.kind[id(obj)] = kind
        return obj

    def deployment(
        self,
        ns: str,
        name: str,
        replicas: int,
        nodes: list[str],
        cpu: str = "100m",
        mem: str = "128Mi",
        pdb: dict[str, Any] | None = None,
        placement: list[str] | None = None,
        **tmpl_kw: Any,
    ) -> list[dict[str, Any]]:
        h = self.suffix(10)
        labels = {"app": name}
        tmpl = self.template(labels, cpu, mem, **tmpl_kw)
        dep = self.owner(
            "Deployment",
            ns,
            name,
            {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": tmpl,
                "strategy": {"type": "RollingUpdate"},
            },
            "deployments",
        )
        dep["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "1"}
        rs_tmpl = {"metadata": {"labels": {**labels, "pod-template-hash": h}}, "spec": tmpl["spec"]}
        rs = self.owner(
            "ReplicaSet",
            ns,
            f"{name}-{h}",
            {
                "replicas": replicas,
                "selector": {"matchLabels": {**labels, "pod-template-hash": h}},
                "template": rs_tmpl,
            },
            "replicaSets",
        )
        rs["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "1"}
        rs["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": name,
                "uid": dep["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        start = self.rng.randrange(len(nodes)) if nodes else 0
        pods = []
        for i in range(replicas):
            node = placement[i] if placement else self.place(nodes, cpu, mem, start + i)
            pods.append(
                self.pod(
                    ns,
                    self.pod_name(ns, rs["metadata"]["name"]),
                    node,
                    rs_tmpl,
                    rs,
                    priority=self.prio(tmpl),
                )
            )
        if pdb is not None:
            self.pdb(ns, name, labels, pdb, replicas)
        return pods

    def prio(self, tmpl: dict[str, Any]) -> int:
        name = tmpl["spec"].get("priorityClassName")
        if not name:
            return 0
        if name in ("system-cluster-critical", "system-node-critical"):
            return 2000000000 if name == "system-cluster-critical" else 2000001000
        return next(
            int(pc["value"])
            for pc in self.snap.items("priorityClasses")
            if pc["metadata"]["name"] == name
        )

    def pdb(
        self, ns: str, name: str, labels: dict[str, str], spec: dict[str, Any], replicas: int
    ) -> None:
        want = spec.get("minAvailable", replicas - int(spec.get("maxUnavailable", 0)))
        self.snap.items("podDisruptionBudgets").append(
            {
                "metadata": {"name": name, "namespace": ns, "uid": self.uid(), "generation": 1},
                "spec": {**spec, "selector": {"matchLabels": labels}},
                "status": {
                    "currentHealthy": replicas,
                    "desiredHealthy": want,
                    "disruptionsAllowed": max(0, replicas - want),
                    "expectedPods": replicas,
                },
            }
        )

    def daemonset(
        self,
        ns: str,
        name: str,
        nodes: list[str],
        cpu: str = "100m",
        mem: str = "128Mi",
        **tmpl_kw: Any,
    ) -> list[dict[str, Any]]:
        labels = {"app": name}
        tmpl = self.template(labels, cpu, mem, tolerations=[{"operator": "Exists"}], **tmpl_kw)
        ds = self.owner(
            "DaemonSet",
            ns,
            name,
            {
                "selector": {"matchLabels": labels},
                "template": tmpl,
                "updateStrategy": {"type": "RollingUpdate"},
            },
            "daemonSets",
        )
        h = self.suffix(10)
        pods = []
        for n in nodes:
            t = {
                "metadata": tmpl["metadata"],
                "spec": {
                    **tmpl["spec"],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {
                                                "key": "metadata.name",
                                                "operator": "In",
                                                "values": [n],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                },
            }
            pods.append(
                self.pod(
                    ns,
                    self.pod_name(ns, name),
                    n,
                    t,
                    ds,
                    {"controller-revision-hash": h},
                    priority=self.prio(tmpl),
                )
            )
        return pods

    def statefulset(
        self,
        ns: str,
        name: str,
        replicas: int,
        nodes: list[str],
        cpu: str = "250m",
        mem: str = "512Mi",
    ) -> list[dict[str, Any]]:
        labels = {"app": name}
        tmpl = self.template(labels, cpu, mem, volumes=None)
        tmpl["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        sts = self.owner(
            "StatefulSet",
            ns,
            name,
            {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "serviceName": name,
                "template": tmpl,
                "updateStrategy": {"type": "RollingUpdate"},
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                            "storageClassName": "local-ssd",
                        },
                    }
                ],
            },
            "statefulSets",
        )
        h = self.suffix(10)
        pods = []
        start = self.rng.randrange(len(nodes))
        for i in range(replicas):
            node = self.place(nodes, cpu, mem, start + i)
            claim, pv = f"data-{name}-{i}", f"pv-{ns}-{name}-{i}"
            self.snap.items("persistentVolumes").append(
                {
                    "metadata": {"name": pv, "uid": self.uid()},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local-ssd",
                        "claimRef": {"namespace": ns, "name": claim},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": HOST_LABEL, "operator": "In", "values": [node]}
                                        ]
                                    }
                                ]
                            }
                        },
                        "persistentVolumeReclaimPolicy": "Retain",
                        "_source": "local",
                    },
                    "status": {"phase": "Bound"},
                }
            )
            self.snap.items("persistentVolumeClaims").append(
                {
                    "metadata": {
                        "name": claim,
                        "namespace": ns,
                        "uid": self.uid(),
                        "labels": labels,
                    },
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": "local-ssd",
                        "volumeName": pv,
                    },
                    "status": {"phase": "Bound"},
                }
            )
            t = {
                "metadata": tmpl["metadata"],
                "spec": {
                    **tmpl["spec"],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
                },
            }
            pods.append(
                self.pod(
                    ns,
                    f"{name}-{i}",
                    node,
                    t,
                    sts,
                    {
                        "controller-revision-hash": f"{name}-{h}",
                        "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
                        "apps.kubernetes.io/pod-index": str(i),
                    },
                )
            )
        return pods

    def bare(self, ns: str, name: str, node: str, **tmpl_kw: Any) -> dict[str, Any]:
        return self.pod(
            ns, name, node, self.template({"run": name}, "100m", "128Mi", **tmpl_kw), None
        )

    def basics(self) -> None:
        self.namespace("kube-system")
        self.namespace("default")
        pcs = self.snap.items("priorityClasses")
        pcs.append({"metadata": {"name": "high-priority", "uid": self.uid()}, "value": 100000})
        pcs.append(
            {
                "metadata": {"name": "batch-low", "uid": self.uid()},
                "value": -10,
                "preemptionPolicy": "Never",
            }
        )
        self.snap.items("storageClasses").append(
            {
                "metadata": {"name": "local-ssd", "uid": self.uid()},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Retain",
            }
        )


def affinity_in(
    key: str, values: list[str], extra: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    exprs = [{"key": key, "operator": "In", "values": values}, *(extra or [])]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": exprs}]
            }
        }
    }


# -- realistic clusters ---------------------------------------------------------------------
def generate(shape: Shape | None = None, **kw: Any) -> Snapshot:
    """A realistic cluster of `shape` (or `Shape(**kw)`); deterministic per seed."""
    shape = shape or Shape(**kw)
    if shape.nodes < 3 or shape.pods < shape.nodes:
        raise ValueError("a generated cluster needs nodes >= 3 and pods >= nodes")
    g = Gen(shape.seed)
    g.basics()
    zones = [f"zone-{string.ascii_lowercase[i]}" for i in range(shape.zones)]
    n_sys = max(1, round(shape.nodes * shape.system_share))
    n_batch = max(1, round(shape.nodes * shape.batch_share))
    pools = ["system"] * n_sys + ["batch"] * n_batch + ["general"] * (shape.nodes - n_sys - n_batch)
    names: dict[str, list[str]] = {"system": [], "batch": [], "general": []}
    for i, pool in enumerate(pools):
        zone = zones[i % len(zones)]
        name = f"node-{zone[-1]}-{pool}-{i:04d}"
        g.node(
            name,
            zone,
            pool,
            taints=[SYSTEM_TAINT] if pool == "system" else None,
            cpu_m=shape.node_cpu_m,
            mem_mi=shape.node_mem_mi,
            pods=shape.node_pods,
        )
        names[pool].append(name)
    every = [n["metadata"]["name"] for n in g.snap.nodes]
    g.daemonset("kube-system", "node-agent", every, priority_class="system-node-critical")
    g.daemonset(
        "kube-system",
        "log-shipper",
        every,
        volumes=[{"name": "varlog", "hostPath": {"path": "/var/log", "type": "Directory"}}],
    )
    sys_tol = [
        {"key": SYSTEM_TAINT["key"], "operator": "Equal", "value": "system", "effect": "NoSchedule"}
    ]
    g.deployment(
        "kube-system",
        "cluster-dns",
        max(2, shape.nodes // 100),
        names["system"],
        cpu="250m",
        mem="256Mi",
        pdb={"maxUnavailable": 1},
        priority_class="system-cluster-critical",
        node_selector={NODE_POOL_LABEL: "system"},
        tolerations=sys_tol,
    )
    budget = shape.pods - len(g.snap.pods)
    teams = [f"team-{string.ascii_lowercase[i]}" for i in range(shape.teams)]
    for t in teams:
        g.namespace(t, {"example.com/team": t})
    for i, t in enumerate(teams):  # one bare pod per team: someone's `kubectl run`
        if budget > 0:
            g.bare(t, f"debug-{t}", g.place(names["general"], "100m", "128Mi", i))
            budget -= 1
    d = 0
    while budget > 0:
        team = teams[d % len(teams)]
        kind = g.rng.random()
        if kind < 0.08 and budget >= 3:
            budget -= len(g.statefulset(team, f"db-{d}", 3, names["general"]))
        elif kind < 0.25 and budget >= 2 and g.room(names["batch"], "500m", "256Mi", 10):
            n = min(budget, g.rng.randint(2, 10))
            budget -= len(
                g.deployment(
                    team,
                    f"batch-{d}",
                    n,
                    names["batch"],
                    cpu=g.rng.choice(["250m", "500m"]),
                    mem="256Mi",
                    priority_class="batch-low",
                    affinity=affinity_in(NODE_POOL_LABEL, ["batch"]),
                )
            )
        elif kind < 0.27:
            budget -= 1
            g.bare(team, f"debug-{d}", g.place(names["general"], "100m", "128Mi", d))
        else:
            n = min(budget, g.rng.randint(2, 8))
            pdb = g.rng.choice([None, {"maxUnavailable": 1}, {"minAvailable": max(1, n - 1)}])
            local = g.rng.random() < 0.15
            budget -= len(
                g.deployment(
                    team,
                    f"svc-{d}",
                    n,
                    names["general"],
                    cpu=g.rng.choice(list(CPU)[:3]),
                    mem=g.rng.choice(list(MEM)[:3]),
                    pdb=pdb,
                    priority_class=g.rng.choice([None, None, "high-priority"]),
                    volumes=[{"name": "cache", "emptyDir": {}}] if local else None,
                )
            )
        d += 1
    return g.snap
