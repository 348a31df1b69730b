"""The lab's object kinds and the descheduler's other strategies on the embedded cluster.

Lab tests first (every object kind comes up and tears down cleanly, node changes are undone,
the ReplicationController that used to hang teardown for 60 s), then one test per built-in
strategy experiment, then a user's own experiment written the way docs/writing-experiments.md shows.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from pytest_desched.errors import ExperimentFailed
from pytest_desched.experiments import STRATEGY_EXPERIMENTS
from pytest_desched.lab import (
    LAB_LABEL,
    DaemonSet,
    Deployment,
    Job,
    Lab,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ReplicaSet,
    ReplicationController,
    StatefulSet,
    Taint,
    VolumeClaim,
)

pytestmark = pytest.mark.desched_selftest


def _lab(cluster: Any, release: Any, namespace: str) -> Lab:
    return Lab(cluster, namespace, image=release.versions.workload_image)


def _leftovers(cluster: Any, lab: Lab) -> list[str]:
    """Anything of this lab still in the cluster: namespaces, PVs, PriorityClasses."""
    left = [
        f"Namespace/{n.metadata.name}"
        for n in cluster.core.list_namespace().items
        if n.metadata.name in (lab.namespace, f"{lab.namespace}-b")
    ]
    sel = f"{LAB_LABEL}={lab.namespace}"
    left += [
        f"PersistentVolume/{p.metadata.name}"
        for p in cluster.core.list_persistent_volume(label_selector=sel).items
    ]
    sched = client.SchedulingV1Api(cluster.api_client)
    left += [
        f"PriorityClass/{p.metadata.name}"
        for p in sched.list_priority_class(label_selector=sel).items
    ]
    return left


def test_teardown_does_not_hang_on_a_replication_controller(desched_cluster, desched_release):
    """Issue 14: a raw ReplicationController recreated its pods while teardown waited 60 s."""
    lab = _lab(desched_cluster, desched_release, "desched-rc-hang")
    lab.create_namespace()
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {
            "replicas": 2,
            "selector": {"app": "rc"},
            "template": {
                "metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    desched_cluster.core.create_namespaced_replication_controller("desched-rc-hang", rc)
    lab.wait_ready(2)
    t0 = time.monotonic()
    lab.teardown()
    took = time.monotonic() - t0
    assert took < 20, f"teardown took {took:.1f}s"
    assert not _leftovers(desched_cluster, lab)


def test_every_lab_object_kind_comes_up_and_tears_down(desched_cluster, desched_release):
    """Each kind the lab knows, in two namespaces, with node changes: all gone afterwards."""
    lab = _lab(desched_cluster, desched_release, "desched-kinds")
    w0, w1 = desched_cluster.workers[:2]
    before = {
        n.metadata.name: (n.metadata.labels, n.spec.taints, n.spec.unschedulable)
        for n in desched_cluster.core.list_node().items
    }
    try:
        snap = lab.apply(
            PriorityClass("desched-kinds-high", 1000),
            Deployment("deploy", replicas=2, priority_class="desched-kinds-high"),
            ReplicaSet("rs", replicas=1, empty_dir=True),
            ReplicationController("rc", replicas=2),
            StatefulSet("sts", replicas=2, volume_claims=[VolumeClaim("data")]),
            DaemonSet("ds"),
            Job("job", completions=2, parallelism=2),
            Pod("bare", node_name=w1),
            Deployment("elsewhere", namespace="desched-kinds-b"),
            PodDisruptionBudget("deploy", selects="deploy", min_available=1),
        )
        counts = snap.by_workload()
        workers = len(desched_cluster.workers)
        assert {k: counts.get(k) for k in ("deploy", "rs", "rc", "sts", "ds", "bare")} == {
            "deploy": 2,
            "rs": 1,
            "rc": 2,
            "sts": 2,
            "ds": workers,
            "bare": 1,
        }, counts
        assert {p.owner_kind for p in snap.live} >= {
            "ReplicaSet",
            "ReplicationController",
            "StatefulSet",
            "DaemonSet",
            None,
        }
        assert [p.namespace for p in snap.of("elsewhere")] == ["desched-kinds-b"]
        pvcs = desched_cluster.core.list_namespaced_persistent_volume_claim("desched-kinds").items
        assert sorted((c.metadata.name, c.status.phase) for c in pvcs) == [
            ("data-sts-0", "Bound"),
            ("data-sts-1", "Bound"),
        ]
        lab.set_node_labels(w0, {"desched.pytest.io/probe": "yes"})
        lab.taint(w0, Taint("desched.pytest.io/probe", "yes", "NoSchedule"))
        lab.cordon(w1)
        node = desched_cluster.core.read_node(w0)
        assert node.metadata.labels["desched.pytest.io/probe"] == "yes"
        assert any(t.key == "desched.pytest.io/probe" for t in node.spec.taints or [])
    finally:
        t0 = time.monotonic()
        lab.teardown()
        took = time.monotonic() - t0
    assert took < 30, f"teardown took {took:.1f}s"
    assert not _leftovers(desched_cluster, lab)
    after = {
        n.metadata.name: (n.metadata.labels, n.spec.taints, n.spec.unschedulable)
        for n in desched_cluster.core.list_node().items
    }
    assert after == before


# -- the strategy experiments ------------------------------------------------------------------
@pytest.mark.parametrize("name", STRATEGY_EXPERIMENTS)
def test_strategy_experiment(desched_experiment, name):
    res = desched_experiment(name)
    assert res.variant == "own-policy"
    assert res.records and res.records[-1]["experiment"] == f"{name}[own-policy]"


def test_a_strategy_experiment_fails_when_its_expectation_does_not_hold(desched_experiment):
    """A negative control: minReplicas raised above the replicas, so nothing may be evicted,
    and the experiment that expects two evictions must fail (a test that cannot fail is a
    defect). The caller's override is replayed onto the experiment's own policy, recorded."""
    path = "profiles[0].pluginConfig[DefaultEvictor].args.minReplicas"
    with pytest.raises(ExperimentFailed) as ei:
        desched_experiment("remove-duplicates", overrides={path: 5})
    res = ei.value.result
    assert {c.id for c in res.failed} >= {"evicted:dup", "evictions:RemoveDuplicates"}, res.message
    assert res.evictions == 0 and res.blocking_layer == "evictor-filter"
    assert [o["path"] for o in res.overrides] == [path]
    assert res.records[-1]["policy_overrides"][0]["new"] == 5


# -- a user's own experiment, exactly as docs/writing-experiments.md writes it ---------------
from pytest_desched.experiments import StrategyExperiment  # noqa: E402
from pytest_desched.lab import Deployment, PodDisruptionBudget  # noqa: E402, F811


class DuplicatesMeetABudget(StrategyExperiment):
    """RemoveDuplicates picks two of four pods on one node; a PDB with no disruption left
    makes the API server refuse both (429), and every pod stays."""

    name = "duplicates-meet-a-budget"
    strategy = "RemoveDuplicates"

    def arrange(self) -> None:
        self.dup = Deployment("dup", replicas=4)
        budget = PodDisruptionBudget("dup", selects="dup", min_available=4)
        self.lab.apply(self.dup, budget, only_on=self.workers[0])

    def act(self) -> None:
        self.view = self.round()

    def assess(self) -> None:
        e = self.expect(self.view)
        e.eviction_count(0)
        e.refused(workload="dup", count=2, code=429)
        e.kept(workload="dup")
        e.pdb_never_below_desired()


def test_my_own_experiment(desched_experiment, desched_settings):
    res = desched_experiment(DuplicatesMeetABudget)
    assert res.blocking_layer == "api-server"
    assert res.records[-1]["experiment"] == "duplicates-meet-a-budget[own-policy]"
    folder = desched_settings.artifacts / "duplicates-meet-a-budget_own-policy_"
    assert (folder / "descheduler-duplicates-meet-a-budget-ledger.json").is_file()


# -- a lab that owns two namespaces (issue 27: every namespace a lab owns is in the evidence) ---
class LifetimeInTwoNamespaces(StrategyExperiment):
    """Five selected pods in the lab namespace and five in a second lab namespace; PodLifeTime
    scoped to both evicts all ten (the policy's total cap is 10)."""

    name = "lifetime-two-namespaces"
    strategy = "PodLifeTime"

    @property
    def second(self) -> str:
        return f"{self.ctx.namespace[:58]}-b"

    def strategy_args(self) -> dict[str, Any]:
        return {
            "namespaces": {"include": [self.ctx.namespace, self.second]},
            "maxPodLifeTimeSeconds": 1,
            "labelSelector": {"matchLabels": {"lifetime": "short"}},
        }

    def arrange(self) -> None:
        self.here = Deployment("old", replicas=5, labels={"lifetime": "short"})
        self.there = Deployment(
            "old", replicas=5, labels={"lifetime": "short"}, namespace=self.second
        )
        self.lab.apply(self.here, self.there)
        self.lab.wait_older_than(2)  # the plugin wants strictly more than 1 whole second

    def act(self) -> None:
        self.view = self.round()

    def assess(self) -> None:
        final = self.settle(self.here, self.there)
        e = self.expect(self.view)
        e.eviction_count(10, "PodLifeTime")
        e.evicted(workload="old", strategy="PodLifeTime")
        e.replaced(final, workload="old", count=10)
        e.nothing_pending(final)


def test_a_two_namespace_lab_reports_every_eviction(desched_experiment):
    """The reported run evicted 10 (log and audit agree) and the experiment saw 5: now every
    figure, the audit cross-check and the outside-lab check cover both namespaces."""
    res = desched_experiment(LifetimeInTwoNamespaces)
    checks = {c.id: c for c in res.checks}
    assert res.evictions == 10, res.message
    assert checks["log-matches-audit"].ok and checks["no-eviction-outside-lab"].ok, res.message
    rec = res.records[-1]
    assert rec["evictions"] == 10 and len(rec["namespaces"]) == 2, rec["namespaces"]
    assert {d["namespace"] for d in rec["decisions"] if d["fate"] == "evicted"} == set(
        rec["namespaces"]
    )
    assert rec["audit"]["evicted_201"] == 10 and not rec["audit"]["outside_lab"]
