"""On an existing cluster a round evicts only inside the lab: a violating pod next door survives.

The existing provider is pointed at this session's cluster. Outside the lab namespace runs a
Deployment the unscoped policy would evict too: its pods carry the evictor's opt-in label,
violate their required node affinity, have a feasible node, and sit on a node of their own,
so no eviction cap would stop it. With the provider's scope (namespace include list and the
opted-in node selector, recorded as overrides) the lab's round evicts in the lab only.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest
import yaml

from pytest_desched.kube import pod_ready, wait_for
from pytest_desched.lab.inputs import EVICTABLE_LABEL
from pytest_desched.providers.base import NODE_OPT_IN_LABEL
from tests.e2e.inner_run import start_inner

pytestmark = pytest.mark.desched_selftest

INNER = """
import pytest
from pytest_desched.descheduler.decisions import Fate
from pytest_desched.descheduler.rounds import run_round

@pytest.mark.descheduler_e2e
def test_inner(desched_cluster, desched_settings, desched_release, desched_context):
    ctx = desched_context(variant="pdb-lister-workaround")  # scoped by the existing provider
    print("OVERRIDES", [(o["path"], o["new"], o["why"]) for o in ctx.policy.overrides])
    desched_release.apply_policy(ctx.policy, dry_run=False)
    lab = ctx.lab()
    try:  # the runbook's positive arrangement: violating pods, a feasible target, a PDB
        lab.create_namespace()
        lab.label_node(ctx.source)
        lab.deploy()
        lab.label_node(ctx.target)
        lab.unlabel_node(ctx.source)
        lab.create_pdb(2)
        lab.wait_pdb(1)
        rnd = run_round(desched_cluster, desched_release, "descheduler-scope", desched_settings.run_dir)
        evicted = rnd.result.by_fate(Fate.EVICTED)
        print("EVICTED", [d.key for d in evicted])
        print("CONSIDERED", sorted({d.namespace for d in rnd.result.decisions}))
        assert len(evicted) == 1 and evicted[0].namespace == ctx.namespace, rnd.logs[-3000:]
    finally:
        lab.teardown()
"""

OUTSIDE_LABEL = "desched-test/outside"


def _outside_deployment(name: str) -> dict:
    labels = {"app": name, EVICTABLE_LABEL: "true"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": OUTSIDE_LABEL, "operator": "In", "values": ["yes"]}
                        ]
                    }
                ]
            }
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 2,  # the evictor's minReplicas
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
                    "affinity": affinity,
                },
            },
        },
    }


def test_round_on_existing_cluster_leaves_pods_outside_the_lab_alone(
    tmp_path, desched_cluster, desched_toolchain, desched_release
):
    core, apps = desched_cluster.core, desched_cluster.apps
    ctx = (
        desched_cluster.context
        or yaml.safe_load(desched_cluster.kubeconfig.read_text())["current-context"]
    )
    workers = sorted(desched_cluster.workers)[:3]
    _, target, own = workers  # the inner lab moves source -> target; outside lives on `own`
    outside = f"outside-lab-{uuid.uuid4().hex[:5]}"
    app = "outside-demo"
    for n in workers:
        core.patch_node(n, {"metadata": {"labels": {NODE_OPT_IN_LABEL: "true"}}})
    core.patch_node(own, {"metadata": {"labels": {OUTSIDE_LABEL: "yes"}}})
    core.create_namespace({"metadata": {"name": outside}})
    proc = None
    try:
        apps.create_namespaced_deployment(outside, _outside_deployment(app))

        def pods() -> list:
            return core.list_namespaced_pod(outside, label_selector=f"app={app}").items

        first = wait_for(
            "2 Ready outside pods",
            pods,
            lambda ps: len(ps) == 2 and all(pod_ready(p) and p.spec.node_name == own for p in ps),
            60,
            describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]),
        )
        uids = {p.metadata.uid for p in first}
        # Now they violate their affinity and `target` is a feasible node for them.
        core.patch_node(target, {"metadata": {"labels": {OUTSIDE_LABEL: "yes"}}})
        core.patch_node(own, {"metadata": {"labels": {OUTSIDE_LABEL: None}}})
        proc = start_inner(
            tmp_path,
            INNER,
            desched_toolchain.cache_dir,
            "-q",
            "-s",
            "--desched-provider=existing",
            "--desched-allow-existing",
            f"--desched-existing-context={ctx}",
            f"--desched-existing-kubeconfig={desched_cluster.kubeconfig}",
            "--desched-release=desched-scope",
            "--desched-namespace=lab-scope",
        )
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0 and "1 passed" in out, out[-4000:]
        assert f"namespace lab-scope, nodes {NODE_OPT_IN_LABEL}=true" in out, out[-4000:]
        assert "EVICTED ['lab-scope/spread-demo-" in out, out[-4000:]
        assert outside not in out.split("CONSIDERED", 1)[1].splitlines()[0], out[-4000:]
        after = pods()
        assert {p.metadata.uid for p in after} == uids, "a pod outside the lab was evicted"
        reasons = {e.reason for e in core.list_namespaced_event(outside).items}
        assert not reasons & {"Evicted", "Descheduled", "Killing"}, reasons
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        core.delete_namespace(outside, grace_period_seconds=0)
        for n in workers:
            core.patch_node(
                n, {"metadata": {"labels": {NODE_OPT_IN_LABEL: None, OUTSIDE_LABEL: None}}}
            )
