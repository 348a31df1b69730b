"""How many replicas each of the lab's owners wants: the "desired" of a rebuild window.

A round's availability figures (outcome/availability.py) compare each owner's available pods
with what its controller is asked to keep. That is the controller's `spec.replicas`, read
from the API (not the declaration: a user's experiment may scale it between rounds), keyed
the way the lab's pods name their owner (`desched.pytest.io/workload`, else `app`, else the
controller's name). A ReplicaSet a Deployment owns is its Deployment's; DaemonSets and Jobs
have no replica count to fall short of and are left out.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.lab.base import LabBase
from pytest_desched.lab.snapshot import WORKLOAD_LABEL


def owner_key(meta: Any) -> str:
    """The name a controller's pods give as their workload (lab/snapshot.PodInfo.workload)."""
    labels = meta.labels or {}
    return str(labels.get(WORKLOAD_LABEL) or labels.get("app") or meta.name)


class CapacitySteps(LabBase):
    """The desired replica count of every replicated owner in the lab's namespaces."""

    def desired_replicas(self) -> dict[str, int]:
        """{owner: spec.replicas} of the lab's Deployments, StatefulSets, bare ReplicaSets and
        ReplicationControllers."""
        apps, core = self.cluster.apps, self.cluster.core
        out: dict[str, int] = {}
        for ns in self.namespaces:
            found = [
                *apps.list_namespaced_deployment(ns).items,
                *apps.list_namespaced_stateful_set(ns).items,
                *(
                    rs
                    for rs in apps.list_namespaced_replica_set(ns).items
                    if not rs.metadata.owner_references
                ),
                *core.list_namespaced_replication_controller(ns).items,
            ]
            for obj in found:
                replicas = obj.spec.replicas
                out[owner_key(obj.metadata)] = 1 if replicas is None else int(replicas)
        return out
