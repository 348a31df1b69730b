"""The restore's settle barrier (replay/etcd_restore.py) reads what it must, and no more, while
the controllers catch up: two GETs per poll until both caches are complete, then the PDBs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pytest_desched.replay import etcd_restore
from pytest_desched.replay.etcd_restore import SETTLE_POLL_S, Barrier
from pytest_desched.replay.plan import RestorePlan
from pytest_desched.replay.writes import RestoreError

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
        healthy = 1 if self.polls > self.pod_after else 0
        return {"status": {"currentHealthy": healthy}}

    def list_all(self, api: Any, path: str) -> list[dict[str, Any]]:
        assert path == "/apis/policy/v1/poddisruptionbudgets"
        self.lists += 1
        observed = self.polls > self.pdbs_after
        return [
            {
                "metadata": {"namespace": NS, "name": "web", "generation": 1},
                "status": {"observedGeneration": 1} if observed else {},
            },
            {"metadata": {"namespace": NS, "name": Barrier.NAME}, "status": {}},
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


def test_the_poll_is_short() -> None:
    """The restore goes on within SETTLE_POLL_S of the caches being complete (was up to 1 s)."""
    assert 0 < SETTLE_POLL_S <= 0.25
