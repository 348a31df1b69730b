"""What the lab's workload looks like at one instant: pods and PDB status as plain data.

`PodInfo` is the subset of a pod an experiment reasons about (UID, node, phase, Ready,
owning ReplicaSet, terminating) and `Snapshot` groups them with the PDB status, so assertions
and evidence compare snapshots without holding Kubernetes client objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_desched.kube import pod_ready


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

    @classmethod
    def of(cls, p: Any) -> PodInfo:
        owners = p.metadata.owner_references or []
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "pods": [p.__dict__ for p in self.pods],
            "pdb": self.pdb,
            "by_node": self.by_node(),
        }
