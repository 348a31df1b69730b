"""A host replay's plan: refused on any clash before a write; the rewritten snapshot confines
every restored pod and replacement to this run's fake nodes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.host.plan import (
    FAKE_TAINT,
    FAKE_TOLERATION,
    RUN_LABEL,
    HostState,
    map_namespaces,
    plan_host,
    snapshot_namespaces,
)
from pytest_desched.replay.rebuild.plan import KWOK_NODE_ANNOTATION, SECTION_OF_KIND, plan_restore

KIND_HOST = HostState(
    namespaces={"default", "kube-system", "kube-public", "kube-node-lease", "local-path-storage"},
    nodes={"host-control-plane", "host-worker", "host-worker2"},
    storage_classes={"standard": {"provisioner": "rancher.io/local-path"}},
)


def _snap() -> Any:
    return generate(seed=4, nodes=6, pods=40)


def test_a_namespace_the_host_has_is_refused_without_a_prefix() -> None:
    with pytest.raises(ConfigError) as exc:
        plan_host(_snap(), KIND_HOST, "run1", None)
    msg = str(exc.value)
    assert "default" in msg and "kube-system" in msg and "--namespace-prefix" in msg
    assert "\n" not in msg


def test_with_a_prefix_every_namespace_is_mapped_and_a_mapped_clash_is_refused() -> None:
    assert map_namespaces(["a", "kube-system"], {"kube-system"}, "r-") == {
        "a": "r-a",
        "kube-system": "r-kube-system",
    }
    with pytest.raises(ConfigError, match="r-a"):
        map_namespaces(["a"], {"r-a"}, "r-")
    with pytest.raises(ConfigError, match="r-a"):  # the replay's own namespaces are taken too
        map_namespaces(["a"], set(), "r-", reserved=["r-a"])
    with pytest.raises(ConfigError, match="63"):
        map_namespaces(["a" * 60], set(), "long-")
    with pytest.raises(ConfigError, match="--namespace-prefix"):
        map_namespaces(["a"], set(), "Bad_")


def test_the_snapshot_is_rewritten_never_the_host() -> None:
    snap = _snap()
    original = copy.deepcopy(snap.objects)
    plan = plan_host(snap, KIND_HOST, "run1", "r-")
    assert snap.objects == original  # the input is not changed
    out = plan.snapshot
    assert set(plan.namespaces.values()) == {f"r-{n}" for n in snapshot_namespaces(snap)}
    for _, o in out.all_objects():
        ns = o["metadata"].get("namespace")
        assert ns is None or ns.startswith("r-")
    for section in (
        "namespaces",
        "nodes",
        "priorityClasses",
        "storageClasses",
        "persistentVolumes",
    ):
        for o in out.items(section):
            assert o["metadata"]["labels"][RUN_LABEL] == "run1", (section, o["metadata"]["name"])
    for pv in out.items("persistentVolumes"):
        ref = pv["spec"].get("claimRef")
        assert ref is None or ref["namespace"].startswith("r-")
    for node in out.nodes:
        assert node["metadata"]["annotations"][KWOK_NODE_ANNOTATION] == "fake"
        assert FAKE_TAINT in node["spec"]["taints"]
    assert plan.node_selector == f"{RUN_LABEL}=run1"
    assert any("tolerates" in d for d in plan.deviations)
    # what the restore will write: every namespace labelled (none left to be made unlabelled)
    restored = plan_restore(out)
    assert {n["metadata"]["name"] for n in restored.api["namespaces"]} == set(
        plan.namespaces.values()
    )
    assert all(n["metadata"]["labels"][RUN_LABEL] == "run1" for n in restored.api["namespaces"])


def _specs(snap: Any) -> list[dict[str, Any]]:
    specs = [p["spec"] for p in snap.pods]
    for section in SECTION_OF_KIND.values():
        specs += [o["spec"]["template"]["spec"] for o in snap.items(section)]
    return specs


def test_every_pod_and_template_can_land_only_on_this_run_s_fake_nodes() -> None:
    snap = _snap()
    pod = snap.pods[0]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
                ]
            }
        }
    }
    out = plan_host(snap, KIND_HOST, "run1", "r-").snapshot
    run_term = {"key": RUN_LABEL, "operator": "In", "values": ["run1"]}
    for spec in _specs(out):
        assert FAKE_TOLERATION in spec["tolerations"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert terms and all(run_term in t["matchExpressions"] for t in terms)
    first = next(p for p in out.pods if p["metadata"]["name"] == pod["metadata"]["name"])
    terms = first["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert len(terms) == 2  # ANDed into each existing term (ORed terms stay ORed)
    assert {"key": "zone", "operator": "In", "values": ["a"]} in terms[0]["matchExpressions"]


def test_a_deployment_s_template_still_equals_its_replicaset_s() -> None:
    """Else the Deployment controller would see a new revision and roll the replay's pods."""
    snap = _snap()
    out = plan_host(snap, KIND_HOST, "run1", "r-").snapshot

    def tmpl(o: dict[str, Any]) -> Any:
        t = copy.deepcopy(o["spec"]["template"])
        (t.get("metadata") or {}).get("labels", {}).pop("pod-template-hash", None)
        return t

    before = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): tmpl(d)
        for d in snap.items("deployments")
    }
    checked = 0
    for rs in out.items("replicaSets"):
        ref = (rs["metadata"].get("ownerReferences") or [{}])[0]
        dep = next(
            (
                d
                for d in out.items("deployments")
                if d["metadata"]["name"] == ref.get("name")
                and d["metadata"]["namespace"] == rs["metadata"]["namespace"]
            ),
            None,
        )
        if dep is None:
            continue
        src_ns = rs["metadata"]["namespace"].removeprefix("r-")
        src_rs = next(
            r
            for r in snap.items("replicaSets")
            if r["metadata"]["name"] == rs["metadata"]["name"]
            and r["metadata"]["namespace"] == src_ns
        )
        if tmpl(src_rs) == before[(src_ns, dep["metadata"]["name"])]:
            assert tmpl(rs) == tmpl(dep)
            checked += 1
    assert checked


def test_cluster_scoped_clashes() -> None:
    snap = _snap()
    node = snap.nodes[0]["metadata"]["name"]
    with pytest.raises(ConfigError, match=node):
        plan_host(snap, HostState(nodes={node}), "run1", "r-")
    sc = snap.items("storageClasses")[0]
    same = HostState(storage_classes={sc["metadata"]["name"]: {"provisioner": sc["provisioner"]}})
    plan = plan_host(snap, same, "run1", "r-")
    assert sc["metadata"]["name"] not in {
        o["metadata"]["name"] for o in plan.snapshot.items("storageClasses")
    }
    assert any(sc["metadata"]["name"] in r for r in plan.reused)
    other = HostState(storage_classes={sc["metadata"]["name"]: {"provisioner": "x.io/other"}})
    with pytest.raises(ConfigError, match=r"x\.io/other"):
        plan_host(snap, other, "run1", "r-")
    pv = snap.items("persistentVolumes")[0]["metadata"]["name"]
    with pytest.raises(ConfigError, match=pv):
        plan_host(snap, HostState(persistent_volumes={pv}), "run1", "r-")


def test_a_global_default_priority_class_never_becomes_the_host_s_default() -> None:
    snap = _snap()
    pc = snap.items("priorityClasses")[0]
    pc["globalDefault"] = True
    plan = plan_host(snap, KIND_HOST, "run1", "r-")
    written = {o["metadata"]["name"]: o for o in plan.snapshot.items("priorityClasses")}
    assert "globalDefault" not in written[pc["metadata"]["name"]]
    unnamed = [p for p in snap.pods if not p["spec"].get("priorityClassName")]
    assert unnamed
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in plan.snapshot.pods}
    for p in unnamed:
        got = by_name[(plan.namespaces[p["metadata"]["namespace"]], p["metadata"]["name"])]
        assert got["spec"]["priorityClassName"] == pc["metadata"]["name"]
    assert any("globalDefault" in d for d in plan.deviations)
