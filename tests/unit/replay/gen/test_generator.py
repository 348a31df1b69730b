"""The generator: deterministic, realistic, and incidents whose every pod has a known fate."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_desched.replay.capture.format import controller_of, key
from pytest_desched.replay.gen.generator import Shape, generate
from pytest_desched.replay.gen.incidents import INCIDENTS, label_move, pdb_drain


def test_same_seed_same_file_other_seed_other_file() -> None:
    assert generate(seed=3).dump("yaml") == generate(seed=3).dump("yaml")
    assert generate(seed=3).dump("yaml") != generate(seed=4).dump("yaml")
    assert label_move().snapshot.dump("yaml") == label_move().snapshot.dump("yaml")


def test_a_realistic_cluster() -> None:
    snap = generate(Shape(seed=2, nodes=30, pods=300, zones=3))
    snap.validate()
    assert len(snap.nodes) == 30
    zones = Counter(n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in snap.nodes)
    assert set(zones) == {"zone-a", "zone-b", "zone-c"}
    pools = Counter(n["metadata"]["labels"]["example.com/pool"] for n in snap.nodes)
    assert set(pools) == {"general", "batch", "system"}
    kinds = Counter((controller_of(p) or {}).get("kind") for p in snap.pods)
    assert kinds["DaemonSet"] == 2 * 30  # two DaemonSets on every node
    assert kinds["ReplicaSet"] and kinds["StatefulSet"] and kinds[None]  # bare pods too
    assert snap.items("podDisruptionBudgets") and snap.items("priorityClasses")
    assert any(p["spec"].get("priority", 0) >= 2_000_000_000 for p in snap.pods)  # critical
    assert any(any("emptyDir" in v for v in p["spec"].get("volumes") or []) for p in snap.pods)
    claims = {key(c): c for c in snap.items("persistentVolumeClaims")}
    pvs = {pv["metadata"]["name"]: pv for pv in snap.items("persistentVolumes")}
    for c in claims.values():  # every claim bound to a local PV pinned to its pod's node
        assert pvs[c["spec"]["volumeName"]]["spec"]["claimRef"]["name"] == c["metadata"]["name"]


def test_placement_stays_within_allocatable() -> None:
    snap = generate(seed=9, nodes=40, pods=1500)
    snap.validate()  # names unique, even where random suffixes would collide
    used: Counter[str] = Counter()
    for p in snap.pods:
        used[p["spec"]["nodeName"]] += 1
    for n in snap.nodes:
        assert used[n["metadata"]["name"]] <= int(n["status"]["allocatable"]["pods"])


def test_too_small_a_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="nodes >= 3"):
        generate(nodes=2, pods=10)


@pytest.mark.parametrize("make", [label_move, pdb_drain])
def test_incidents_know_every_pods_fate(make: object) -> None:
    inc = make()  # type: ignore[operator]
    assert inc.name in INCIDENTS
    inc.snapshot.validate()
    assert set(inc.expected) == {key(p) for p in inc.snapshot.pods}
    fates = Counter(e["fate"] for e in inc.expected.values())
    assert fates["evicted"] and fates["refused"] and fates["filtered"] and fates["not-picked"]
    assert inc.snapshot.policy == inc.policy and "DeschedulerPolicy" in inc.policy
    assert all(e["status_code"] == 429 for e in inc.expected.values() if e["fate"] == "refused")


def test_label_move_left_no_pool_node_where_the_zone_pinned_pods_may_go() -> None:
    inc = label_move()
    pool = {
        n["metadata"]["name"]
        for n in inc.snapshot.nodes
        if n["metadata"]["labels"].get("example.com/pool") == "batch"
    }
    zone_a = {
        n["metadata"]["name"]
        for n in inc.snapshot.nodes
        if n["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
    }
    assert pool and not pool & zone_a
    nodefit = [p for p, e in inc.expected.items() if e["fate"] == "nodefit"]
    assert nodefit


def test_pdb_drain_cordons_and_taints_one_node() -> None:
    inc = pdb_drain()
    drained = [n for n in inc.snapshot.nodes if n["spec"].get("unschedulable")]
    assert len(drained) == 1
    assert {t["key"] for t in drained[0]["spec"]["taints"]} == {
        "example.com/maintenance",
        "node.kubernetes.io/unschedulable",
    }


@pytest.mark.policycheck
@pytest.mark.parametrize("make", [label_move, pdb_drain])
def test_incident_policies_pass_the_descheduler_own_check(make: object) -> None:
    from pytest_desched.descheduler.policy import Policy

    Policy.from_yaml(make().policy).validate()  # type: ignore[operator]


@pytest.mark.parametrize("name", [*INCIDENTS, "utilization-hotspot"])
def test_every_incident_is_filed_as_a_v036_cronjob_running_its_policy(name: str) -> None:
    from pytest_desched.replay.gen.utilization_incident import utilization_hotspot

    make = {**INCIDENTS, "utilization-hotspot": lambda: utilization_hotspot(nodes=16)}[name]
    inc = make()
    header = inc.snapshot.header
    assert inc.snapshot.policy == inc.policy and inc.policy
    assert header["descheduler"]["kind"] == "CronJob"
    assert header["descheduler"]["version"] == "v0.36.0"
    assert header["descheduler"]["image"].endswith(":v0.36.0")
    assert header["notes"].count(f"incident: {inc.name}") == 1
