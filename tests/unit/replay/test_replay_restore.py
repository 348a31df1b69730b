"""What a restore writes, decided before any change; the etcd path's create-only batches."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.etcd import Etcd, EtcdError, endpoint_of
from pytest_desched.replay.format import controller_of, key, utc
from pytest_desched.replay.generator import generate
from pytest_desched.replay.incidents import label_move
from pytest_desched.replay.plan import RUNNER_LABEL, plan_restore, runner_node, runner_values

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def test_ages_shift_together_so_each_pod_is_as_old_as_in_the_snapshot() -> None:
    snap = generate(seed=4, nodes=6, pods=40)
    plan = plan_restore(snap, now=NOW, ages="shift")
    shift = NOW - snap.taken_at
    assert plan.shift_s == shift.total_seconds()
    by_key = {key(p): p for p in snap.pods}
    for p in plan.pods:
        src = by_key[key(p)]
        assert (
            utc(p["metadata"]["creationTimestamp"])
            == utc(src["metadata"]["creationTimestamp"]) + shift
        )
        assert utc(p["status"]["startTime"]) == utc(src["status"]["startTime"]) + shift
    kept = plan_restore(snap, now=NOW, ages="preserve")
    assert kept.shift_s == 0
    assert {p["status"]["startTime"] for p in kept.pods} == {
        p["status"]["startTime"] for p in snap.pods
    }
    with pytest.raises(ConfigError, match="ages='sideways'"):
        plan_restore(snap, ages="sideways")


def test_owner_references_use_the_new_uids_consistently() -> None:
    plan = plan_restore(generate(seed=4, nodes=6, pods=40), now=NOW)
    uids = {o["metadata"]["uid"]: o for objs in plan.owners.values() for o in objs}
    for p in plan.pods:
        ref = controller_of(p)
        if ref:
            owner = uids[ref["uid"]]
            assert owner["metadata"]["name"] == ref["name"]
            assert plan.expected[key(p)]["ownerUid"] == ref["uid"]
    for rs in plan.owners["ReplicaSet"]:
        (dep,) = rs["metadata"]["ownerReferences"]
        assert uids[dep["uid"]]["kind"] == "Deployment"
    assert {o["spec"]["updateStrategy"]["type"] for o in plan.owners["DaemonSet"]} == {"OnDelete"}
    assert any("OnDelete" in d for d in plan.deviations)


def test_priority_is_resolved_since_no_admission_runs_on_the_etcd_path() -> None:
    plan = plan_restore(generate(seed=4, nodes=6, pods=40), now=NOW)
    by_class = {}
    for p in plan.pods:
        assert isinstance(p["spec"]["priority"], int)
        by_class[p["spec"].get("priorityClassName")] = p["spec"]["priority"]
    assert by_class["system-node-critical"] == 2000001000
    assert by_class.get(None) == 0


def _with(snap: Any, pod: dict[str, Any]) -> Any:
    snap = copy.deepcopy(snap)
    snap.pods.append(pod)
    return snap


def test_pods_that_cannot_be_replayed_are_left_out_with_the_reason() -> None:
    snap = label_move().snapshot
    base = copy.deepcopy(snap.pods[0])
    node = base["spec"]["nodeName"]

    def pod(name: str, **meta: Any) -> dict[str, Any]:
        p = copy.deepcopy(base)
        p["metadata"] = {"name": name, "namespace": "data", **meta}
        p["spec"]["nodeName"] = node
        return p

    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "nightly",
        "uid": "j",
        "controller": True,
    }
    gone = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "gone",
        "uid": "g",
        "controller": True,
    }
    for p in (
        pod("job-pod", ownerReferences=[job]),
        pod("orphaned", ownerReferences=[gone]),
        pod("leaving", deletionTimestamp="2026-01-15T11:59:00Z"),
        pod("descheduler-x", labels={"app.kubernetes.io/name": "descheduler"}),
    ):
        snap = _with(snap, p)
    plan = plan_restore(snap, now=NOW)
    why = {s["pod"]: s["why"] for s in plan.skipped}
    assert "kwok completes Running Job pods" in why["data/job-pod"]
    assert "ReplicaSet/gone is not in the snapshot" in why["data/orphaned"]
    assert why["data/leaving"] == "terminating when the snapshot was taken"
    assert why["data/descheduler-x"].startswith("the descheduler itself")
    assert len(plan.pods) == len(label_move().snapshot.pods)


def test_runner_node_is_invisible_to_scheduling_and_spreading() -> None:
    node = runner_node()
    labels = node["metadata"]["labels"]
    assert "kubernetes.io/hostname" not in labels and "topology.kubernetes.io/zone" not in labels
    assert node["spec"]["unschedulable"] and node["spec"]["taints"][0]["effect"] == "NoSchedule"
    assert runner_values()["nodeSelector"] == {RUNNER_LABEL: "true"}


def test_etcd_writes_one_object_per_create_only_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[dict[str, Any]] = []
    e = Etcd("http://127.0.0.1:1")

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        sent.append(body)
        return {"succeeded": True}

    monkeypatch.setattr(e, "_post", post)
    plan = plan_restore(generate(seed=4, nodes=10, pods=300), now=NOW)
    assert e.create(plan.pods) == len(plan.pods)
    # one revision per object: a watch resumed at a revision never skips a sibling
    assert all(len(b["success"]) == 1 for b in sent)
    assert len(sent) == len(plan.pods)
    for b in sent:
        assert len(b["compare"]) == len(b["success"])
        assert {c["target"] for c in b["compare"]} == {"CREATE"}
        assert {c["create_revision"] for c in b["compare"]} == {"0"}


def test_etcd_refuses_to_overwrite(monkeypatch: pytest.MonkeyPatch) -> None:
    e = Etcd("http://127.0.0.1:1")
    monkeypatch.setattr(e, "_post", lambda path, body: {"succeeded": False, "count": "1"})
    with pytest.raises(EtcdError, match="refusing to overwrite"):
        e.create(plan_restore(label_move().snapshot, now=NOW).pods)


def test_etcd_endpoint_from_the_cluster_configuration(tmp_path: Path) -> None:
    (tmp_path / "kwok.yaml").write_text(
        "kind: KwokctlConfiguration\napiVersion: config.kwok.x-k8s.io/v1alpha1\n"
        "options:\n  etcdPort: 32753\n  etcdPrefix: /registry\n"
    )
    assert endpoint_of(tmp_path) == ("http://127.0.0.1:32753", "/registry")
    with pytest.raises(EtcdError, match="no readable"):
        endpoint_of(tmp_path / "missing")
