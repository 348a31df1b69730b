"""--redact: same name, same alias, everywhere; selectors still select what they selected."""

from __future__ import annotations

import re

from pytest_desched.replay.capture.format import controller_of, key
from pytest_desched.replay.capture.redact import redact_snapshot
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.rebuild.plan import plan_restore


def _matches(selector: dict, labels: dict) -> bool:
    ok = all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
    for e in selector.get("matchExpressions") or []:
        if e["operator"] == "In":
            ok &= labels.get(e["key"]) in e["values"]
    return ok


def test_no_original_name_survives() -> None:
    snap = generate(seed=11, nodes=9, pods=80)
    text = redact_snapshot(snap).dump("yaml")
    originals = {n["metadata"]["name"] for n in snap.nodes}
    originals |= {p["metadata"]["name"] for p in snap.pods}
    originals |= {"team-a", "team-b", "example.com", "registry.k8s.io/pause:3.10", "zone-a"}
    for name in originals:
        assert not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", text), name


def test_same_name_same_alias_everywhere() -> None:
    snap = generate(seed=11, nodes=9, pods=80)
    red = redact_snapshot(snap)
    nodes = {n["metadata"]["name"] for n in red.nodes}
    hostnames = {n["metadata"]["labels"]["kubernetes.io/hostname"] for n in red.nodes}
    assert nodes == hostnames  # a node's name and its hostname label: one alias
    for p in red.pods:
        assert p["spec"]["nodeName"] in nodes
        for term in (
            ((p["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms") or []:
            for f in term.get("matchFields") or []:  # a DaemonSet pod's node
                assert f["values"] == [p["spec"]["nodeName"]]
    # ownerReferences point at the renamed owners, by name and UID
    owners = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["uid"]
        for s in ("replicaSets", "statefulSets", "daemonSets")
        for o in red.items(s)
    }
    for p in red.pods:
        ref = controller_of(p)
        if ref:
            assert owners[(p["metadata"]["namespace"], ref["name"])] == ref["uid"]
    assert red.header["redacted"] and red.header["redaction"]["mapping"] == "never written"
    assert redact_snapshot(snap).dump("yaml") == red.dump("yaml")  # deterministic


def test_selectors_select_the_same_pods() -> None:
    snap = generate(seed=11, nodes=9, pods=80)
    red = redact_snapshot(snap)

    def covered(s: object) -> list[int]:
        return [
            sum(
                1
                for p in s.pods  # type: ignore[attr-defined]
                if p["metadata"]["namespace"] == pdb["metadata"]["namespace"]
                and _matches(pdb["spec"]["selector"], p["metadata"].get("labels") or {})
            )
            for pdb in s.items("podDisruptionBudgets")  # type: ignore[attr-defined]
        ]

    assert covered(snap) == covered(red) and sum(covered(red)) > 0


def test_statefulset_members_and_claims_keep_their_structure() -> None:
    red = redact_snapshot(generate(seed=11, nodes=9, pods=80))
    pvcs = {key(c) for c in red.items("persistentVolumeClaims")}
    for sts in red.items("statefulSets"):
        name = sts["metadata"]["name"]
        members = [p for p in red.pods if (controller_of(p) or {}).get("name") == name]
        assert members
        for p in members:
            ordinal = p["metadata"]["name"].rsplit("-", 1)[1]
            assert p["metadata"]["name"] == f"{name}-{ordinal}"
            assert (
                p["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"]
                == p["metadata"]["name"]
            )
            claim = p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
            vct = sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
            assert claim == f"{vct}-{name}-{ordinal}"
            assert f"{p['metadata']['namespace']}/{claim}" in pvcs


def test_policy_and_label_domains_are_renamed_and_still_restorable() -> None:
    inc = label_move()
    red = redact_snapshot(inc.snapshot)
    assert "example.com/pool" not in red.dump("yaml")
    assert any(k.endswith(".example/pool") for n in red.nodes for k in n["metadata"]["labels"])
    assert red.policy and "RemovePodsViolatingNodeAffinity" in red.policy
    plan = plan_restore(red)
    assert len(plan.pods) == len(inc.snapshot.pods) and not plan.skipped
