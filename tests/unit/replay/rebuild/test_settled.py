"""Statuses written as the controllers compute them (replay/rebuild/settled.py): each case is a rule
of kube-controller-manager v1.36 (named in the test), and a Deployment or PDB the rules do
not cover is left to its controller (None), never guessed."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from pytest_desched.replay.capture.format import key, rfc3339
from pytest_desched.replay.gen.generator import Shape, generate
from pytest_desched.replay.rebuild.etcd_restore import etcd_storage_and_pdbs
from pytest_desched.replay.rebuild.plan import plan_restore
from pytest_desched.replay.rebuild.settled import (
    PodIndex,
    pdb_status,
    replicaset_status,
    selector_matches,
    settle,
    settle_deployment,
)

NOW = dt.datetime(2026, 12, 2, 4, 0, 0, tzinfo=dt.UTC)
STAMP = rfc3339(NOW)
NS = "shop"
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}


def _pod(
    name: str,
    owner: tuple[str, str] | None = ("ReplicaSet", "rs-uid"),
    ready: bool = True,
    labels: dict[str, str] | None = None,
    phase: str = "Running",
    ready_since: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": labels or {"app": "web"}}
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": "x",
                "uid": owner[1],
                "controller": True,
            }
        ]
    cond: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
    if ready_since:
        cond["lastTransitionTime"] = ready_since
    return {"metadata": meta, "status": {"phase": phase, "conditions": [cond]}}


def _rs(
    name: str = "web-abc",
    uid: str = "rs-uid",
    replicas: int = 3,
    dep_uid: str | None = "dep-uid",
    annotations: dict[str, str] | None = None,
    template: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    tmpl = copy.deepcopy(template or TEMPLATE)
    tmpl["metadata"]["labels"]["pod-template-hash"] = name.rsplit("-", 1)[-1]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": uid,
        "generation": 1,
        "creationTimestamp": created,
        "annotations": dict(annotations or {}),
    }
    if dep_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": dep_uid,
                "controller": True,
            }
        ]
    return {
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": tmpl,
        },
        "status": {},
    }


def _dep(replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": NS,
            "uid": "dep-uid",
            "generation": 1,
            "annotations": {"team": "a"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": copy.deepcopy(TEMPLATE),
            **spec,
        },
        "status": {},
    }


def _settled_rs(rs: dict[str, Any], ready: int, total: int | None = None) -> dict[str, Any]:
    pods = [
        _pod(f"p{i}", ("ReplicaSet", rs["metadata"]["uid"]), ready=i < ready)
        for i in range(total or ready)
    ]
    rs["status"] = replicaset_status(rs, pods, NOW)
    return rs


# -- ReplicaSet: replica_set_utils.go calculateStatus ------------------------------------------
def test_replicaset_counts_its_active_selected_pods_ready_and_available() -> None:
    pods = [
        _pod("ready"),
        _pod("not-ready", ready=False),
        _pod("done", phase="Succeeded"),  # not active (controller.FilterActivePods)
        _pod("unselected", labels={"app": "other"}),  # released by ClaimPods, not counted
        {
            **_pod("deleting"),
            "metadata": {**_pod("deleting")["metadata"], "deletionTimestamp": STAMP},
        },
    ]
    rs = _rs()
    rs["spec"]["template"]["metadata"]["labels"]["tier"] = (
        "front"  # pods lack it: not fully labeled
    )
    assert replicaset_status(rs, pods, NOW) == {
        "replicas": 2,
        "fullyLabeledReplicas": 0,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "terminatingReplicas": 0,
        "observedGeneration": 1,
    }


def test_replicaset_available_needs_ready_for_min_ready_seconds() -> None:
    rs = _rs()
    rs["spec"]["minReadySeconds"] = 60
    pods = [
        _pod("long", ready_since=rfc3339(NOW - dt.timedelta(seconds=61))),
        _pod("fresh", ready_since=rfc3339(NOW - dt.timedelta(seconds=10))),
        _pod("no-time"),  # the zero time: ready long enough
    ]
    st = replicaset_status(rs, pods, NOW)
    assert (st["readyReplicas"], st["availableReplicas"]) == (3, 2)


# -- Deployment: sync.go getNewReplicaSet/calculateStatus, progress.go syncRolloutStatus --------
def test_a_deployment_at_rest_gets_the_controllers_status_and_revision_annotations() -> None:
    dep, rs = _dep(), _settled_rs(_rs(annotations={}), ready=3)
    st = settle_deployment(dep, [rs], STAMP)
    assert st is not None
    assert {k: v for k, v in st.items() if k != "conditions"} == {
        "observedGeneration": 1,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "terminatingReplicas": 0,
    }
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == [
        ("Available", "True", "MinimumReplicasAvailable"),
        ("Progressing", "True", "NewReplicaSetAvailable"),
    ]
    assert st["conditions"][1]["message"] == 'ReplicaSet "web-abc" has successfully progressed.'
    # revision max(old) + 1 = 1 on the new ReplicaSet, copied to the Deployment; the
    # Deployment's own annotations copied to the ReplicaSet (copyDeploymentAnnotationsToReplicaSet)
    assert rs["metadata"]["annotations"] == {"team": "a", "deployment.kubernetes.io/revision": "1"}
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


def test_the_new_replicaset_revision_is_above_the_old_ones_and_keeps_its_history() -> None:
    dep = _dep()
    old = _settled_rs(
        _rs(
            "web-old",
            "old-uid",
            replicas=0,
            annotations={"deployment.kubernetes.io/revision": "4"},
            template={
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "old"}]},
            },
        ),
        ready=0,
    )
    new = _settled_rs(_rs(annotations={"deployment.kubernetes.io/revision": "2"}), ready=3)
    assert settle_deployment(dep, [old, new], STAMP) is not None
    ann = new["metadata"]["annotations"]
    assert ann["deployment.kubernetes.io/revision"] == "5"
    assert ann["deployment.kubernetes.io/revision-history"] == "2"  # a rollback keeps it
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "5"


def test_progressing_is_absent_without_a_progress_deadline() -> None:
    st = settle_deployment(_dep(progressDeadlineSeconds=2**31 - 1), [_settled_rs(_rs(), 3)], STAMP)
    assert st is not None and [c["type"] for c in st["conditions"]] == ["Available"]


@pytest.mark.parametrize(
    "why, dep, rss",
    [
        ("not complete: one pod not ready", _dep(), [_settled_rs(_rs(), ready=2, total=3)]),
        (
            "a scaling event: desired-replicas differs",
            _dep(),
            [_settled_rs(_rs(annotations={"deployment.kubernetes.io/desired-replicas": "5"}), 3)],
        ),
        (
            "the new ReplicaSet is not at the Deployment's scale",
            _dep(replicas=4),
            [_settled_rs(_rs(), 3)],
        ),
        ("paused", _dep(paused=True), [_settled_rs(_rs(), 3)]),
        (
            "no ReplicaSet with its template",
            _dep(
                template={
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "v2"}]},
                }
            ),
            [_settled_rs(_rs(), 3)],
        ),
        (
            "an old ReplicaSet still scaled up",
            _dep(),
            [
                _settled_rs(_rs(), 3),
                _settled_rs(
                    _rs(
                        "web-old",
                        "old-uid",
                        replicas=1,
                        template={
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "old"}]},
                        },
                    ),
                    1,
                ),
            ],
        ),
    ],
)
def test_a_deployment_not_at_rest_is_left_to_its_controller(
    why: str, dep: dict[str, Any], rss: list[dict[str, Any]]
) -> None:
    before = copy.deepcopy((dep, rss))
    assert settle_deployment(dep, rss, STAMP) is None, why
    assert (dep, rss) == before  # nothing half-written


# -- PDB: disruption.go getExpectedPodCount, countHealthyPods, updatePdbStatus -----------------
SCALES = {("ReplicaSet", "rs-uid"): ("dep-uid", 4), ("StatefulSet", "sts-uid"): ("sts-uid", 2)}


def _pdb(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": NS, "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


def _numbers(st: dict[str, Any] | None) -> tuple[int, ...] | None:
    if st is None:
        return None
    return tuple(
        st[k] for k in ("expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed")
    )


PODS = [_pod("a"), _pod("b"), _pod("c", ready=False)]  # 3 of a Deployment of 4, 2 ready


@pytest.mark.parametrize(
    "spec, want",
    [
        # an integer minAvailable counts the selected pods, no scale needed
        ({"minAvailable": 1}, (3, 1, 2, 1)),
        ({"minAvailable": 2}, (3, 2, 2, 0)),
        # maxUnavailable and percentages use the controller's scale (the Deployment's 4)
        ({"maxUnavailable": 1}, (4, 3, 2, 0)),
        ({"maxUnavailable": "30%"}, (4, 2, 2, 0)),  # 1.2 rounded up
        ({"minAvailable": "30%"}, (4, 2, 2, 0)),  # 1.2 rounded up
    ],
)
def test_pdb_status_follows_the_disruption_controller(
    spec: dict[str, Any], want: tuple[int, ...]
) -> None:
    st = pdb_status(_pdb(**spec), PODS, SCALES, STAMP)
    assert _numbers(st) == want
    assert st is not None and st["observedGeneration"] == 1
    allowed = want[3] > 0
    assert st["conditions"] == [
        {
            "type": "DisruptionAllowed",
            "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods",
            "message": "",
            "observedGeneration": 1,
            "lastTransitionTime": STAMP,
        }
    ]


def test_pdb_with_no_pods_allows_nothing_and_unreadable_scales_are_left_to_the_controller() -> None:
    assert _numbers(
        pdb_status(
            _pdb(minAvailable=0, selector={"matchLabels": {"app": "none"}}), PODS, SCALES, STAMP
        )
    ) == (0, 0, 0, 0)
    assert _numbers(pdb_status(_pdb(minAvailable=0, selector=None), PODS, SCALES, STAMP)) == (
        0,
        0,
        0,
        0,
    )
    ds_pods = [_pod("d", owner=("DaemonSet", "ds-uid"))]
    assert (
        pdb_status(_pdb(maxUnavailable=1), ds_pods, SCALES, STAMP) is None
    )  # no scale for a DaemonSet
    assert pdb_status(_pdb(minAvailable="2"), PODS, SCALES, STAMP) is None  # the controller errs


def test_selectors_match_as_label_selectors_do() -> None:
    labels = {"app": "web", "tier": "front"}
    assert selector_matches({}, labels)
    assert selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}, labels
    )
    assert not selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, labels
    )
    assert selector_matches(
        {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, labels
    )
    assert not selector_matches(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "zone", "operator": "Exists"}],
        },
        labels,
    )
    idx = PodIndex([_pod("a"), _pod("b", labels={"app": "db"})])
    assert [p["metadata"]["name"] for p in idx.select(NS, {"matchLabels": {"app": "db"}})] == ["b"]
    assert idx.select(NS, None) == [] and len(idx.select(NS, {})) == 2


# -- the generated cluster: every owner at rest, PDBs as the generator's own --------------------
def test_settle_on_a_generated_cluster_agrees_with_the_generators_pdb_statuses() -> None:
    snap = generate(Shape(seed=3, nodes=60, pods=500))
    plan = plan_restore(snap, now=NOW)
    pdbs = [o for o in etcd_storage_and_pdbs(plan, NOW) if o["kind"] == "PodDisruptionBudget"]
    counts = settle(plan.owners, plan.pods, pdbs, NOW, STAMP)
    assert counts == {
        "ReplicaSet": len(plan.owners["ReplicaSet"]),
        "Deployment": len(plan.owners["Deployment"]),
        "PodDisruptionBudget": len(pdbs),
    }
    generated = {key(b): b["status"] for b in snap.items("podDisruptionBudgets")}
    assert pdbs and all(
        {k: p["status"][k] for k in generated[key(p)]} == generated[key(p)] for p in pdbs
    )
    for rs in plan.owners["ReplicaSet"]:  # every pod of the generator is Ready and Running
        assert (
            rs["status"]["replicas"] == rs["status"]["availableReplicas"] == rs["spec"]["replicas"]
        )
