"""What the lab looks like at one instant: every pod of its namespaces and PDB status as data.

`PodInfo` is the subset of a pod an experiment reasons about (UID, node, phase, Ready,
owner, workload, restarts, terminating) and `Snapshot` groups every pod of the lab's
namespaces with the PDB status, so assertions and evidence compare snapshots without
holding Kubernetes client objects, whatever kinds of workload the lab runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_desched.kube import pod_ready
from pytest_desched.lab.inputs import pod_names, workload_name

WORKLOAD_LABEL = "desched.pytest.io/workload"  # set on every pod a lab workload makes


@dataclass(frozen=True)
class PodInfo:
    name: str
    uid: str
    node: str | None
    phase: str
    ready: bool
    owner: str | None  # ReplicaSet name: a changed owner means a rollout happened
    deleting: bool
    start_time: str | None
    namespace: str = ""
    owner_kind: str | None = None  # ReplicaSet, ReplicationController, DaemonSet, Job, ...
    workload: str | None = None  # the lab workload's name (its label), else the `app` label
    restarts: int = 0  # container restarts, summed
    # The pod's labels: which PDB selects it (fidelity's 429 explanation reads them).
    labels: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        """`namespace/name`: a lab may own several namespaces, and names repeat across them."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, p: Any) -> PodInfo:
        owners = p.metadata.owner_references or []
        labels = p.metadata.labels or {}
        statuses = (p.status.container_statuses or []) if p.status else []
        return cls(
            name=p.metadata.name,
            uid=p.metadata.uid,
            node=p.spec.node_name,
            phase=p.status.phase if p.status else "Unknown",
            ready=pod_ready(p),
            owner=owners[0].name if owners else None,
            deleting=p.metadata.deletion_timestamp is not None,
            start_time=p.status.start_time.isoformat()
            if p.status and p.status.start_time
            else None,
            namespace=p.metadata.namespace or "",
            owner_kind=owners[0].kind if owners else None,
            workload=labels.get(WORKLOAD_LABEL) or labels.get("app"),
            restarts=sum(int(c.restart_count or 0) for c in statuses),
            labels=dict(labels),
        )


@dataclass
class Snapshot:
    """Pods (UID, node, Ready, owner) and PDB status at one instant."""

    at: float
    pods: list[PodInfo]
    pdb: dict[str, Any] | None = None

    @property
    def uids(self) -> set[str]:
        return {p.uid for p in self.pods}

    @property
    def live(self) -> list[PodInfo]:
        return [p for p in self.pods if not p.deleting]

    def by_node(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.live:
            out[p.node or "<unscheduled>"] = out.get(p.node or "<unscheduled>", 0) + 1
        return out

    def pending(self) -> list[PodInfo]:
        return [p for p in self.live if p.phase == "Pending" or p.node is None]

    def ready(self) -> list[PodInfo]:
        return [p for p in self.live if p.ready]

    def owners(self) -> set[str | None]:
        return {p.owner for p in self.live}

    def of(self, workload: Any = None, names: Any = None) -> list[PodInfo]:
        """Live pods of one workload (its name or the lab object) and/or with the given pod
        names."""
        workload = workload_name(workload, "Snapshot.of")
        wanted = None if names is None else set(pod_names(names, "Snapshot.of") or ())
        return [
            p
            for p in self.live
            if (workload is None or p.workload == workload) and (wanted is None or p.name in wanted)
        ]

    def by_workload(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.live:
            out[p.workload or "<none>"] = out.get(p.workload or "<none>", 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "pods": [p.__dict__ for p in self.pods],
            "pdb": self.pdb,
            "by_node": self.by_node(),
        }
