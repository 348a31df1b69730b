"""Deterministic realistic clusters in the snapshot format, for tests, benchmarks and incidents.

Same seed, same file, byte for byte (`random.Random(seed)`, a fixed `takenAt`, UIDs drawn
from the same generator). A cluster has zones, node pools (general, batch, system with a
dedicated taint), kube-system DaemonSets (one with a hostPath: local storage) and a
system-critical DNS Deployment, per team namespace Deployments (some with PDBs, some with
emptyDir), StatefulSets with PVCs bound to local PVs, priority classes, a few bare pods.
Pods are placed first-fit on the nodes their selectors allow, within allocatable.

The two incidents are small clusters whose every pod has one known fate under the incident's
policy (`Incident.expected`: fate, layer and checks per pod), so a replay can be checked pod
by pod: (a) `label_move`: a pool label moved to other nodes, so pods violate their required
node affinity; (b) `pdb_drain`: a node tainted for maintenance and cordoned, whose pods are
evicted unless a PDB at minAvailable refuses (429).
"""

from __future__ import annotations

import datetime as dt
import random
import string
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.replay.format import Snapshot, rfc3339

TAKEN_AT = dt.datetime(2026, 1, 15, 12, 0, 0, tzinfo=dt.UTC)
POOL_LABEL = "example.com/pool"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOST_LABEL = "kubernetes.io/hostname"
SYSTEM_TAINT = {"key": "example.com/dedicated", "value": "system", "effect": "NoSchedule"}
IMAGE = "registry.k8s.io/pause:3.10"
_CPU = {"100m": 100, "250m": 250, "500m": 500, "1": 1000}
_MEM = {"128Mi": 128, "256Mi": 256, "512Mi": 512, "1Gi": 1024}


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


class _Gen:
    """Builds one snapshot; all randomness from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.snap = Snapshot(
            header={
                "takenAt": rfc3339(TAKEN_AT),
                "source": {"serverVersion": "v1.36.3", "context": f"generated-{seed}"},
                "takenWith": {"exporter": f"pytest_desched.replay.generator (seed {seed})"},
                "filtered": {"secrets": 0, "serviceAccounts": 0},
                "redacted": False,
                "notes": ["generated, not taken from a cluster"],
            },
            objects={},
        )
        self.kind: dict[int, str] = {}  # id(owner object) -> its kind (sections imply kinds)
        self.names: set[tuple[str, str]] = set()  # generated pod names, per namespace
        self.used: dict[str, list[int]] = {}  # node -> [cpu_m, mem_mi, pods]
        self.alloc: dict[str, tuple[int, int, int]] = {}

    # -- primitives -------------------------------------------------------------------
    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))

    def pod_name(self, ns: str, prefix: str) -> str:
        """`prefix-xxxxx`, as a controller names pods, never twice in one namespace."""
        while True:
            name = f"{prefix}-{self.suffix()}"
            if (ns, name) not in self.names:
                self.names.add((ns, name))
                return name

    def age(self, lo_s: int = 3600, hi_s: int = 30 * 86400) -> tuple[str, str]:
        created = TAKEN_AT - dt.timedelta(seconds=self.rng.randint(lo_s, hi_s))
        return rfc3339(created), rfc3339(created + dt.timedelta(seconds=self.rng.randint(2, 20)))

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.snap.items("namespaces").append(
            {
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
                },
                "status": {"phase": "Active"},
            }
        )

    def node(
        self,
        name: str,
        zone: str,
        pool: str | None,
        taints: list[dict[str, Any]] | None = None,
        unschedulable: bool = False,
        cpu_m: int = 16000,
        mem_mi: int = 65536,
        pods: int = 110,
    ) -> None:
        labels = {
            HOST_LABEL: name,
            ZONE_LABEL: zone,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": {
                "batch": "c6i.4xlarge",
                "system": "m6i.xlarge",
            }.get(pool or "", "m6i.4xlarge"),
        }
        if pool:
            labels[POOL_LABEL] = pool
        res = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi", "pods": str(pods)}
        spec: dict[str, Any] = {}
        taints = list(taints or [])
        if unschedulable:
            spec["unschedulable"] = True
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        if taints:
            spec["taints"] = taints
        created, _ = self.age(40 * 86400, 90 * 86400)
        self.snap.nodes.append(
            {
                "metadata": {
                    "name": name,
                    "uid": self.uid(),
                    "labels": labels,
                    "creationTimestamp": created,
                },
                "spec": spec,
                "status": {
                    "allocatable": res,
                    "capacity": res,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            }
        )
        self.used[name] = [0, 0, 0]
        self.alloc[name] = (cpu_m, mem_mi, pods)

    def node_obj(self, name: str) -> dict[str, Any]:
        return next(n for n in self.snap.nodes if n["metadata"]["name"] == name)

    def fits(self, node: str, cpu: str, mem: str) -> bool:
        u, a = self.used[node], self.alloc[node]
        return u[0] + _CPU[cpu] <= a[0] and u[1] + _MEM[mem] <= a[1] and u[2] + 1 <= a[2]

    def take(self, node: str, cpu: str, mem: str) -> None:
        u = self.used[node]
        u[0], u[1], u[2] = u[0] + _CPU[cpu], u[1] + _MEM[mem], u[2] + 1

    def template(
        self,
        labels: dict[str, str],
        cpu: str,
        mem: str,
        affinity: dict[str, Any] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        priority_class: str | None = None,
        volumes: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "resources": {"requests": {"cpu": cpu, "memory": mem}},
                    **(
                        {
                            "volumeMounts": [
                                {"name": v["name"], "mountPath": f"/data/{v['name']}"}
                                for v in volumes
                            ]
                        }
                        if volumes
                        else {}
                    ),
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
        }
        if affinity:
            spec["affinity"] = affinity
        if node_selector:
            spec["nodeSelector"] = node_selector
        if tolerations:
            spec["tolerations"] = tolerations
        if priority_class:
            spec["priorityClassName"] = priority_class
        if volumes:
            spec["volumes"] = volumes
        return {"metadata": {"labels": labels}, "spec": spec}

    def pod(
        self,
        ns: str,
        name: str,
        node: str | None,
        tmpl: dict[str, Any],
        owner: dict[str, Any] | None,
        extra_labels: dict[str, str] | None = None,
        priority: int = 0,
        phase: str = "Running",
    ) -> dict[str, Any]:
        created, started = self.age()
        spec = {**tmpl["spec"], "priority": priority}
        if node:
            spec["nodeName"] = node
            c = spec["containers"][0]["resources"]["requests"]
            self.take(node, c["cpu"], c["memory"])
        meta: dict[str, Any] = {
            "name": name,
            "namespace": ns,
            "uid": self.uid(),
            "labels": {**tmpl["metadata"]["labels"], **(extra_labels or {})},
            "creationTimestamp": created,
        }
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": self.kind[id(owner)],
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        conds = [
            {"type": t, "status": "True"}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        pod = {
            "metadata": meta,
            "spec": spec,
            "status": {
                "phase": phase,
                "startTime": started,
                "conditions": conds,
                "qosClass": "Burstable",
            },
        }
        self.snap.pods.append(pod)
        return pod

    def room(self, nodes: Iterable[str], cpu: str, mem: str, enough: int) -> bool:
        """Whether the nodes still hold `enough` more pods of this size."""
        total = 0
        for n in nodes:
            u, a = self.used[n], self.alloc[n]
            total += max(
                0, min((a[0] - u[0]) // _CPU[cpu], (a[1] - u[1]) // _MEM[mem], a[2] - u[2])
            )
            if total >= enough:
                return True
        return False

    def place(self, nodes: Iterable[str], cpu: str, mem: str, start: int = 0) -> str:
        cands = list(nodes)
        for i in range(len(cands)):
            n = cands[(start + i) % len(cands)]
            if self.fits(n, cpu, mem):
                return n
        raise ValueError(f"no room for a {cpu}/{mem} pod on {len(cands)} nodes; raise Shape.nodes")

    # -- workloads ------------------------------------------------------------------------
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


def _affinity_in(
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
    g = _Gen(shape.seed)
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
        node_selector={POOL_LABEL: "system"},
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
                    affinity=_affinity_in(POOL_LABEL, ["batch"]),
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
                    cpu=g.rng.choice(list(_CPU)[:3]),
                    mem=g.rng.choice(list(_MEM)[:3]),
                    pdb=pdb,
                    priority_class=g.rng.choice([None, None, "high-priority"]),
                    volumes=[{"name": "cache", "emptyDir": {}}] if local else None,
                )
            )
        d += 1
    return g.snap


# -- incidents ------------------------------------------------------------------------------
@dataclass
class Incident:
    """A snapshot, the policy it ran with, and each pod's expected fate in round 1."""

    name: str
    snapshot: Snapshot
    policy: str
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod -> fate facts
    story: str = ""


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


def _common(g: _Gen, nodes: list[str], inc: Incident, system_nodes: list[str]) -> None:
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
        node_selector={POOL_LABEL: "system"},
    )
    # v0.36.0 defaults priorityThreshold to the system-critical value: both checks fail
    _expect(inc, dns, "filtered", "evictor-filter", ["SystemCriticalPods", "priorityThreshold"])


def label_move(seed: int = 1) -> Incident:
    """(a) The pool label moved from two zone-a nodes to two zone-b nodes; pods pinned to the
    pool by required node affinity now violate it. Expected, per workload: evicted (its PDB
    allows it), 429 (PDB at minAvailable), filtered (local storage, PVC, bare), nodeFit (also
    pinned to zone-a, where no pool node is left), and not picked (no affinity)."""
    g = _Gen(seed)
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
    pool = _affinity_in(POOL_LABEL, ["batch"])
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
    zone_pinned = _affinity_in(
        POOL_LABEL, ["batch"], [{"key": ZONE_LABEL, "operator": "In", "values": ["zone-a"]}]
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


def pdb_drain(seed: int = 2) -> Incident:
    """(b) A node tainted for maintenance and cordoned (a drain): RemovePodsViolatingNodeTaints
    evicts its pods, except one whose PDB is at minAvailable (429 from the API server); DaemonSet
    and critical pods are filtered; a pod tolerating the taint and pods elsewhere are not
    picked."""
    g = _Gen(seed)
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


INCIDENTS = {"label-move": label_move, "pdb-drain": pdb_drain}
