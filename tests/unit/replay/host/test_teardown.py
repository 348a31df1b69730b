"""A host replay's teardown deletes by this run's label only, in reverse order; an object
without the label is never deleted, whatever a list returns."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.replay.host import teardown as host_teardown
from pytest_desched.replay.host.kwok import kwok_namespace, kwok_objects
from pytest_desched.replay.host.plan import ROLE_LABEL, RUN_LABEL
from pytest_desched.replay.host.teardown import STEPS, is_ours, teardown


def _obj(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}}


class FakeHost:
    """Collections by path; `honest=False` answers every list with everything (a server or
    proxy that dropped the label selector): the teardown must still delete only its own."""

    def __init__(self, honest: bool) -> None:
        self.honest = honest
        self.store: dict[str, list[dict[str, Any]]] = {path: [] for _, path, _ in STEPS}
        self.deleted: list[str] = []

    def list_all(self, api: Any, path: str, query: Any = None) -> list[dict[str, Any]]:
        items = self.store.get(path, [])
        sel = dict(query or []).get("labelSelector")
        if self.honest and sel:
            k, v = sel.split("=")
            items = [o for o in items if o["metadata"]["labels"].get(k) == v]
        return list(items)

    def request(self, api: Any, method: str, path: str, *a: Any, **k: Any) -> None:
        assert method == "DELETE"
        coll, name = path.rsplit("/", 1)
        self.deleted.append(path)
        self.store[coll] = [o for o in self.store[coll] if o["metadata"]["name"] != name]


@pytest.fixture(params=[True, False], ids=["honest-list", "selector-ignored"])
def host(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> FakeHost:
    fake = FakeHost(request.param)
    monkeypatch.setattr(host_teardown.kubeapi, "list_all", fake.list_all)
    monkeypatch.setattr(host_teardown.kubeapi, "request", fake.request)
    ns, nodes = "/api/v1/namespaces", "/api/v1/nodes"
    cr = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    mine = {RUN_LABEL: "run1"}
    fake.store[ns] = [
        _obj("kube-system"),
        _obj("team-a"),  # the host's own, same name as a snapshot namespace would have
        _obj("r-team-a", mine),
        _obj("other-run-ns", {RUN_LABEL: "run2"}),
        _obj(kwok_namespace("run1"), {**mine, ROLE_LABEL: "kwok"}),
    ]
    fake.store[nodes] = [_obj("host-worker"), _obj("fake-0", mine), _obj("fake-x", {RUN_LABEL: ""})]
    fake.store[cr] = [_obj("cluster-admin"), _obj("desched-host-kwok-run1", mine)]
    return fake


def test_only_objects_with_this_run_s_label_are_deleted(host: FakeHost) -> None:
    out = teardown(None, "run1", report=lambda s: None, timeout=1)
    assert sorted(host.deleted) == sorted(
        [
            "/api/v1/namespaces/r-team-a",
            "/api/v1/nodes/fake-0",
            f"/api/v1/namespaces/{kwok_namespace('run1')}",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/desched-host-kwok-run1",
        ]
    )
    left = {o["metadata"]["name"] for objs in host.store.values() for o in objs}
    assert {
        "kube-system",
        "team-a",
        "other-run-ns",
        "host-worker",
        "fake-x",
        "cluster-admin",
    } <= left
    assert not out.errors
    if not host.honest:  # what a list handed back without the label is named, not deleted
        assert any("team-a" in r for r in out.refused)
        assert any("other-run-ns" in r for r in out.refused)


def test_reverse_order_kwok_last(host: FakeHost) -> None:
    teardown(None, "run1", report=lambda s: None, timeout=1)
    order = [p.rsplit("/", 1)[1] for p in host.deleted]
    assert order.index("r-team-a") < order.index("fake-0") < order.index(kwok_namespace("run1"))
    assert order[-1] == "desched-host-kwok-run1"  # its RBAC goes after its namespace


def test_is_ours_needs_the_exact_run_id() -> None:
    assert is_ours(_obj("a", {RUN_LABEL: "run1"}), "run1")
    assert not is_ours(_obj("a", {RUN_LABEL: "run10"}), "run1")
    assert not is_ours(_obj("a"), "run1")
    assert not is_ours({"metadata": {"name": "a"}}, "run1")


def test_every_kwok_object_carries_the_run_label_and_is_torn_down() -> None:
    objs = kwok_objects("run1", "desched.local/kwok:v0.8.0", "kind: Stage\n")
    assert [o["kind"] for o in objs] == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
    ]
    for o in objs:
        assert o["metadata"]["labels"] == {RUN_LABEL: "run1", ROLE_LABEL: "kwok"}
    args = objs[-1]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--manage-all-nodes=false" in args
    assert f"--manage-nodes-with-label-selector={RUN_LABEL}=run1" in args
    # cluster-scoped kinds it creates are all in the teardown's steps
    paths = {p for _, p, _ in STEPS}
    assert any(p.endswith("/clusterroles") for p in paths)
    assert any(p.endswith("/clusterrolebindings") for p in paths)


def test_an_admission_hold_a_killed_restore_left_goes_first(host: FakeHost) -> None:
    """An owners-first restore killed under its hold leaves a policy and binding carrying the
    run label: the teardown deletes them before anything else; another run's stays."""
    api = "/apis/admissionregistration.k8s.io/v1"
    host.store[f"{api}/validatingadmissionpolicybindings"] = [
        _obj("desched-replay-hold-aaa", {RUN_LABEL: "run1"}),
        _obj("desched-replay-hold-bbb", {RUN_LABEL: "run2"}),
    ]
    host.store[f"{api}/validatingadmissionpolicies"] = [
        _obj("desched-replay-hold-aaa", {RUN_LABEL: "run1"}),
        _obj("host-policy"),
    ]
    teardown(None, "run1", report=lambda s: None, timeout=1)
    assert host.deleted[:2] == [
        f"{api}/validatingadmissionpolicybindings/desched-replay-hold-aaa",
        f"{api}/validatingadmissionpolicies/desched-replay-hold-aaa",
    ]
    left = {o["metadata"]["name"] for o in host.store[f"{api}/validatingadmissionpolicies"]}
    assert left == {"host-policy"}
    assert [
        o["metadata"]["name"] for o in host.store[f"{api}/validatingadmissionpolicybindings"]
    ] == ["desched-replay-hold-bbb"]
