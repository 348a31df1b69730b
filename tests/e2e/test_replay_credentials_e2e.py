"""A snapshot carrying credentials, replayed for real (issue 54): a fake token planted in a
container's env, args, an annotation and a projected token volume is in none of the replay
cluster's objects (read through its API, etcd-backed) and in no file of the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.replay import kubeapi
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.run import replay

pytestmark = pytest.mark.desched_selftest

TOKEN = "eyJhbGciOiJSUzI1NiJ9.cGxhbnRlZC1lMmUtdG9rZW4tNTQ.c2lnbmF0dXJlLWUyZQ"
LISTS = (
    "/api/v1/pods",
    "/api/v1/namespaces",
    "/api/v1/configmaps",
    "/api/v1/secrets",
    "/api/v1/serviceaccounts",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/statefulsets",
    "/apis/apps/v1/daemonsets",
    "/apis/batch/v1/jobs",
    "/apis/batch/v1/cronjobs",
    "/apis/policy/v1/poddisruptionbudgets",
)


def _plant(spec: dict[str, Any], meta: dict[str, Any]) -> None:
    meta.setdefault("annotations", {})["example.com/api-token"] = TOKEN
    c = spec["containers"][0]
    c["env"] = [{"name": "API_TOKEN", "value": TOKEN}]
    c["args"] = [f"--token={TOKEN}"]
    c["volumeMounts"] = [{"name": "kube-api-access-p1", "mountPath": "/var/run/secrets/x"}]
    vol = {"serviceAccountToken": {"path": "token", "audience": TOKEN}}
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": "kube-api-access-p1", "projected": {"sources": [vol]}},
    ]


def test_a_planted_token_reaches_neither_the_cluster_nor_the_evidence(
    desched_settings: Any, tmp_path: Path
) -> None:
    inc = label_move()
    for pod in inc.snapshot.pods:
        _plant(pod["spec"], pod["metadata"])
    for section in ("deployments", "replicaSets"):
        for obj in inc.snapshot.objects.get(section) or []:
            _plant(obj["spec"]["template"]["spec"], obj["spec"]["template"]["metadata"])
    path = inc.snapshot.write(tmp_path / "planted.yaml")
    assert TOKEN in path.read_text()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = desched_settings.with_(
        run_dir=run_dir, artifacts=run_dir / "artifacts", provider="embedded"
    )
    found: dict[str, int] = {}

    def before_round(i: int, cluster: Any) -> dict[str, Any]:
        for p in LISTS:  # every object the restore wrote, as the API server serves it
            items = kubeapi.list_all(cluster.api_client, p)
            found[p] = len(items)
            assert TOKEN not in json.dumps(items), p
        return {}

    out = replay(path, config=config, before_round=before_round)
    assert found["/api/v1/pods"] >= len(inc.snapshot.pods), found
    assert any("credentials removed at load" in n for n in out.ledger.notes), out.ledger.notes
    files = [f for f in [*run_dir.rglob("*"), *tmp_path.rglob("*")] if f.is_file()]
    files = [f for f in files if f != path]
    assert any(f.suffix == ".log" for f in files), files  # the round's log is among them
    leaked = [str(f) for f in files if TOKEN.encode() in f.read_bytes()]
    assert not leaked, leaked
