"""Speed without losing evidence (issue 18): background namespace deletion, lanes side by side.

Every test here talks to a real kube-apiserver and kube-controller-manager (the embedded
cluster); the namespace controller's own 5 s delay is what makes background deletion pay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.lab import Lab
from pytest_desched.providers.reaper import NamespacesLeft
from pytest_desched.session import DeschedSession

pytestmark = pytest.mark.desched_selftest

WORKAROUND = "pdb-lister-workaround"
HOLD = "example.com/hold"  # a finalizer nobody removes: its namespace cannot finish deleting


def _namespace_phase(session: DeschedSession, name: str) -> str | None:
    from kubernetes.client.rest import ApiException

    try:
        return session.cluster.core.read_namespace(name).status.phase
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_each_experiment_gets_a_fresh_namespace_deleted_in_the_background(
    desched_session: DeschedSession,
) -> None:
    first = desched_session.run("nodefit", WORKAROUND)
    second = desched_session.run("nodefit", WORKAROUND)
    assert first.outcome == second.outcome == "pass", (first.message, second.message)
    ns1, ns2 = (r.records[0]["namespace"] for r in (first, second))
    assert ns1 != ns2, "the second experiment reused a namespace still being deleted"
    reaper = desched_session.cluster.namespace_reaper
    # The lab teardown returned without waiting: the namespace controller holds its 5 s.
    assert ns2 in reaper.pending or ns2 in reaper.gone
    assert _namespace_phase(desched_session, ns2) in ("Terminating", None)
    assert first.timings["lab_teardown"] < 2.0, first.timings
    # No lab pod outlives its experiment, even while its namespace terminates.
    assert desched_session.cluster.core.list_namespaced_pod(ns2).items == []
    reaper.wait_gone([ns1, ns2], timeout=60)
    assert _namespace_phase(desched_session, ns1) is None
    assert _namespace_phase(desched_session, ns2) is None


def test_the_final_scan_fails_naming_a_namespace_that_never_goes(
    desched_cluster_factory: Callable[..., DeschedSession],
) -> None:
    session = desched_cluster_factory()
    cluster = session.cluster
    lab = Lab(cluster, "desched-held-lab")
    lab.create_namespace()
    cluster.core.create_namespaced_config_map(
        lab.namespace, {"metadata": {"name": "held", "finalizers": [HOLD]}}
    )
    lab.teardown(background=True)
    assert cluster.namespace_reaper.pending == ["desched-held-lab"]
    cluster.namespace_reaper.timeout = 8  # the controller's 5 s, then the scan gives up
    try:
        with pytest.raises(NamespacesLeft) as err:
            cluster.namespace_reaper.wait_all()
        assert "desched-held-lab (Terminating" in str(err.value), err.value
    finally:  # let it go, so the factory's teardown (and its own scan) passes
        cluster.core.patch_namespaced_config_map(
            "held", "desched-held-lab", {"metadata": {"finalizers": None}}
        )
    assert cluster.namespace_reaper.wait_all() == ["desched-held-lab"]


def test_three_experiments_side_by_side_keep_their_evidence(
    desched_cluster_factory: Callable[..., DeschedSession],
) -> None:
    session = desched_cluster_factory(workers=6)
    plan = [(n, WORKAROUND) for n in ("positive", "nodefit", "pdb")]
    results = session.run_concurrently(plan, mode="always")  # lanes even on a busy machine
    assert session.info["execution"]["mode"] == "lanes", session.info["execution"]
    assert [r.outcome for r in results] == ["pass"] * 3, [r.message for r in results]
    records = [r.records[0] for r in results]
    namespaces = {rec["namespace"] for rec in records}
    accounts = {rec["job"]["service_account"] for rec in records}
    assert len(namespaces) == 3 and len(accounts) == 3, (namespaces, accounts)
    positive, nodefit, pdb = results
    assert positive.evictions == 1 and nodefit.evictions == 0 and pdb.evictions == 0
    assert nodefit.blocking_layer == "evictor-prefilter-nodefit", nodefit.blocking_layer
    for rec in records:
        audit: dict[str, Any] = rec["audit"]
        assert audit["available"] and not audit["disagreements"], audit
        assert not audit["outside_lab"], audit
        scoped = [o for o in rec["policy_overrides"] if o["path"].endswith(".namespaces")]
        assert scoped and all(o["new"] == {"include": [rec["namespace"]]} for o in scoped)
    # The positive lane's replacement is Ready on its own lane's target, not another lane's.
    passed = {c.id for c in positive.checks if c.ok}
    assert {"one-evicted", "replacement-on-target", "job-completed"} <= passed, passed


def test_the_session_refuses_lanes_that_do_not_fit_before_any_change(
    desched_session: DeschedSession,
) -> None:
    # The session's 3 workers fit one lane (a source and a target), not two.
    before = {n.metadata.name for n in desched_session.cluster.core.list_namespace().items}
    with pytest.raises(ConfigError, match="need 4 workers"):
        desched_session.run_concurrently(
            [("positive", WORKAROUND), ("pdb", WORKAROUND)], mode="always"
        )
    after = {n.metadata.name for n in desched_session.cluster.core.list_namespace().items}
    assert after == before
