"""The generator's primitives: a seeded RNG, names, ages, nodes, pod templates and first-fit
placement (see `generator` for the clusters and `incidents` for the incidents built on it)."""

from __future__ import annotations

import datetime as dt
import random
import string
import uuid
from collections.abc import Iterable
from typing import Any

from pytest_desched.replay.capture.format import Snapshot, rfc3339

TAKEN_AT = dt.datetime(2026, 1, 15, 12, 0, 0, tzinfo=dt.UTC)
# The generated cluster's node pools (system, batch, general); not the lab's pool label
# (lab.inputs.POOL_LABEL, which marks the lab's own nodes).
NODE_POOL_LABEL = "example.com/pool"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOST_LABEL = "kubernetes.io/hostname"
SYSTEM_TAINT = {"key": "example.com/dedicated", "value": "system", "effect": "NoSchedule"}
IMAGE = "registry.k8s.io/pause:3.10"
CPU = {"100m": 100, "250m": 250, "500m": 500, "1": 1000}
MEM = {"128Mi": 128, "256Mi": 256, "512Mi": 512, "1Gi": 1024}


class GenBase:
    """Builds one snapshot; all randomness from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.snap = Snapshot(
            header={
                "takenAt": rfc3339(TAKEN_AT),
                "source": {"serverVersion": "v1.36.3", "context": f"generated-{seed}"},
                "takenWith": {"exporter": f"pytest_desched.replay.gen.generator (seed {seed})"},
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
            labels[NODE_POOL_LABEL] = pool
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
        return u[0] + CPU[cpu] <= a[0] and u[1] + MEM[mem] <= a[1] and u[2] + 1 <= a[2]

    def take(self, node: str, cpu: str, mem: str) -> None:
        u = self.used[node]
        u[0], u[1], u[2] = u[0] + CPU[cpu], u[1] + MEM[mem], u[2] + 1

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
            total += max(0, min((a[0] - u[0]) // CPU[cpu], (a[1] - u[1]) // MEM[mem], a[2] - u[2]))
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
