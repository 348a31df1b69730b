"""What a restore writes, decided before any change; the etcd path's create-only batches."""

from __future__ import annotations

import copy
import datetime as dt
import json
from base64 import b64decode
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import controller_of, key, utc
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.rebuild.etcd import Etcd, EtcdError, endpoint_of
from pytest_desched.replay.rebuild.plan import (
    RUNNER_LABEL,
    plan_restore,
    runner_node,
    runner_values,
)

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

    def post(path: str, data: bytes) -> dict[str, Any]:
        assert path == "/v3/kv/txn"
        sent.append(json.loads(data))  # the formatted body is JSON
        return {"succeeded": True}

    monkeypatch.setattr(e, "_post_raw", post)
    plan = plan_restore(generate(seed=4, nodes=10, pods=300), now=NOW)
    assert e.create(plan.pods) == len(plan.pods)
    # one revision per object: a watch resumed at a revision never skips a sibling
    assert all(len(b["success"]) == 1 for b in sent)
    assert len(sent) == len(plan.pods)
    keys = {b64decode(b["success"][0]["request_put"]["key"]).decode() for b in sent}
    assert keys == {e.key(p) for p in plan.pods}
    values = [json.loads(b64decode(b["success"][0]["request_put"]["value"])) for b in sent]
    assert sorted(v["metadata"]["uid"] for v in values) == sorted(
        p["metadata"]["uid"] for p in plan.pods
    )
    for b in sent:
        assert b["compare"][0]["key"] == b["success"][0]["request_put"]["key"]
        assert len(b["compare"]) == len(b["success"])
        assert {c["target"] for c in b["compare"]} == {"CREATE"}
        assert {c["create_revision"] for c in b["compare"]} == {"0"}


def test_etcd_refuses_to_overwrite(monkeypatch: pytest.MonkeyPatch) -> None:
    e = Etcd("http://127.0.0.1:1")
    monkeypatch.setattr(e, "_post_raw", lambda path, data: {"succeeded": False, "count": "1"})
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


def test_etcd_connection_reads_answers_by_content_length_and_refuses_others() -> None:
    """The minimal HTTP client (etcd._Conn) against a socket answering as etcd's gateway does:
    two answers on one kept-alive connection, the second split across reads; then a chunked
    answer it does not read, which ends as an EtcdError after one fresh retry."""
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    answers = [
        [b'HTTP/1.1 200 OK\r\nContent-Length: 18\r\n\r\n{"succeeded":true}'],
        [b"HTTP/1.1 200 OK\r\nContent-Len", b'gth: 13\r\n\r\n{"count":', b'"1"}'],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"],
    ]
    requests: list[bytes] = []

    def serve() -> None:
        for conn_no in range(3):
            conn, _ = srv.accept()
            with conn:
                for _ in range(2 if conn_no == 0 else 1):
                    requests.append(conn.recv(1 << 16))
                    for part in answers.pop(0):
                        conn.sendall(part)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    e = Etcd(f"http://127.0.0.1:{port}")
    assert e._post("/v3/kv/txn", {"a": 1}) == {"succeeded": True}
    assert e.exists("/registry/pods/x")
    with pytest.raises(EtcdError, match="chunked"):
        e._post("/v3/kv/range", {})
    t.join(5)
    srv.close()
    assert requests[0].startswith(b"POST /v3/kv/txn HTTP/1.1\r\n")
    assert requests[0].endswith(b'\r\n\r\n{"a": 1}') and b"Content-Length: 8\r\n" in requests[0]
