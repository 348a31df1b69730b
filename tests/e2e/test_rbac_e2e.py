"""`desched snapshot --print-rbac` (issue 52), proven: the printed ClusterRole and binding,
applied to a fresh API server, are all `desched snapshot` and `desched record` need (both
succeed under the ServiceAccount, no request refused), and the audit log shows that identity
used nothing but get, list and watch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.capture.timeline import Timeline

pytestmark = pytest.mark.desched_selftest

DESCHED = str(Path(sys.executable).parent / "desched")
AUDIT_EVERYTHING = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""
SA_NS, SA_NAME = "desched-reader", "desched-snapshot"


def _desched(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DESCHED, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def _apply_printed_rbac(api: Any, env: dict[str, str]) -> None:
    """The ServiceAccount (the printout leaves it to the user), then the printout itself."""
    kubeapi.request(api, "POST", "/api/v1/namespaces", {"metadata": {"name": SA_NS}})
    kubeapi.request(
        api, "POST", f"/api/v1/namespaces/{SA_NS}/serviceaccounts", {"metadata": {"name": SA_NAME}}
    )
    printed = _desched(
        "snapshot", "--print-rbac", "--service-account", f"{SA_NS}/{SA_NAME}", env=env
    )
    assert printed.returncode == 0, printed.stderr
    docs = list(yaml.safe_load_all(printed.stdout))
    assert [d["kind"] for d in docs] == ["ClusterRole", "ClusterRoleBinding"]
    for doc in docs:
        plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}
        kubeapi.request(
            api, "POST", f"/apis/rbac.authorization.k8s.io/v1/{plural[doc['kind']]}", doc
        )


def _reader_kubeconfig(cluster: Any, path: Path) -> str:
    """A kubeconfig (a private temp file, never ~/.kube/config) with a TokenRequest token."""
    tok = kubeapi.request(
        cluster.api_client,
        "POST",
        f"/api/v1/namespaces/{SA_NS}/serviceaccounts/{SA_NAME}/token",
        {"spec": {"expirationSeconds": 600}},
    )["status"]["token"]
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "reader", "user": {"token": tok}}],
        "contexts": [{"name": "reader", "context": {"cluster": "c", "user": "reader"}}],
        "current-context": "reader",
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(doc, fh)
    return f"system:serviceaccount:{SA_NS}:{SA_NAME}"


def _audit_events(log: Path, start: int, user: str) -> list[dict[str, Any]]:
    """Every audited request by `user` after `start`, once the log holds record's watches."""
    from pytest_desched.kube import wait_for

    def read() -> list[dict[str, Any]]:
        with log.open("rb") as fh:
            fh.seek(start)
            lines = fh.read().splitlines()
        out = []
        for raw in lines:
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if (e.get("user") or {}).get("username") == user and e.get(
                "stage"
            ) != "ResponseStarted":
                out.append(e)
        return out

    return wait_for(
        "the reader's requests in the audit log",
        read,
        lambda evs: {"list", "watch"} <= {e.get("verb") for e in evs},
        timeout=30,
        describe=lambda evs: f"{len(evs)} events, verbs {sorted({e.get('verb') for e in evs})}",
    )


def test_snapshot_and_record_run_under_the_printed_rbac_and_only_read(
    desched_settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_desched.providers.embedded import bring_up as embedded
    from pytest_desched.replay.gen.generator import generate
    from pytest_desched.replay.rebuild.restore import restore
    from pytest_desched.session import DeschedSession

    # This API server audits every request (Metadata), not just evictions: a test-only policy.
    policy = tmp_path / "audit-everything.yaml"
    policy.write_text(AUDIT_EVERYTHING)
    real = embedded.manifest_path
    monkeypatch.setattr(
        embedded,
        "manifest_path",
        lambda name: policy if name == "audit-policy.yaml" else real(name),
    )
    run_dir = tmp_path / "rbac"
    run_dir.mkdir()
    settings = desched_settings.with_(
        run_dir=run_dir, artifacts=run_dir / "artifacts", provider="embedded"
    )
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config to fall back on, even by mistake
    kubeconfig = tmp_path / "reader.kubeconfig"
    cache = ["--cache-dir", str(settings.cache_dir)] if settings.cache_dir else []
    with DeschedSession(settings, report=print) as session:
        cluster = session.cluster
        assert cluster.audit_log is not None
        restore(cluster, generate(seed=11, nodes=3, pods=12), report=print)
        _apply_printed_rbac(cluster.api_client, env)
        user = _reader_kubeconfig(cluster, kubeconfig)
        start = cluster.audit_log.stat().st_size
        reader = ["--kubeconfig", str(kubeconfig), "--context", "reader"]
        snap = _desched(
            "snapshot", *reader, *cache, "--output-file", str(tmp_path / "snap.yaml"), env=env
        )
        assert snap.returncode == 0, snap.stderr[-3000:]
        rec = _desched(
            "record", *reader, "--until", "5s", "--output-file", str(tmp_path / "rec.yaml"), env=env
        )
        assert rec.returncode == 0, rec.stderr[-3000:]
        events = _audit_events(cluster.audit_log, start, user)
    taken = Snapshot.load(tmp_path / "snap.yaml")
    assert len(taken.pods) >= 12 and taken.header["takenWith"]["readOnly"]
    Timeline.load(tmp_path / "rec.yaml")  # a window record that loads
    verbs = {e["verb"] for e in events}
    assert verbs <= {"get", "list", "watch"} and {"list", "watch"} <= verbs, sorted(verbs)
    refused = [
        (e["verb"], e.get("requestURI"))
        for e in events
        if (e.get("responseStatus") or {}).get("code") == 403
    ]
    assert refused == [], f"the printed role is missing a read: {refused}"
    touched = {(e.get("objectRef") or {}).get("resource") for e in events}
    assert not touched & {"secrets", "serviceaccounts"}, sorted(map(str, touched))
