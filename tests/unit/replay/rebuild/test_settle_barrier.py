"""The restore's settle barrier (replay/rebuild/etcd_restore.py) reads what it must, and no more, while
the controllers catch up: two GETs per poll until both caches are complete, then the PDBs.
The pod cache's proof is the ReplicaSet controller deleting the surplus barrier pod (was: a PDB
counting it, behind the disruption controller's one worker)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.replay.rebuild import etcd_restore
from pytest_desched.replay.rebuild.etcd_restore import SETTLE_POLL_S, Barrier
from pytest_desched.replay.rebuild.plan import RestorePlan
from pytest_desched.replay.rebuild.writes import RestoreError

NS = "shop"


class Controllers:
    """What the API server answers as the controllers progress, one step per poll."""

    def __init__(self, rs_after: int, pod_after: int, pdbs_after: int) -> None:
        self.polls = 0
        self.rs_after, self.pod_after, self.pdbs_after = rs_after, pod_after, pdbs_after
        self.lists = 0
        self.gets: list[str] = []

    def get(self, api: Any, path: str, query: Any = None) -> dict[str, Any]:
        self.gets.append(path)
        if "/replicasets/" in path:
            self.polls += 1  # the first read of each poll
            return {"status": {"observedGeneration": 1} if self.polls > self.rs_after else {}}
        assert path == f"/api/v1/namespaces/{NS}/pods/{Barrier.NAME}"
        if self.polls > self.pod_after + 1:  # deleted, then gone
            raise ApiException(status=404)
        deleting = (
            {"deletionTimestamp": "2026-12-03T00:00:00Z"} if self.polls > self.pod_after else {}
        )
        return {"metadata": {"name": Barrier.NAME, **deleting}}

    def list_all(self, api: Any, path: str) -> list[dict[str, Any]]:
        assert path == "/apis/policy/v1/poddisruptionbudgets"
        self.lists += 1
        observed = self.polls > self.pdbs_after
        return [
            {
                "metadata": {"namespace": NS, "name": "web", "generation": 1},
                "status": {"observedGeneration": 1} if observed else {},
            },
        ]


def _plan() -> RestorePlan:
    plan = RestorePlan("shift", 0.0)
    plan.api["podDisruptionBudgets"] = [{"metadata": {"namespace": NS, "name": "web"}}]
    return plan


def test_the_pdbs_are_listed_only_once_both_caches_are_complete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Controllers(rs_after=3, pod_after=5, pdbs_after=7)
    monkeypatch.setattr(etcd_restore.kubeapi, "get", api.get)
    monkeypatch.setattr(etcd_restore.kubeapi, "list_all", api.list_all)
    Barrier(NS, dt.datetime.now(dt.UTC)).wait(None, _plan(), timeout=30)
    assert api.polls == 8  # done at the first poll after the PDB was observed
    assert api.lists == 8 - 5  # polls 6, 7 and 8: after the pod cache was complete
    assert len(api.gets) == 2 * 8


def test_a_pdb_never_observed_fails_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Controllers(rs_after=0, pod_after=0, pdbs_after=10**6)
    monkeypatch.setattr(etcd_restore.kubeapi, "get", api.get)
    monkeypatch.setattr(etcd_restore.kubeapi, "list_all", api.list_all)
    with pytest.raises(RestoreError, match=r"PDB shop/web not observed yet"):
        Barrier(NS, dt.datetime.now(dt.UTC)).wait(None, _plan(), timeout=1)


def test_the_barrier_pod_is_the_barrier_replicasets_surplus() -> None:
    """The ReplicaSet wants none and owns the pod written after every pod: its controller
    deletes it once its (the shared) pod cache holds it. No PDB is part of the barrier."""
    b = Barrier(NS, dt.datetime.now(dt.UTC))
    assert b.rs["spec"]["replicas"] == 0
    sel = b.rs["spec"]["selector"]["matchLabels"]
    assert sel.items() <= b.pod["metadata"]["labels"].items()
    (ref,) = b.pod["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "ReplicaSet",
        Barrier.NAME,
        b.rs["metadata"]["uid"],
        True,
    )
    assert not hasattr(b, "pdb")


def test_the_poll_is_short() -> None:
    """The restore goes on within SETTLE_POLL_S of the caches being complete (was up to 1 s)."""
    assert 0 < SETTLE_POLL_S <= 0.25
