"""The desired replicas of the lab's owners, keyed the way their pods name them."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from pytest_desched.lab.capacity import CapacitySteps


def obj(name: str, replicas: int | None, labels: dict | None = None, owned: bool = False) -> Any:
    meta = NS(name=name, labels=labels, owner_references=[NS(kind="Deployment")] if owned else None)
    return NS(metadata=meta, spec=NS(replicas=replicas))


def test_desired_replicas_of_every_replicated_owner() -> None:
    items = {
        "deploy": [
            obj("web", 6, {"desched.pytest.io/workload": "web"}),
            obj("runbook", 3, {"app": "spread-demo"}),
        ],
        "sts": [obj("db", None)],  # spec.replicas defaults to 1
        "rs": [obj("web-7d4f", 6, owned=True), obj("bare", 2)],  # a Deployment's RS is its
        "rc": [obj("old", 4)],
    }
    lst = lambda key: lambda ns: NS(items=items[key] if ns == "lab" else [])  # noqa: E731
    apps = NS(
        list_namespaced_deployment=lst("deploy"),
        list_namespaced_stateful_set=lst("sts"),
        list_namespaced_replica_set=lst("rs"),
    )
    lab = CapacitySteps.__new__(CapacitySteps)
    lab.cluster = NS(apps=apps, core=NS(list_namespaced_replication_controller=lst("rc")))  # type: ignore[assignment]
    lab.namespace, lab._extra_namespaces = "lab", ["other"]
    assert lab.desired_replicas() == {"web": 6, "spread-demo": 3, "db": 1, "bare": 2, "old": 4}
