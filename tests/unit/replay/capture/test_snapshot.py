"""Taking a snapshot, the pure parts: what is kept, what never is (Secrets), the file itself."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.capture.snapshot import (
    _plain,
    assemble,
    check_inputs,
    find_descheduler,
    minimal_kubeconfig,
    revert_offsets,
)
from pytest_desched.replay.capture.trim import Filtered, trim

SECRET = "hunter2-never-in-a-snapshot"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"


def _pod(name: str = "web-1", ns: str = "shop", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": "u-1",
            "resourceVersion": "42",
            "managedFields": [{"manager": "kubectl"}],
            "labels": {"app": "web"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": f'{{"env":"{SECRET}"}}',
                "descheduler.alpha.kubernetes.io/evict": "true",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web",
                    "uid": "rs-1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-1",
            "serviceAccountName": "web",
            "containers": [
                {
                    "name": "main",
                    "image": "example/web:1",
                    "env": [{"name": "DB_PASSWORD", "value": SECRET}],
                    "command": ["run", f"--token={TOKEN}"],
                    "resources": {"requests": {"cpu": "100m"}},
                    "volumeMounts": [
                        {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets"},
                        {"name": "cache", "mountPath": "/cache"},
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "kube-api-access-abcde",
                    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
                },
                {"name": "cache", "emptyDir": {}},
                {"name": "creds", "secret": {"secretName": "db-creds"}},
                {"name": "nfs", "nfs": {"server": "10.0.0.1", "path": "/x"}},
            ],
            **spec,
        },
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z", "podIP": "10.0.0.9"},
    }


RAW = [
    {
        "kind": "Secret",
        "metadata": {"name": "db-creds", "namespace": "shop"},
        "data": {"password": SECRET},
    },
    {
        "kind": "ServiceAccount",
        "metadata": {"name": "web", "namespace": "shop"},
        "secrets": [{"name": "web-token"}],
    },
    {"kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "status": {"allocatable": {"cpu": "4"}, "addresses": [{"address": "10.1.1.1"}]},
    },
    _pod(),
]


def test_secrets_and_service_accounts_never_land_in_a_snapshot() -> None:
    objects, filtered = assemble(RAW, None, [])
    snap = Snapshot(
        header={"takenAt": "2026-01-01T00:00:00Z", "filtered": dict(filtered)}, objects=objects
    )
    text = snap.dump("yaml")
    assert filtered["Secrets"] == 1 and filtered["ServiceAccounts"] == 1
    assert SECRET not in text and TOKEN not in text
    assert "kind: Secret" not in text and "serviceAccounts" not in objects
    assert snap.validate() is snap


def test_trim_keeps_what_decisions_read_and_drops_the_rest() -> None:
    f = Filtered()
    pod = trim("pods", _pod(), f)
    spec = pod["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["cache", "creds", "nfs"]  # no token volume
    assert spec["volumes"][1] == {
        "name": "creds",
        "secret": {"secretName": "db-creds"},
    }  # a name only
    assert "emptyDir" in spec["volumes"][0] and "configMap" in spec["volumes"][2]  # nfs: not local
    c = spec["containers"][0]
    assert "env" not in c and "command" not in c
    assert [m["name"] for m in c["volumeMounts"]] == ["cache"]
    assert pod["metadata"]["annotations"] == {"descheduler.alpha.kubernetes.io/evict": "true"}
    assert "managedFields" not in pod["metadata"] and "resourceVersion" not in pod["metadata"]
    assert pod["status"] == {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    assert f["pods.serviceAccountTokenVolumes"] == 1 and f["containers.env"] == 1
    node = trim("nodes", RAW[3], f)
    assert "addresses" not in node["status"] and f["nodes.addresses"] == 1


def test_a_file_holding_a_secret_is_refused() -> None:
    doc = {
        "apiVersion": "desched.pytest.io/v1alpha1",
        "kind": "ClusterSnapshot",
        "header": {"takenAt": "2026-01-01T00:00:00Z"},
        "objects": {"pods": [{"kind": "Secret", "metadata": {"name": "x", "namespace": "a"}}]},
    }
    with pytest.raises(ConfigError, match="never belongs"):
        Snapshot.from_doc(doc)
    doc["objects"] = {"secrets": [{"metadata": {"name": "x"}}]}
    with pytest.raises(ConfigError, match="secrets"):
        Snapshot.from_doc(doc)


def test_load_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        Snapshot.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\n")
    with pytest.raises(ConfigError, match="not a ClusterSnapshot"):
        Snapshot.load(bad)
    stray = Snapshot(
        header={"takenAt": "2026-01-01T00:00:00Z"},
        objects={"pods": [trim("pods", _pod(), Filtered())]},
    )
    with pytest.raises(ConfigError, match="bound to nodes the snapshot lacks"):
        stray.validate()


def test_big_snapshots_are_json_and_load_back(tmp_path: Path) -> None:
    from pytest_desched.replay.gen.generator import generate

    snap = generate(seed=5, nodes=60, pods=2200)
    path = snap.write(tmp_path / "big.yaml")
    assert path.read_text().startswith("{")
    assert path.stat().st_mode & 0o777 == 0o600
    assert Snapshot.load(path).to_doc() == snap.to_doc()
    small = generate(seed=5, nodes=3, pods=10).write(tmp_path / "small.json", fmt="json")
    assert yaml.safe_load(small.read_text())["kind"] == "ClusterSnapshot"  # JSON is YAML


def test_kwokctl_offsets_become_timestamps_again() -> None:
    base = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
    text = "creationTimestamp: $(time-offset-nanosecond -3600000000000)\nx: $(time-offset-nanosecond 1500000000)"
    out = yaml.safe_load(revert_offsets(text, base))
    assert _plain(out) == {"creationTimestamp": "2026-03-01T11:00:00Z", "x": "2026-03-01T12:00:01Z"}


def test_descheduler_found_by_its_policy_flag_with_version_and_configmap() -> None:
    cron = {
        "kind": "CronJob",
        "metadata": {
            "name": "descheduler",
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/name": "descheduler"},
        },
        "spec": {
            "suspend": True,
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "descheduler",
                                    "image": "registry.k8s.io/descheduler/descheduler:v0.34.0",
                                    "args": [
                                        "--policy-config-file=/policy-dir/policy.yaml",
                                        "--v=3",
                                    ],
                                    "volumeMounts": [
                                        {"name": "policy-volume", "mountPath": "/policy-dir"}
                                    ],
                                }
                            ],
                            "volumes": [
                                {"name": "policy-volume", "configMap": {"name": "descheduler"}}
                            ],
                        }
                    }
                }
            },
        },
    }
    (found,) = find_descheduler([cron, _pod()])
    assert found["version"] == "v0.34.0" and found["suspended"]
    assert found["configMap"] == {"name": "descheduler", "key": "policy.yaml"}
    assert found["args"] == ["--policy-config-file=/policy-dir/policy.yaml", "--v=3"]


def _kubeconfig(tmp_path: Path) -> Path:
    kc = tmp_path / "kc.yaml"
    kc.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "prod",
                        "cluster": {"server": "https://p", "certificate-authority": "ca.crt"},
                    },
                    {"name": "dev", "cluster": {"server": "https://d"}},
                ],
                "users": [
                    {
                        "name": "me",
                        "user": {"client-certificate": "me.crt", "client-key": "/abs/me.key"},
                    }
                ],
                "contexts": [
                    {"name": "prod", "context": {"cluster": "prod", "user": "me"}},
                    {"name": "dev", "context": {"cluster": "dev", "user": "me"}},
                ],
                "current-context": "dev",
            }
        )
    )
    return kc


def test_inputs_are_checked_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(ConfigError, match="never read implicitly"):
        check_inputs(None, "prod", None)
    kc = _kubeconfig(tmp_path)
    with pytest.raises(ConfigError, match="pass --context"):
        check_inputs(kc, None, None)
    with pytest.raises(ConfigError, match=r"its contexts: \['prod', 'dev'\]"):
        check_inputs(kc, "staging", None)
    with pytest.raises(ConfigError, match="RFC 1123"):
        check_inputs(kc, "prod", ["Bad_NS"])
    assert check_inputs(kc, "prod", ["b", "a"]) == (kc, "prod", ["a", "b"])


def test_minimal_kubeconfig_holds_one_context_with_absolute_paths(tmp_path: Path) -> None:
    doc = minimal_kubeconfig(_kubeconfig(tmp_path), "prod")
    assert doc["current-context"] == "prod"
    assert [c["name"] for c in doc["clusters"]] == ["prod"]
    assert doc["clusters"][0]["cluster"]["certificate-authority"] == str(
        tmp_path.resolve() / "ca.crt"
    )
    assert doc["users"][0]["user"]["client-key"] == "/abs/me.key"
