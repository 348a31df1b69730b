"""`desched canary --snapshot`: the upgrade canary on a cluster's own state, not the lab.

The same snapshot is restored once per track on a fresh embedded cluster of its own, one
round of each release runs with that track's values, and every pod's fate is compared by
identity (canary/fates.py). Two shapes: a generated 1,000-node cluster canaried v0.35.1 ->
v0.36.0 (the baseline built from the Go module, its chart the shipped 0.35.1 package), and
the pinned release against itself with two values files that change fates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched import cli
from pytest_desched.replay.gen.genbase import NODE_POOL_LABEL
from pytest_desched.replay.gen.generator import Shape, generate
from pytest_desched.replay.gen.incidents import label_move
from tests.upstream import release_file

pytestmark = pytest.mark.desched_selftest

Canary = Callable[..., Any]


@pytest.fixture
def embedded_tracks(desched_settings: Any) -> None:
    """A snapshot is restored through etcd onto embedded clusters only (replay's rule)."""
    from pytest_desched.providers.base import choose_provider

    provider = choose_provider(desched_settings.provider)
    if provider != "embedded":
        pytest.skip(f"a snapshot canary restores onto embedded clusters, not {provider}")


AFFINITY_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
evictionFailureEventNotification: true
profiles:
- name: incident
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
  - name: RemovePodsViolatingNodeAffinity
    args:
      nodeAffinityType: [requiredDuringSchedulingIgnoredDuringExecution]
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeAffinity]
"""


@pytest.mark.usefixtures("embedded_tracks")
def test_snapshot_canary_1000_nodes_v0351_to_v0360(desched_canary: Canary, tmp_path: Path) -> None:
    """A generated 1,000-node cluster (3,000 pods, every node running two DaemonSets) whose
    batch pool label moved off a tenth of the batch nodes: the batch pods there violate their
    required affinity. No caps, so which pods go does not depend on the informer's order."""
    snap = generate(Shape(seed=3, nodes=1000, pods=3000))
    batch = [n for n in snap.nodes if n["metadata"]["labels"].get(NODE_POOL_LABEL) == "batch"]
    moved = {n["metadata"]["name"] for n in batch[: len(batch) // 10]}
    for n in batch[: len(batch) // 10]:
        n["metadata"]["labels"].pop(NODE_POOL_LABEL)
    snap.policy = AFFINITY_POLICY
    path = snap.write(tmp_path / "cluster.json")
    violating = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in snap.pods
        if p["spec"].get("nodeName") in moved
        and NODE_POOL_LABEL in json.dumps(p["spec"].get("affinity") or {})
    }
    assert violating, "the generated incident has pods to evict"
    rep = desched_canary(
        "pinned",
        None,
        snapshot=path,
        baseline="version:v0.35.1",
        baseline_chart=str(release_file("chart-0.35.1")),
    )
    b, c = rep.baseline, rep.candidate
    assert b.error is None and c.error is None, rep.verdict.reasons
    assert (b.descheduler_version, c.descheduler_version) == ("v0.35.1", "v0.36.0")
    assert b.chart["version"] == "0.35.1" and c.chart["version"] == "0.36.0"
    fates = rep.snapshot
    # Every restored pod compared, on both tracks, nothing left out.
    assert fates.coverage.compared == fates.coverage.total == len(snap.pods), fates.coverage
    assert fates.not_compared == []
    # Both releases evict exactly the pods that violate their affinity: no pod differs.
    assert [d.to_dict() for d in fates.differ] == []
    assert fates.same is True
    (rd,) = rep.rounds
    assert rd.baseline.evictions == rd.candidate.evictions == len(violating)
    assert rep.ok and rep.headline == "PASS", rep.verdict.reasons
    md = (Path(rep.baseline.artifacts).parent / "canary.md").read_text()
    assert f"compared {len(snap.pods)} of {len(snap.pods)} pods" in md
    assert "v0.36.0 would evict 0 pod(s) that v0.35.1 would not" in md


def _values(policy: str, protections: dict[str, Any] | None = None) -> str:
    doc = yaml.safe_load(policy)
    for key in ("apiVersion", "kind"):  # the chart's ConfigMap template writes both itself
        doc.pop(key)
    evictor = doc["profiles"][0]["pluginConfig"][0]["args"]
    if protections:
        evictor["podProtections"] = {**evictor.get("podProtections", {}), **protections}
    return yaml.safe_dump({"deschedulerPolicy": doc}, sort_keys=False)


EXPECT = """\
changes:
  - experiment: "snapshot*"
    pods: "data/ReplicaSet/scratch-*@*"
    kind: continue-evicting
    reason: "our new values stop protecting emptyDir pods (PodsWithLocalStorage disabled)"
    link: https://github.com/kubernetes-sigs/descheduler/blob/master/README.md#defaultevictor
"""


@pytest.mark.usefixtures("embedded_tracks")
def test_snapshot_canary_same_release_two_values_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pinned release against itself, serially, on the label-move incident (8 nodes):
    the candidate's values disable the local-storage protection, so exactly the two `scratch`
    pods (emptyDir, violating their affinity) go from filtered to evicted, each with both
    tracks' reasons and the user's explanation, in canary.md and canary.html; exit 0."""
    inc = label_move()
    snap_path = inc.snapshot.write(tmp_path / "label-move.yaml")
    old, new = tmp_path / "old-values.yaml", tmp_path / "new-values.yaml"
    old.write_text(_values(inc.policy))
    new.write_text(_values(inc.policy, {"defaultDisabled": ["PodsWithLocalStorage"]}))
    expect = tmp_path / "expect.yaml"
    expect.write_text(EXPECT)
    art = tmp_path / "evidence"
    code = cli.main(
        [
            "canary",
            "--snapshot",
            str(snap_path),
            "--candidate",
            "pinned",
            "--baseline-values",
            str(old),
            "--candidate-values",
            str(new),
            "--expect",
            str(expect),
            "--serial",
            "--provider",
            "embedded",
            "--artifacts",
            str(art),
            "-o",
            "json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err[-4000:]
    data = json.loads(out)
    scratch = sorted(p for p, f in inc.expected.items() if "/scratch-" in p)
    assert len(scratch) == 2 and all(
        inc.expected[p]["checks"] == ["PodsWithLocalStorage"] for p in scratch
    )
    differ = data["snapshot"]["differ"]
    assert [d["pod"] for d in differ] == scratch, differ
    for d in differ:
        assert d["baseline"] == "filtered [PodsWithLocalStorage]", d
        assert d["baseline_why"] == "checks: PodsWithLocalStorage (evictor-filter)", d
        assert d["candidate"] == "evicted", d
        assert "RemovePodsViolatingNodeAffinity" in d["candidate_why"], d
        assert (d["kind"], d["status"]) == ("continue-evicting", "explained"), d
        assert d["explained_by"].startswith("our new values stop protecting emptyDir pods")
    assert data["snapshot"]["coverage"]["compared"] == len(inc.snapshot.pods)
    assert data["ok"] is True and data["verdict"]["reasons"] == []
    md = (art / "canary.md").read_text()
    said = "v0.36.0 with new-values.yaml would evict 2 pod(s) that v0.36.0 with old-values.yaml"
    assert f"{said} would not: {', '.join(scratch)}" in md, md
    for pod in scratch:
        row = next(line for line in md.splitlines() if line.startswith(f"| {pod} "))
        assert "checks: PodsWithLocalStorage" in row and "our new values stop protecting" in row
    page = (art / "canary.html").read_text()
    assert page.count('data-k="pod-differs"') == 2
    for pod in scratch:
        assert f'data-pod="{pod}"' in page
    assert "our new values stop protecting emptyDir pods" in page
