"""Runbook install path and round mechanics on a real control plane (issue: chart + rounds)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.descheduler.cleanup import emergency_stop
from pytest_desched.descheduler.decisions import Fate, Layer
from pytest_desched.descheduler.known_bugs import BY_ID, RoundFacts, signatures
from pytest_desched.descheduler.policy import Policy, PolicyError, load_default
from pytest_desched.descheduler.rounds import RoundError, job_from_cronjob, run_round
from pytest_desched.experiments import KnownUpstreamBug, lab_policy
from pytest_desched.kube import node_ready
from pytest_desched.lab.lab import Lab

pytestmark = pytest.mark.desched_selftest


@pytest.fixture
def violating_lab(desched_cluster, desched_settings, desched_release):
    """spread-demo on the source, label moved to the target, PDB minAvailable=2."""
    lab = Lab(
        desched_cluster, desched_settings.namespace, image=desched_release.versions.workload_image
    )
    src, dst = desched_cluster.workers[0], desched_cluster.workers[1]
    try:
        lab.create_namespace()
        lab.label_node(src)
        lab.deploy()
        lab.label_node(dst)
        lab.unlabel_node(src)
        lab.create_pdb(2)
        lab.wait_pdb(1)
        yield lab
    finally:
        lab.teardown()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def test_first_install_is_suspended_dry_run_and_pinned(desched_release):
    first = desched_release.history[0]
    assert first["step"] == "first-install"
    assert "cronjob.suspend=true" in first["checks"]
    assert "args --dry-run=true" in first["checks"]
    assert f"image {desched_release.versions.descheduler_image}" in first["checks"]
    assert desched_release.chart.version == "0.36.0"
    assert desched_release.chart.app_version == "0.36.0"
    cj = desched_release.live_cronjob()
    assert cj.spec.suspend is True
    c = cj.spec.job_template.spec.template.spec.containers[0]
    assert c.image == "registry.k8s.io/descheduler/descheduler:v0.36.0"
    assert cj.spec.job_template.spec.template.spec.service_account_name == desched_release.name


BUG_1917 = BY_ID["descheduler#1917"]


def _dry_run_rounds(cluster, settings, release, lab, attempts: int):
    """Dry-run rounds until one lists a candidate; each must evict nothing.

    Returns the lab before, and per round the round plus the facts the known-bug registry
    may use: Ready nodes, Running lab pods and how many of them run on a Ready node, as the
    API server showed them just before it.
    """
    release.apply_policy(None, dry_run=True)  # the first-install state: chart defaults, dry run
    before = lab.snapshot()
    rounds = []
    for _ in range(attempts):
        nodes = cluster.core.list_node().items
        ready_names = {n.metadata.name for n in nodes if node_ready(n)}
        live = [p for p in lab.snapshot().live if p.phase == "Running"]
        ready, running = len(ready_names), frozenset(p.name for p in live)
        on_ready = sum(p.node in ready_names for p in live)
        rnd = run_round(
            cluster, release, _name("descheduler-dry-run"), settings.run_dir / "round-logs"
        )
        rounds.append((rnd, ready, running, on_ready))
        assert rnd.succeeded and rnd.exit_code == 0
        assert rnd.result.dry_run is True
        assert not rnd.result.by_fate(Fate.EVICTED), "a dry-run round must not evict"
        assert not rnd.result.by_fate(Fate.REFUSED), "a dry-run round must not call the API"
        assert lab.snapshot().uids == before.uids
        if rnd.result.by_fate(Fate.DRY_RUN, lab.namespace):
            break
    return before, rounds


def test_dry_run_round_evicts_nothing(
    desched_cluster, desched_settings, desched_release, violating_lab
):
    """First-install state: a round, whatever it decides, evicts nothing and changes no pod."""
    _, rounds = _dry_run_rounds(
        desched_cluster, desched_settings, desched_release, violating_lab, 1
    )
    rnd = rounds[0][0]
    reasons = {e["reason"] for e in violating_lab.events()}
    assert "Evicted" not in reasons and "Descheduled" not in reasons
    # In dry run the log's eviction total counts the would-be evictions: the two must agree.
    assert rnd.result.total_evicted == len(rnd.result.by_fate(Fate.DRY_RUN))
    if rnd.audit_requests is not None:  # the API server's own word: no eviction, no delete
        by_descheduler = [r for r in rnd.audit_requests if r.user == rnd.user]
        assert by_descheduler == [], by_descheduler


@pytest.mark.xfail(raises=KnownUpstreamBug, strict=False, reason=BUG_1917.describe())
def test_dry_run_round_lists_candidates(
    desched_cluster, desched_settings, desched_release, violating_lab
):
    """The runbook: the dry-run round's log lists the candidates it would evict.

    After 3 tries without a candidate, the failure is expected only if every round shows the
    #1917 signature, proven against the API server's node and pod counts (known_bugs);
    any other way of listing no candidate fails.
    """
    before, rounds = _dry_run_rounds(
        desched_cluster, desched_settings, desched_release, violating_lab, 3
    )
    ns = violating_lab.namespace
    rnd = rounds[-1][0]
    candidates = rnd.result.by_fate(Fate.DRY_RUN, ns)
    if not candidates:
        # #1917 names no experiment (it excuses no check by itself): each round's proof is the
        # registry's own signature, read from the cycle's log against the API server's counts
        proofs = [
            signatures(
                RoundFacts(
                    experiment="dry-run",
                    descheduler_version=desched_release.versions.descheduler.version,
                    failed_checks=frozenset({"lists-candidates"}),
                    decisions=tuple(r.result.in_namespace(ns)),
                    log=r.logs,
                    ready_nodes=ready,
                    lab_pods_running=running,
                    lab_pods_on_ready_nodes=on_ready,
                )
            ).get(BUG_1917.id)
            for r, ready, running, on_ready in rounds
        ]
        if all(proofs):
            raise KnownUpstreamBug(f"{BUG_1917.describe()}. Evidence: {proofs}")
        per_round = [
            {
                "round": r.name,
                "1917 proof": proof,
                "lab counts": r.result.counts(ns),
                "skipped": r.result.skipped,
                "lab pods on Ready nodes": on_ready,
                "lab pods named in the log": sorted(p for p in running if p in r.logs),
                "log": str(r.log_path),
            }
            for (r, _, running, on_ready), proof in zip(rounds, proofs, strict=True)
        ]
        pytest.fail(
            f"no dry-run candidates, and not the #1917 signature in every round: {per_round}"
        )
    assert {d.name for d in candidates} <= {p.name for p in before.pods}
    assert all(d.layer == Layer.DRY_RUN and d.strategy for d in candidates)


def test_policy_update_keeps_cronjob_suspended_and_digest_matches(desched_release):
    # A known different policy first: the release is the worker's, and whichever test ran
    # before on it decides what the live ConfigMap holds (the diff's context lines with it).
    desched_release.apply_policy(lab_policy("runbook"), dry_run=True)
    policy = lab_policy("pdb-lister-workaround")
    step = desched_release.apply_policy(policy, dry_run=False)
    assert step["policy_digest"] == policy.digest()
    assert policy.matches_rendered(desched_release.live_policy_yaml())
    cj = desched_release.live_cronjob()
    assert cj.spec.suspend is True
    assert "--dry-run=false" in cj.spec.job_template.spec.template.spec.containers[0].args
    # the server-side diff holds the policy's own change: the ConfigMap that carries it
    assert ".ConfigMap." in step["diff"], step["diff"][:2000]


@pytest.mark.parametrize(
    "make_bad",
    [
        lambda: load_default().override(
            "profiles.safe-rebalance.plugins.deschedule.enabled", ["NoSuchPlugin"], why="test"
        ),
        lambda: Policy.from_dict({**load_default().to_dict(), "maxNoOfPodsToEvictTotl": 2}),
        lambda: load_default().override(
            "profiles.safe-rebalance.DefaultEvictor.minPodAge", "ten minutes", why="test"
        ),
        lambda: Policy.from_yaml("profiles: [unclosed"),
    ],
    ids=["unknown-plugin", "typo-field", "bad-duration", "bad-yaml"],
)
def test_bad_policy_is_refused_before_any_change(desched_release, make_bad):
    revision, digest = desched_release.revision(), desched_release.configmap_digest()
    with pytest.raises(PolicyError) as exc:
        desched_release.apply_policy(make_bad())
    assert str(exc.value)
    assert desched_release.revision() == revision
    assert desched_release.configmap_digest() == digest


def test_round_runs_as_chart_service_account_rbac_enforced(
    desched_cluster, desched_settings, desched_release, violating_lab
):
    """A round whose ServiceAccount lacks pods/eviction gets 403 from the API server."""
    desched_release.apply_policy(lab_policy("pdb-lister-workaround"), dry_run=False)
    ns, sa = desched_release.namespace, _name("desched-no-evict")
    role = desched_cluster.rbac.read_cluster_role(desched_release.name)
    rules = [r for r in role.rules if "pods/eviction" not in (r.resources or [])]
    assert len(rules) < len(role.rules), "the chart's ClusterRole should grant pods/eviction"
    desched_cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    desched_cluster.rbac.create_cluster_role(
        {
            "metadata": {"name": sa},
            "rules": [desched_cluster.api_client.sanitize_for_serialization(r) for r in rules],
        }
    )
    desched_cluster.rbac.create_cluster_role_binding(
        {
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }
    )
    try:
        before = violating_lab.snapshot()
        rnd = run_round(
            desched_cluster,
            desched_release,
            _name("descheduler-no-evict"),
            desched_settings.run_dir / "round-logs",
            service_account=sa,
        )
        after = violating_lab.snapshot()
        refused = rnd.result.by_fate(Fate.REFUSED, violating_lab.namespace)
        assert rnd.service_account == sa
        assert refused, f"expected a 403 refusal, got {rnd.result.counts(violating_lab.namespace)}"
        assert all(d.status_code == 403 and d.layer == Layer.API_SERVER for d in refused)
        assert f"system:serviceaccount:{ns}:{sa}" in (refused[0].message or "")
        assert not rnd.result.by_fate(Fate.EVICTED)
        assert after.uids == before.uids
    finally:
        desched_cluster.rbac.delete_cluster_role_binding(sa)
        desched_cluster.rbac.delete_cluster_role(sa)
        desched_cluster.core.delete_namespaced_service_account(sa, ns)


def test_unsuspended_cronjob_aborts_round_and_emergency_stop(
    desched_cluster, desched_settings, desched_release, violating_lab
):
    ns = desched_release.namespace
    pdb_before = desched_cluster.policy.read_namespaced_pod_disruption_budget(
        "spread-demo", violating_lab.namespace
    )
    # A Job that has not started (suspended Job: no pod ever runs).
    cj = desched_release.live_cronjob()
    runner = desched_cluster.job_runner
    pending = job_from_cronjob(
        cj, _name("descheduler-pending"), runner.pod_annotations if runner else None
    )
    pending["spec"]["suspend"] = True
    desched_cluster.batch.create_namespaced_job(ns, pending)
    desched_cluster.batch.patch_namespaced_cron_job(
        desched_release.cronjob_name, ns, {"spec": {"suspend": False}}
    )
    refused = _name("descheduler-refused")
    try:
        with pytest.raises(RoundError, match="not suspended"):
            run_round(
                desched_cluster, desched_release, refused, desched_settings.run_dir / "round-logs"
            )
        # The refused round created nothing. (While unsuspended, the CronJob controller may
        # itself start a scheduled Job on the minute: exactly why the runbook keeps it suspended.)
        names = {j.metadata.name for j in desched_cluster.batch.list_namespaced_job(ns).items}
        assert refused not in names
    finally:
        report = emergency_stop(desched_cluster, desched_release)
    assert report["suspended"] is True
    assert desched_release.live_cronjob().spec.suspend is True
    assert pending["metadata"]["name"] in report["deleted_jobs"]
    with pytest.raises(ApiException) as gone:
        desched_cluster.batch.read_namespaced_job(pending["metadata"]["name"], ns)
    assert (
        gone.value.status == 404
        or desched_cluster.batch.read_namespaced_job(
            pending["metadata"]["name"], ns
        ).metadata.deletion_timestamp
    )
    pdb = desched_cluster.policy.read_namespaced_pod_disruption_budget(
        "spread-demo", violating_lab.namespace
    )
    # The PDB untouched: its spec (generation) and every write outside its status the same.
    # Not its resourceVersion: the disruption controller may still write the status (a lab pod
    # turning Ready at load), which a fresh-clone CI run saw (3416 -> 3444).
    assert pdb.metadata.generation == pdb_before.metadata.generation, pdb.metadata
    assert pdb.spec == pdb_before.spec and pdb.spec.min_available == 2, pdb.spec
    assert _writes_outside_status(pdb) == _writes_outside_status(pdb_before), pdb.metadata


def test_round_logs_stay_readable_through_the_api(
    desched_cluster, desched_settings, desched_release
):
    """`kubectl logs job/NAME` after the Job ended, as in the runbook."""
    from pytest_desched.kube import wait_for

    rnd = run_round(
        desched_cluster,
        desched_release,
        _name("descheduler-logs"),
        desched_settings.run_dir / "round-logs",
    )
    assert rnd.succeeded
    job = desched_cluster.batch.read_namespaced_job(rnd.name, rnd.namespace)
    assert any(c.type == "Complete" and c.status == "True" for c in job.status.conditions)

    def logs() -> str:
        proc = desched_cluster.kubectl("-n", rnd.namespace, "logs", f"job/{rnd.name}", check=False)
        return proc.stdout if proc.returncode == 0 else ""

    text = wait_for(
        f"kubectl logs job/{rnd.name}",
        logs,
        lambda t: "Number of evictions/requests" in t,
        timeout=30,
        describe=lambda t: t[-300:],
    )
    assert text.count("\n") == rnd.logs.rstrip("\n").count("\n") + 1


def test_audit_log_records_each_eviction_answer_and_its_user(
    desched_cluster, desched_settings, desched_release, violating_lab
):
    """The API server's own record: 403 per candidate for a ServiceAccount without
    pods/eviction, 201 for the chart's ServiceAccount, each agreeing with the round's log."""
    from pytest_desched.descheduler import audit
    from pytest_desched.descheduler.decisions import RoundResult

    if desched_cluster.audit_log is None:  # kind/existing: say so, never pretend
        view = audit.compare(
            RoundResult(), None, unavailable_why=desched_cluster.audit_unavailable_why
        )
        assert view.to_dict()["available"] is False and view.unavailable_why
        pytest.skip(desched_cluster.audit_unavailable_why)
    desched_release.apply_policy(lab_policy("pdb-lister-workaround"), dry_run=False)
    ns, lab_ns, sa = desched_release.namespace, violating_lab.namespace, _name("desched-no-audit")
    role = desched_cluster.rbac.read_cluster_role(desched_release.name)
    rules = [r for r in role.rules if "pods/eviction" not in (r.resources or [])]
    desched_cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    desched_cluster.rbac.create_cluster_role(
        {
            "metadata": {"name": sa},
            "rules": [desched_cluster.api_client.sanitize_for_serialization(r) for r in rules],
        }
    )
    desched_cluster.rbac.create_cluster_role_binding(
        {
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }
    )
    logs = desched_settings.run_dir / "round-logs"
    try:
        before = violating_lab.snapshot()
        uids = audit.uid_map(lab_ns, before.pods)
        denied = run_round(
            desched_cluster,
            desched_release,
            _name("descheduler-audit-403"),
            logs,
            service_account=sa,
        )
    finally:
        desched_cluster.rbac.delete_cluster_role_binding(sa)
        desched_cluster.rbac.delete_cluster_role(sa)
        desched_cluster.core.delete_namespaced_service_account(sa, ns)
    user = f"system:serviceaccount:{ns}:{sa}"
    assert denied.user == user and denied.audit_complete is True
    refused = denied.result.by_fate(Fate.REFUSED, lab_ns)
    assert refused and all(d.status_code == 403 for d in refused)
    reqs = [r for r in denied.audit_requests or [] if r.is_eviction]
    assert sorted(r.pod for r in reqs) == sorted(d.name for d in refused)
    assert {(r.code, r.user, r.namespace) for r in reqs} == {(403, user, lab_ns)}
    view = audit.compare(denied.result, denied.audit_requests, uids, {lab_ns}, user=user)
    assert view.agrees, view.disagreements
    assert all(view.codes(lab_ns, d.name) == [403] for d in refused)
    assert all(view.pods[d.key].uid == uids[d.key] for d in refused)
    assert violating_lab.snapshot().uids == before.uids

    before = violating_lab.snapshot()
    uids = audit.uid_map(lab_ns, before.pods)
    rnd = run_round(desched_cluster, desched_release, _name("descheduler-audit-201"), logs)
    chart_user = f"system:serviceaccount:{ns}:{desched_release.name}"
    assert rnd.user == chart_user and rnd.audit_complete is True
    evicted = rnd.result.by_fate(Fate.EVICTED, lab_ns)
    assert evicted, f"expected an eviction, got {rnd.result.counts(lab_ns)}"
    view = audit.compare(rnd.result, rnd.audit_requests, uids, {lab_ns}, user=chart_user)
    assert view.agrees, view.disagreements
    assert view.evicted_201 == rnd.result.total_evicted == len(evicted)
    assert view.users == [chart_user] and not view.outside_lab and not view.direct_deletes
    for d in evicted:
        assert view.codes(lab_ns, d.name) == [201]
        assert view.pods[d.key].uid in before.uids
        live = {p.uid for p in violating_lab.snapshot().live}
        assert view.pods[d.key].uid not in live  # evicted: deleting or gone


def _writes_outside_status(obj: Any) -> list[tuple[str, str, str]]:
    """Who last wrote which part of `obj`, its status subresource left out (the controller's)."""
    return sorted(
        (m.manager or "", m.operation or "", str(m.time))
        for m in obj.metadata.managed_fields or []
        if m.subresource != "status"
    )
