"""A snapshot that carries credentials loads without them (issue 54): a fake token planted in
a container's env, envFrom, args, an annotation and a projected token volume is in nothing the
load returns, nothing the restore would write, and nothing the evidence is made from; the load
says how many it removed. A Secret in the file is refused (it would be restored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import Snapshot, key
from pytest_desched.replay.capture.timeline import Change, Timeline, make_header
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.rebuild.plan import plan_restore

# JWT-shaped and unique: any copy of it anywhere is a leak
TOKEN = "eyJhbGciOiJSUzI1NiJ9.cGxhbnRlZC1mYWtlLXRva2VuLTU0.c2lnbmF0dXJlLTU0"
PLAIN = "planted-plain-secret-value-54"  # under an innocent name: found by where it is, not how


def _plant(spec: dict[str, Any], meta: dict[str, Any]) -> None:
    meta.setdefault("annotations", {}).update(
        {
            "example.com/api-token": TOKEN,
            "example.com/note": f"curl -H 'Authorization: Bearer {TOKEN}'",
        }
    )
    c = spec["containers"][0]
    c["env"] = [{"name": "API_TOKEN", "value": TOKEN}, {"name": "GREETING", "value": PLAIN}]
    c["envFrom"] = [{"secretRef": {"name": "creds"}}]
    c["args"] = [f"--token={TOKEN}", "--verbose"]
    c["volumeMounts"] = [{"name": "kube-api-access-x1", "mountPath": "/var/run/secrets"}]
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {
            "name": "kube-api-access-x1",
            "projected": {
                "sources": [{"serviceAccountToken": {"path": "token", "audience": TOKEN}}]
            },
        },
    ]


def _planted(tmp_path: Path) -> tuple[Path, Snapshot]:
    snap = generate(seed=54, nodes=3, pods=6)
    pod = snap.pods[0]
    _plant(pod["spec"], pod["metadata"])
    for section in ("deployments", "replicaSets"):
        for obj in snap.objects.get(section) or []:
            _plant(obj["spec"]["template"]["spec"], obj["spec"]["template"]["metadata"])
    assert TOKEN in json.dumps(snap.to_doc())  # planted
    return snap.write(tmp_path / "planted.yaml"), snap


def test_a_planted_token_is_removed_at_load_and_counted(tmp_path: Path) -> None:
    path, planted = _planted(tmp_path)
    snap = Snapshot.load(path)
    text = json.dumps(snap.to_doc())
    assert TOKEN not in text and PLAIN not in text
    assert "kube-api-access-x1" not in text  # the volume and its mount
    (line,) = snap.load_notes
    assert "credentials removed at load" in line and "container env lists" in line, line
    assert "service-account token volumes" in line and "annotation values" in line, line
    # nothing the restore would write carries it either
    plan = plan_restore(snap)
    assert TOKEN not in json.dumps([plan.api, plan.owners, plan.pods], default=str)
    # what the replay decides on is unchanged: the same pods, nodes and scheduling fields
    assert [key(p) for p in snap.pods] == [key(p) for p in planted.pods]
    assert [p["spec"].get("nodeName") for p in snap.pods] == [
        p["spec"].get("nodeName") for p in planted.pods
    ]
    assert snap.pods[0]["spec"]["containers"][0]["args"][1] == "--verbose"


def test_a_clean_snapshot_loads_unchanged_and_says_nothing(tmp_path: Path) -> None:
    snap = generate(seed=54, nodes=3, pods=6)
    loaded = Snapshot.load(snap.write(tmp_path / "clean.yaml"))
    assert loaded.load_notes == []
    assert json.dumps(loaded.objects, sort_keys=True) == json.dumps(snap.objects, sort_keys=True)


def test_a_secret_in_the_file_is_refused(tmp_path: Path) -> None:
    snap = generate(seed=54, nodes=3, pods=6)
    doc = snap.to_doc()
    doc["objects"]["pods"].append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"token": TOKEN},
        }
    )
    with pytest.raises(ConfigError, match="Secret") as err:
        Snapshot.from_doc(doc, "planted")
    assert TOKEN not in str(err.value)


def test_a_timelines_changes_lose_their_credentials_too() -> None:
    snap = generate(seed=54, nodes=3, pods=6)
    pod = json.loads(json.dumps(snap.pods[0]))
    pod["metadata"].update(name="born-54", uid="born-54-uid")
    pod["spec"].pop("nodeName", None)
    _plant(pod["spec"], pod["metadata"])
    ns = pod["metadata"]["namespace"]
    born = Change(1.0, "create", "Pod", "born-54", ns, pod)
    tl = Timeline(make_header(snap.taken_at, 60, "watch"), snap, [born])
    parsed = Timeline.parse(tl.dump(), "planted.timeline")
    assert TOKEN not in json.dumps([c.to_doc() for c in parsed.changes])
    assert any("timeline changes: credentials removed" in n for n in parsed.snapshot.load_notes)
