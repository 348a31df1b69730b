"""Issue 27 hole 9: a lab that owns workloads in two namespaces.

The reported run: a PodLifeTime round evicted 10 pods, five in each of the lab's two
namespaces (log and audit agree); the experiment counted 5, `no-eviction-outside-lab`
called the lab's own second namespace "outside", and the other five showed as
"not-picked policy gone". Driven through `Runner.run_round` with doubles for the cluster
and the round, so the framework's own scoping is what is tested.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

import pytest_desched.experiments.framework as framework
from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision, RoundResult
from pytest_desched.evidence.record import RoundRecord
from pytest_desched.experiments import assertions as A
from pytest_desched.experiments.framework import Runner
from pytest_desched.lab.recorder import Recorder
from pytest_desched.lab.snapshot import PodInfo, Snapshot
from pytest_desched.providers.audit_log import EvictionRequest

NAMESPACES = ["desched-two", "desched-two-b"]
USER = "system:serviceaccount:kube-system:descheduler"


def _pod(ns: str, i: int) -> PodInfo:
    return PodInfo(
        name=f"old-{i}",  # the same names in both namespaces: identities need the namespace
        uid=f"{ns}-uid-{i}",
        node="w1",
        phase="Running",
        ready=True,
        owner="old-rs",
        deleting=False,
        start_time=None,
        namespace=ns,
        owner_kind="ReplicaSet",
        workload="old",
    )


BEFORE = Snapshot(0.0, [_pod(ns, i) for ns in NAMESPACES for i in range(5)])
AFTER = Snapshot(1.0, [])  # every one of the ten evicted
DECISIONS = [
    PodDecision(p.namespace, p.name, Fate.EVICTED, Layer.API_SERVER, "w1", "PodLifeTime")
    for p in BEFORE.pods
]
REQUESTS = [
    EvictionRequest(p.namespace, p.name, 201, USER, f"a{i}", datetime.now(UTC))
    for i, p in enumerate(BEFORE.pods)
]


class _Lab:
    namespaces = NAMESPACES
    app = "old"

    def __init__(self) -> None:
        self.snaps = [BEFORE, AFTER]

    def snapshot(self) -> Snapshot:
        return self.snaps.pop(0)

    @contextmanager
    def record(self) -> Any:
        yield Recorder()


@pytest.fixture
def view(monkeypatch: pytest.MonkeyPatch) -> Any:
    rnd = SimpleNamespace(
        name="descheduler-pod-lifetime",
        result=RoundResult(decisions=list(DECISIONS), total_evicted=10),
        audit_requests=list(REQUESTS),
        audit_complete=True,
        audit_wait_s=0.0,
        user=USER,
        logs="",
        timed_out=None,
    )
    monkeypatch.setattr(framework, "run_round", lambda *a, **kw: rnd)
    monkeypatch.setattr(framework, "runbook_job_name", lambda cluster, ns, name: name)
    cluster = SimpleNamespace(core=SimpleNamespace(list_node=lambda: SimpleNamespace(items=[])))
    ctx = SimpleNamespace(
        cluster=cluster,
        release=SimpleNamespace(namespace="kube-system", policy=None),
        namespace=NAMESPACES[0],
        lane=None,
        evidence=None,  # no evidence folder: a failed round keeps no log copy
        policy=SimpleNamespace(to_dict=lambda: {}),  # the round's policy: no nodeSelector
        policy_label=None,
        on_point=None,
        log_dir=".",
        round_timeout=1,
        replicas=5,
        descheduler_version="v0.36.0",
        lab=_Lab,
    )
    runner = Runner(ctx, "two-namespaces", "own-policy")  # type: ignore[arg-type]
    v = runner.run_round("descheduler-pod-lifetime")
    v.runner = runner
    return v


def test_decisions_and_audit_codes_cover_every_lab_namespace(view: Any) -> None:
    assert len(view.decisions) == 10
    assert set(view.refused_by_api) == {p.key for p in BEFORE.pods}
    assert view.runner.result.evictions == 10


def test_no_eviction_outside_lab_means_outside_all_of_its_namespaces(view: Any) -> None:
    checks = {c.id: c for c in view.runner.result.checks}
    assert checks["no-eviction-outside-lab"].ok, checks["no-eviction-outside-lab"].detail
    assert checks["log-matches-audit"].ok, checks["log-matches-audit"].detail


def test_the_ledger_counts_all_ten_and_no_evicted_pod_reads_as_never_picked(view: Any) -> None:
    ledger = A.Ledger.of(view)
    check = A.eviction_count(ledger, 10, "PodLifeTime")
    assert check.ok, check.detail
    assert {(r.fate, r.deciding, r.audit_codes) for r in ledger.pods} == {
        ("evicted", "api-server(evicted)", (201,))
    }
    assert not A.decided_by(ledger, "policy", pods=[p.key for p in BEFORE.pods[5:]]).ok


def test_a_round_record_keeps_every_lab_namespace() -> None:
    result = RoundResult(
        decisions=[*DECISIONS, PodDecision("kube-system", "dns", Fate.EVICTED, Layer.API_SERVER)]
    )
    rec = RoundRecord.from_round(
        "e", "r", "embedded", result, namespace=NAMESPACES[0], namespaces=NAMESPACES
    )
    assert rec.evictions == 10 and rec.namespaces == NAMESPACES
    assert rec.cluster_counts == {"evicted": 11}
