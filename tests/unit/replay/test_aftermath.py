"""After a round, the replay waits for each evicted pod to be gone and replaced: a
StatefulSet's replacement carries the evicted pod's name, and must end the wait (issue 42: every
round that evicted a StatefulSet pod waited the whole 30 s timeout for a pod already gone)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.replay import aftermath, kubeapi


def pod(name: str, uid: str, owner: str, node: str | None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid,
            "creationTimestamp": "2026-12-01T14:00:00Z",
            "ownerReferences": [{"kind": "StatefulSet", "uid": owner, "controller": True}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


class Cluster:
    api_client = object()


CLUSTER: Any = Cluster()  # the only part of a cluster the aftermath reads


KINDS = ("replicasets", "statefulsets", "daemonsets")  # the owners a replacement is waited from


@pytest.mark.parametrize("replaced", [True, False])
def test_a_replacement_with_the_evicted_pods_name_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch, replaced: bool
) -> None:
    live = [pod("db-1", "uid-new" if replaced else "uid-old", "sts", "node-2")]
    monkeypatch.setattr(kubeapi, "list_all", lambda api, path, query=None: live)
    said: list[str] = []
    rows, after, owners = aftermath.aftermath(
        CLUSTER, {"team-a/db-1": "sts"}, ["team-a/db-1"], {"uid-old"}, said.append, timeout=1
    )
    if replaced:
        assert said == []  # no timeout: the pod named db-1 now is its replacement
        assert after == {"team-a/db-1": "ready"}
        assert [r.pod for r in rows] == ["team-a/db-1"] and owners == {"team-a/db-1": "sts"}
    else:  # the evicted pod itself is still there: the wait times out and says so
        [line] = said
        assert "team-a/db-1 still there" in line and "timed out" in line
        assert after == {"team-a/db-1": "missing"}


@pytest.mark.parametrize(
    ("owners", "waits"),
    [
        ([], False),  # the owner is gone (a timeline deleted its Deployment)
        ([{"metadata": {"uid": "rs"}, "spec": {"replicas": 1}}], False),  # scaled down to 1
        ([{"metadata": {"uid": "rs"}, "spec": {"replicas": 0}}], False),  # scaled to zero
        ([{"metadata": {"uid": "rs"}, "spec": {"replicas": 2}}], True),  # one still to come
    ],
)
def test_an_owner_that_will_make_no_replacement_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch, owners: list[dict[str, Any]], waits: bool
) -> None:
    live = [pod("web-2", "uid-2", "rs", "node-1")]  # web-1 (uid-1) was evicted, and is gone

    def list_all(api: object, path: str, query: object = None) -> list[dict[str, Any]]:
        return live if path.endswith("/pods") else owners if "replicasets" in path else []

    monkeypatch.setattr(kubeapi, "list_all", list_all)
    said: list[str] = []
    _, after, _ = aftermath.aftermath(
        CLUSTER, {"team-a/web-1": "rs"}, ["team-a/web-1"], {"uid-1", "uid-2"}, said.append, 1
    )
    assert after == {"team-a/web-1": "missing"}
    assert bool(said) is waits
    if waits:
        assert "owner rs: 0 of 1 replacements" in said[0]


def test_nothing_evicted_lists_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 42: each round listed all 10,000 pods after it even when it evicted none
    def list_all(api: object, path: str, query: object = None) -> list[dict[str, Any]]:
        raise AssertionError(f"listed {path}")

    monkeypatch.setattr(kubeapi, "list_all", list_all)
    assert aftermath.aftermath(CLUSTER, {}, [], {"uid-1"}, print, 1) == ([], {}, {})


def test_only_the_evicted_pods_namespaces_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    # an evicted pod, its owner and its replacement share a namespace: the cluster's other
    # pods (a list of all of them took seconds at 10,000, once a second while waiting) are not
    # read; the owner still short of replacements is looked up in that namespace too
    paths: list[str] = []
    live = {"team-a": [pod("web-2", "uid-9", "rs", "node-1")], "team-b": []}

    def list_all(api: object, path: str, query: object = None) -> list[dict[str, Any]]:
        paths.append(path)
        ns = path.split("/namespaces/")[1].split("/")[0]
        if path.endswith("/pods"):
            return live[ns]
        return [{"metadata": {"uid": "rs"}, "spec": {"replicas": 1}}] if ns == "team-a" else []

    monkeypatch.setattr(kubeapi, "list_all", list_all)
    rows, after, _ = aftermath.aftermath(
        CLUSTER,
        {"team-a/web-1": "rs", "team-b/db-0": "sts"},
        ["team-a/web-1", "team-b/db-0"],
        {"uid-1", "uid-2"},
        print,
        1,
    )
    assert after == {"team-a/web-1": "ready", "team-b/db-0": "missing"}  # sts gone
    assert [r.pod for r in rows] == ["team-a/web-2"]
    assert set(paths) == {
        "/api/v1/namespaces/team-a/pods",
        "/api/v1/namespaces/team-b/pods",
        *(f"/apis/apps/v1/namespaces/{ns}/{k}" for ns in ("team-a", "team-b") for k in KINDS),
    }
