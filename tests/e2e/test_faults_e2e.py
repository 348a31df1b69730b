"""The fault matrix (issue 19): the cluster misbehaves mid-round; the experiment fails closed.

The embedded provider breaks its own cluster (providers/embedded/faults.py) at a chosen
point of the positive experiment's round: before the Job, while the descheduler runs (its
log got a line), or right after the API server audited the first eviction. Every case then
checks, from the cluster, the audit log and the result, never from the injector's word:

* a clear verdict: outcome fail or error (never a pass), its message naming the fault (the
  unreachable API server and what /readyz says, the killed process, the broken watch...) or,
  for a failed check, the layer where the fault showed; and never the round's 120 s timeout;
* no eviction beyond the policy's per-namespace cap (201s in the audit log);
* the PDB never below its desired healthy count, at any status a watch of our own saw;
* right after the emergency stop: the CronJob suspended, the PDB the same object with the
  same spec (uid, generation, minAvailable);
* the lab's cleanup complete (namespace gone, node labels restored), every component
  running again, no round process left; and the next run starts clean: a plain positive
  experiment passes on the same cluster.

The matrix runs on a cluster of its own, so the session's cluster never sees a fault. Each
case, its clean follow-up run included, stays under CASE_BUDGET_S.

Not in the matrix, on purpose: node NotReady / cordon / scheduler stop *after* the eviction,
and SIGKILL after the eviction. The replacement is scheduled and Ready within tens of
milliseconds of the eviction, and the one-shot descheduler exits right after its last
eviction, so whether such a fault lands before or after is a coin toss; those faults are
injected while the descheduler runs instead, where the outcome is decided either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.experiments import ExperimentContext, ExperimentResult, run_experiment
from pytest_desched.kube import node_ready, wait_for
from pytest_desched.lab.inputs import POOL_LABEL
from pytest_desched.lab.recorder import Recorder, record_lab
from pytest_desched.providers.audit_log import AuditWindow, EvictionRequest
from pytest_desched.providers.embedded.faults import COMPONENTS, Faults, Trigger
from pytest_desched.session import DeschedSession

pytestmark = [pytest.mark.desched_selftest, pytest.mark.faults]

VARIANT = "pdb-lister-workaround"  # passes untouched on v0.36.0: any failure is the fault's
CASE_BUDGET_S = 60.0
RECOVERY_S = 15.0  # how long assess waits for replicas Ready (default 60): the budget


@pytest.fixture(scope="module")
def fault_session(
    request: pytest.FixtureRequest, desched_settings: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeschedSession]:
    """An embedded cluster of the matrix's own, with the release installed; removed after."""
    from pytest_desched.plugin.reporting import terminal_reporter

    run_dir = tmp_path_factory.mktemp("faults")
    config = desched_settings.with_(
        provider="embedded", run_dir=run_dir, artifacts=run_dir / "artifacts", keep="never"
    )
    session = DeschedSession(config, report=terminal_reporter(request.config))
    try:
        session.release  # noqa: B018 (cluster and release up now, not inside the first case)
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def faults(fault_session: DeschedSession) -> Iterator[Faults]:
    f = Faults(fault_session.cluster)
    try:
        yield f
    finally:
        f.release()


# -- what the harness sees, beside the engine ------------------------------------------------
@dataclass
class Seen:
    """The cluster as a second observer saw it during one faulted experiment."""

    pdb_before: dict[str, Any] | None = None
    pdb_after_stop: dict[str, Any] | None = None
    cronjob_suspended_after_stop: bool | None = None
    audit: list[EvictionRequest] = field(default_factory=list)
    pdb_statuses: list[tuple[float, int, int, int]] = field(default_factory=list)
    window: AuditWindow | None = None
    rec: Recorder | None = None
    _rec_cm: AbstractContextManager[Recorder] | None = None


def _pdb(ctx: ExperimentContext) -> dict[str, Any] | None:
    try:
        p = ctx.cluster.policy.read_namespaced_pod_disruption_budget("spread-demo", ctx.namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return {
        "uid": p.metadata.uid,
        "generation": p.metadata.generation,
        "minAvailable": p.spec.min_available,
    }


def _watch(ctx: ExperimentContext, seen: Seen) -> Callable[[], None]:
    def start() -> None:
        assert ctx.cluster.audit_log is not None, "the embedded cluster writes an audit log"
        seen.window = AuditWindow(ctx.cluster.audit_log)
        seen.pdb_before = _pdb(ctx)
        seen._rec_cm = record_lab(ctx.cluster, ctx.namespace, "spread-demo")
        seen.rec = seen._rec_cm.__enter__()

    return start


def _after_stop(ctx: ExperimentContext, seen: Seen) -> Callable[[], None]:
    """At the teardown point: the emergency stop is done, the lab not yet deleted."""

    def look() -> None:
        cj = ctx.cluster.batch.read_namespaced_cron_job(
            ctx.release.cronjob_name, ctx.release.namespace
        )
        seen.cronjob_suspended_after_stop = cj.spec.suspend
        seen.pdb_after_stop = _pdb(ctx)
        if seen._rec_cm is not None:
            seen._rec_cm.__exit__(None, None, None)
            seen.pdb_statuses = list(seen.rec.pdb_statuses) if seen.rec else []
        if seen.window is not None:
            seen.audit = seen.window.read()

    return look


# -- the matrix --------------------------------------------------------------------------------
Act = Callable[[Faults, ExperimentContext], Any]


@dataclass(frozen=True)
class Case:
    """One fault at one point, and what its verdict must say."""

    fault: str
    point: str
    inject: Act
    heal: Act | None = None
    heal_at: str = "teardown"
    # allowed outcome -> substrings its message must all contain
    says: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layers: tuple[str | None, ...] = ()  # allowed deciding layers of a `fail`
    params: dict[str, Any] = field(default_factory=dict)
    prepare: Act | None = None  # at "before-job", before the watcher starts

    @property
    def id(self) -> str:
        return f"{self.fault}@{self.point}"


def _stop(component: str) -> Act:
    return lambda f, ctx: f.stop(component)


def _heal(f: Faults, ctx: ExperimentContext) -> Any:
    return f.heal_components()


def _lock(f: Faults, ctx: ExperimentContext) -> Any:
    """Take the cluster-creation lock before the point, so taking it never delays the fault."""
    return f.hold_create_lock()


API_DOWN = ("the API server failed while", "is unreachable", "failing closed")
ETCD_DOWN = ("the API server failed while", "not ready", "etcd", "failing closed")
WATCH_GAP = ("[watches-complete]",)

CASES = [
    Case(
        "kube-apiserver-stopped",
        "before-job",
        _stop("kube-apiserver"),
        _heal,
        "round-ended",
        prepare=_lock,
        says={"error": ("reading CronJob", "(no Job created)", *API_DOWN)},
    ),
    Case(
        "kube-apiserver-stopped",
        "descheduler-running",
        _stop("kube-apiserver"),
        _heal,
        "round-ended",
        prepare=_lock,
        says={"error": ("waiting for round Job", *API_DOWN)},
    ),
    Case(
        "kube-apiserver-stopped",
        "after-eviction",
        _stop("kube-apiserver"),
        _heal,
        "round-ended",
        prepare=_lock,
        # the round may have ended just before: then the broken watches fail it
        says={"error": ("waiting for round Job", *API_DOWN), "fail": WATCH_GAP},
    ),
    Case(
        "etcd-stopped",
        "before-job",
        _stop("etcd"),
        _heal,
        "round-ended",
        prepare=_lock,
        says={"error": ("reading CronJob", *ETCD_DOWN)},
    ),
    Case(
        "etcd-stopped",
        "descheduler-running",
        _stop("etcd"),
        _heal,
        "round-ended",
        prepare=_lock,
        says={"error": ("waiting for round Job", *ETCD_DOWN)},
    ),
    Case(
        "etcd-stopped",
        "after-eviction",
        _stop("etcd"),
        _heal,
        "round-ended",
        prepare=_lock,
        says={"error": ("waiting for round Job", *ETCD_DOWN)},
    ),
    Case(
        "descheduler-sigkill",
        "descheduler-running",
        lambda f, ctx: f.kill_descheduler(),
        says={"error": ("RoundFailed", "exited 137", "killed by signal SIGKILL")},
    ),
    Case(
        "kube-scheduler-stopped",
        "before-job",
        _stop("kube-scheduler"),
        _heal,
        prepare=_lock,
        says={"error": ("unscheduled after", "no scheduler has acted on it")},
    ),
    Case(
        "kube-scheduler-stopped",
        "descheduler-running",
        _stop("kube-scheduler"),
        _heal,
        prepare=_lock,
        says={"fail": ("[replicas-ready]", "deciding layer: scheduler")},
        layers=("scheduler",),
    ),
    Case(
        "target-not-ready",
        "before-job",
        lambda f, ctx: f.node_not_ready(ctx.target),
        lambda f, ctx: f.node_ready_again(ctx.target),
        says={"fail": ("[one-evicted]", "deciding layer: evictor-prefilter-nodefit")},
        layers=("evictor-prefilter-nodefit",),
    ),
    Case(
        "target-not-ready",
        "descheduler-running",
        lambda f, ctx: f.node_not_ready(ctx.target),
        lambda f, ctx: f.node_ready_again(ctx.target),
        # the descheduler saw the node NotReady (nodeFit) or evicted first (Pending)
        says={"fail": ("deciding layer:",)},
        layers=("evictor-prefilter-nodefit", "scheduler"),
    ),
    Case(
        "target-cordoned",
        "before-job",
        lambda f, ctx: f.cordon(ctx.target),
        lambda f, ctx: f.cordon(ctx.target, on=False),
        says={"fail": ("[one-evicted]", "deciding layer: evictor-prefilter-nodefit")},
        layers=("evictor-prefilter-nodefit",),
    ),
    Case(
        "target-cordoned",
        "descheduler-running",
        lambda f, ctx: f.cordon(ctx.target),
        lambda f, ctx: f.cordon(ctx.target, on=False),
        says={"fail": ("deciding layer:",)},
        layers=("evictor-prefilter-nodefit", "scheduler"),
    ),
    Case(
        "pdb-watch-disconnected",
        "descheduler-running",
        lambda f, ctx: f.disconnect_watch("pdb", ctx.namespace),
        says={"fail": (*WATCH_GAP, "pdb watch broke")},
        layers=("api-server(evicted)",),
    ),
    Case(
        "pod-watch-disconnected",
        "after-eviction",
        lambda f, ctx: f.disconnect_watch("pods", ctx.namespace),
        says={"fail": (*WATCH_GAP, "pods watch broke")},
        layers=("api-server(evicted)",),
    ),
]


def _run_case(
    session: DeschedSession, faults: Faults, case: Case, record: Callable[[str, Any], None]
) -> tuple[ExperimentResult, Seen, Trigger, ExperimentContext, float]:
    ctx = replace(
        session.context(variant=VARIANT, why="fault matrix", **case.params),
        recovery_timeout=RECOVERY_S,
    )
    seen = Seen()
    trigger = Trigger(
        faults,
        case.point,
        inject=lambda: case.inject(faults, ctx),
        heal=(lambda: case.heal(faults, ctx)) if case.heal else None,
        heal_at=case.heal_at,
        prepare=(lambda: case.prepare(faults, ctx)) if case.prepare else None,
        on_before_job=_watch(ctx, seen),
        on_teardown=_after_stop(ctx, seen),
    )
    ctx = replace(ctx, on_point=trigger)  # the trigger's hooks see the same fields
    t0 = time.monotonic()
    result = run_experiment("positive", ctx, VARIANT)
    took = time.monotonic() - t0
    record("fault.case", case.id)
    record("fault.experiment_s", round(took, 2))
    record("fault.outcome", result.outcome)
    return result, seen, trigger, ctx, took


def _assert_fails_closed(
    case: Case, result: ExperimentResult, seen: Seen, trigger: Trigger, ctx: ExperimentContext
) -> None:
    events = [(round(e.t, 2), e.fault, e.action, e.detail) for e in trigger.faults.events]
    assert trigger.fired is not None and not trigger.errors, (
        f"{case.id} was not injected: {trigger.errors}; events {events}"
    )
    # a clear verdict: never a pass, never the round's bare timeout
    assert result.outcome in case.says, (
        f"{case.id}: outcome {result.outcome} (want {sorted(case.says)}): {result.message}"
    )
    missing = [s for s in case.says[result.outcome] if s not in result.message]
    assert not missing, f"{case.id}: verdict does not say {missing}:\n{result.message}"
    assert "timed out after 120s" not in result.message, result.message
    if result.outcome == "fail" and case.layers:
        assert result.blocking_layer in case.layers, (result.blocking_layer, result.message)
    # no eviction beyond the policy's caps, by the API server's own record
    lab_201 = [r for r in seen.audit if r.is_eviction and r.code == 201]
    cap = ctx.policy.limits["namespace"]
    assert cap is not None and len(lab_201) <= cap, f"{len(lab_201)} evictions, cap {cap}"
    assert all(r.namespace == ctx.namespace for r in lab_201), lab_201
    # the PDB never below desired healthy, at any status a watch of our own saw
    assert seen.pdb_statuses, "the harness's PDB watch saw no status"
    breaches = [(t, cur, want) for t, cur, want, _ in seen.pdb_statuses if cur < want]
    assert not breaches, f"PDB below desired healthy: {breaches}"
    # the emergency stop: CronJob suspended, the PDB untouched
    assert "'suspended': True" in result.artifacts.get("emergency stop", ""), result.artifacts
    assert seen.cronjob_suspended_after_stop is True
    assert seen.pdb_before is not None and seen.pdb_after_stop == seen.pdb_before, (
        seen.pdb_before,
        seen.pdb_after_stop,
    )


def _assert_clean_after(session: DeschedSession, faults: Faults, ctx: ExperimentContext) -> None:
    """The lab is gone, the cluster whole again, no round process left."""
    core = ctx.cluster.core
    # The lab's namespace is deleted in the background (lab/reaper.py): its pods at once,
    # the namespace within the namespace controller's delay; the final scan is this wait.
    assert core.list_namespaced_pod(ctx.namespace).items == [], "a lab pod outlived the lab"
    ctx.cluster.namespace_reaper.wait_gone([ctx.namespace], timeout=30)
    with pytest.raises(ApiException) as gone:
        core.read_namespace(ctx.namespace)
    assert gone.value.status == 404, f"lab namespace {ctx.namespace} left behind"
    nodes = core.list_node().items
    assert not [n.metadata.name for n in nodes if POOL_LABEL in (n.metadata.labels or {})]
    assert all(node_ready(n) and not n.spec.unschedulable for n in nodes), [
        (n.metadata.name, node_ready(n), n.spec.unschedulable) for n in nodes
    ]
    assert {c: faults.pid(c) is not None for c in COMPONENTS} == dict.fromkeys(COMPONENTS, True)
    wait_for("round processes to end", faults.round_processes, lambda p: not p, timeout=30)


def _recorder(request: pytest.FixtureRequest) -> Callable[[str, Any], None]:
    """The case's figures as JUnit properties (measured times, outcome)."""
    return lambda key, value: request.node.user_properties.append((key, value))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fault_fails_closed_and_cleans_up(
    fault_session: DeschedSession, faults: Faults, case: Case, request: pytest.FixtureRequest
) -> None:
    record_property = _recorder(request)
    t0 = time.monotonic()
    faults.events.clear()
    result, seen, trigger, ctx, _ = _run_case(fault_session, faults, case, record_property)
    _assert_fails_closed(case, result, seen, trigger, ctx)
    if case.fault == "descheduler-sigkill":
        _assert_no_retry(ctx, result)
    _assert_clean_after(fault_session, faults, ctx)
    # A round left running by the fault may evict after the teardown point: its process has
    # ended now, so the audit log holds everything it ever did. Still within the cap.
    assert seen.window is not None
    lab_201 = [r for r in seen.window.read() if r.is_eviction and r.code == 201]
    assert len(lab_201) <= (ctx.policy.limits["namespace"] or 0), lab_201
    again = fault_session.run("positive", variant=VARIANT)  # the next run starts clean
    assert again.outcome == "pass", again.message
    assert [len(r.pod_runs) for r in again.rounds] == [1], "a stale pod run joined the round"
    took = time.monotonic() - t0
    record_property("fault.case_s", round(took, 2))
    assert took < CASE_BUDGET_S, f"{case.id} took {took:.1f}s (budget {CASE_BUDGET_S:.0f}s)"


def _assert_no_retry(ctx: ExperimentContext, result: ExperimentResult) -> None:
    """The killed round's Job ran out of retries: Failed, and no second pod ever started."""
    name = result.message.split("round Job ", 1)[1].split(" ", 1)[0].split("/", 1)[1]

    def conditions() -> dict[str, tuple[str, str]]:
        job = ctx.cluster.batch.read_namespaced_job(name, ctx.release.namespace)
        assert job.spec.backoff_limit == 0, "the Job was left retries"
        return {c.type: (c.status, c.reason) for c in job.status.conditions or []}

    wait_for(
        f"Job {name} Failed (BackoffLimitExceeded)",
        conditions,
        lambda c: c.get("Failed") == ("True", "BackoffLimitExceeded"),
        timeout=20,
    )
    pods = ctx.cluster.core.list_namespaced_pod(
        ctx.release.namespace, label_selector=f"job-name={name}"
    ).items
    assert len(pods) == 1, [p.metadata.name for p in pods]


# -- the eviction-storm guard ------------------------------------------------------------------
STORM_REPLICAS = 8  # all on the source, all violating the affinity once the label moves


@pytest.mark.parametrize("caps", [3, 20], ids=["caps-3", "caps-20"])
def test_eviction_storm_is_bounded(
    fault_session: DeschedSession, faults: Faults, caps: int, request: pytest.FixtureRequest
) -> None:
    """Caps above the runbook's one pod, eight violating pods: the audit log's 201s never
    exceed the caps (with caps 3: exactly 3, the rest stopped at the eviction-limits layer),
    and the PDB never drops below its desired healthy count, whatever the caps let through.

    With caps 20 all eight may go: kwok makes each replacement Ready within milliseconds, so
    the budget (minAvailable 2) is never exhausted; the PDB protects availability, and the
    caps are the only bound on the count, which is why they must hold.
    """
    overrides = {
        "maxNoOfPodsToEvictPerNode": caps,
        "maxNoOfPodsToEvictPerNamespace": caps,
        "maxNoOfPodsToEvictTotal": caps,
    }
    case = Case(
        "eviction-storm",
        "before-job",
        lambda f, ctx: None,  # no fault: the policy is the hazard
        says={"fail": ("[one-evicted]",)},
        params={"replicas": STORM_REPLICAS, "overrides": overrides},
    )
    record_property = _recorder(request)
    t0 = time.monotonic()
    result, seen, _, ctx, _ = _run_case(fault_session, faults, case, record_property)
    lab_201 = [r for r in seen.audit if r.is_eviction and r.code == 201]
    other = [r for r in seen.audit if r.is_eviction and r.code not in (201, 429)]
    record_property("fault.storm_201s", len(lab_201))
    assert result.outcome == "fail" and "[one-evicted]" in result.message, result.message
    assert len(lab_201) == result.evictions, "the log and the audit log disagree"
    assert len(lab_201) <= min(caps, STORM_REPLICAS), (len(lab_201), caps)
    assert not other, other
    if caps < STORM_REPLICAS:  # the caps bound the storm exactly, at their own layer
        assert len(lab_201) == caps
        limited = [d for d in result.rounds[0].result.in_namespace(ctx.namespace)]
        assert any(d.layer.value == "eviction-limits" for d in limited), limited
    breaches = [(t, cur, want) for t, cur, want, _ in seen.pdb_statuses if cur < want]
    assert seen.pdb_statuses and not breaches, breaches
    assert seen.cronjob_suspended_after_stop is True
    assert seen.pdb_after_stop == seen.pdb_before
    _assert_clean_after(fault_session, faults, ctx)
    took = time.monotonic() - t0
    record_property("fault.case_s", round(took, 2))
    assert took < CASE_BUDGET_S, f"storm took {took:.1f}s"


def test_release_cleanup_leaves_nothing(fault_session: DeschedSession) -> None:
    """After the whole matrix: the release's cleanup removes everything it made."""
    from pytest_desched.descheduler.cleanup import cleanup_release

    out = cleanup_release(fault_session.cluster, fault_session.release)
    assert out["leftovers"] == [], out
