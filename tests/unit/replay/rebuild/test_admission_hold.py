"""Owners before pods under an admission hold (replay/rebuild/admission_hold.py, api_restore's
held path): the policy's scope, the order, each object naming its owner by the server's UID."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pytest_desched.replay.gen.generator import Shape, generate
from pytest_desched.replay.rebuild import admission_hold
from pytest_desched.replay.rebuild.api_restore import held_tiers, owned_body
from pytest_desched.replay.rebuild.plan import plan_restore
from pytest_desched.replay.rebuild.writes import RestoreError

NOW = dt.datetime(2026, 12, 6, 20, 0, 0, tzinfo=dt.UTC)


def test_the_hold_refuses_only_pod_and_replicaset_creates_of_others_in_its_namespaces() -> None:
    policy, binding = admission_hold.hold_objects("h", ["b", "a"], {"x": "y"}, "kind-admin")
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {(r["apiGroups"][0], r["resources"][0]) for r in rules} == {
        ("", "pods"),
        ("apps", "replicasets"),
    }
    assert all(r["operations"] == ["CREATE"] for r in rules)
    (cond,) = policy["spec"]["matchConditions"]
    assert cond["expression"] == 'request.userInfo.username != "kind-admin"'
    assert policy["spec"]["validations"][0]["expression"] == "false"
    assert admission_hold.MARK in policy["spec"]["validations"][0]["message"]
    sel = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert sel == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}
    assert binding["spec"]["policyName"] == "h" and binding["spec"]["validationActions"] == ["Deny"]


def test_no_hold_when_the_restore_writes_as_a_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[str] = []

    def request(api: Any, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        writes.append(f"{method} {path}")
        return {"status": {"userInfo": {"username": "system:kube-controller-manager"}}}

    monkeypatch.setattr(admission_hold.kubeapi, "request", request)
    with pytest.raises(RestoreError, match="user of its own"):
        admission_hold.place(None, "h", ["a"], {}, 1)
    assert writes == ["POST /apis/authentication.k8s.io/v1/selfsubjectreviews"]  # nothing made


def test_held_tiers_owners_top_down_then_pods_naming_them() -> None:
    plan = plan_restore(generate(Shape(seed=3, nodes=20, pods=300)), now=NOW)
    tiers = held_tiers(plan)
    assert [n for n, _ in tiers] == ["deployments", "workload controllers", "pods"]
    server: dict[tuple[str, str, str], str] = {}
    for _, objs in tiers:  # as the restore writes them: each owner's UID known before use
        for o in objs:
            body = owned_body(o, server)
            assert "uid" not in body["metadata"] and "status" not in body
            for r in body["metadata"].get("ownerReferences") or []:
                if r["kind"] in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"):
                    assert r["uid"] == server[(r["kind"], o["metadata"]["namespace"], r["name"])]
            if o["kind"] != "Pod":
                m = o["metadata"]
                server[(o["kind"], m["namespace"], m["name"])] = f"server-{len(server)}"
    owned = [p for p in plan.pods if p["metadata"].get("ownerReferences")]
    assert owned and all(
        owned_body(p, server)["metadata"].get("ownerReferences") for p in owned
    )  # every owned pod names its owner at creation: nothing left to adopt
