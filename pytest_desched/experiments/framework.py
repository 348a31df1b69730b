"""The experiment framework: declared steps (arrange / act / assess), checks, one result.

An experiment is a subclass of `Experiment` in a module of its own; defining it registers
it by name. `run_experiment` runs its steps in order on a `Runner` (lab, rounds, records,
known-bug classification, lab teardown) and always returns one `ExperimentResult`; the
front ends decide what an outcome means to them (pytest raises, the command line exits).
Every "nothing was evicted" claim is paired with the layer that stopped the eviction, read
from the descheduler's own log and the API server's audit log: unchanged UIDs alone are
never evidence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.decisions import Fate, PodDecision, RoundVerdict, decide
from pytest_desched.descheduler.known_bugs import (
    BY_ID,
    ROUND_FINISHED,
    Classification,
    RoundFacts,
    classify,
    hang_cause,
)
from pytest_desched.descheduler.node_selector import node_facts
from pytest_desched.descheduler.policy import Policy, digest_of_rendered, load_default
from pytest_desched.descheduler.rounds import RUN_ID, RUN_LABEL, Round
from pytest_desched.errors import RoundHung
from pytest_desched.evidence.assemble import (
    LabObservation,
    RoundOutcome,
    RunFacts,
    build_round_record,
)
from pytest_desched.evidence.timeline import live_policy_lint
from pytest_desched.evidence.writer import keep_log
from pytest_desched.lab import POOL_LABEL, POOL_VALUE, Lab, Recorder, Snapshot
from pytest_desched.outcome.availability import OwnerWindow, owner_windows, windows_to_dict
from pytest_desched.outcome.fates import Layer

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.evidence.writer import EvidenceWriter
    from pytest_desched.providers.base import Cluster
from pytest_desched.descheduler.audit import compare
from pytest_desched.descheduler.rounds import run_round, runbook_job_name
from pytest_desched.experiments.assertions import no_rollout
from pytest_desched.experiments.results import Check, ExperimentResult
from pytest_desched.kube import wait_for
from pytest_desched.tools.versions import load_versions

EVICTOR = "profiles.safe-rebalance.DefaultEvictor"

# --- policy variants ------------------------------------------------------------
MIN_POD_AGE_WHY = (
    "lab pods are seconds old; the runbook's 10m would filter every candidate "
    "(test_minpodage_protects_young_pods proves the unmodified value does)"
)
USER_MIN_POD_AGE_WHY = (
    "lab pods are seconds old; your policy's minPodAge would filter every candidate (a pod "
    "younger than it is never evicted)"
)
BUG_1882 = (
    f"descheduler v0.36.0 bug {BY_ID['descheduler#1882'].link}: the PodsWithoutPDB protection "
    "reads a PodDisruptionBudget lister that is never started, so every pod looks uncovered "
    "and is filtered; the PDB itself stays in force at the API server"
)
VARIANTS = ("runbook", "pdb-lister-workaround")


def lab_policy(
    variant: str = "runbook", keep_min_pod_age: bool = False, base: Policy | None = None
) -> Policy:
    """The runbook policy (or the user's `base`) with each lab deviation explicit and recorded.

    The deviations are the same for any policy: minPodAge 0s (lab pods are seconds old) and,
    for `pdb-lister-workaround`, PodsWithoutPDB out of the evictor's extraEnabled (bug 1882).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown policy variant {variant!r}; use one of {VARIANTS}")
    if base is not None:
        return _lab_deviations(base, variant, keep_min_pod_age).validate()
    p = load_default()
    if not keep_min_pod_age:
        p = p.override(f"{EVICTOR}.minPodAge", "0s", why=MIN_POD_AGE_WHY)
    if variant == "pdb-lister-workaround":
        extra = [
            x for x in p.evictor_args()["podProtections"]["extraEnabled"] if x != "PodsWithoutPDB"
        ]
        p = p.override(f"{EVICTOR}.podProtections.extraEnabled", extra, why=BUG_1882)
    return p.validate()


def _lab_deviations(p: Policy, variant: str, keep_min_pod_age: bool) -> Policy:
    """The lab's deviations on every profile of a user's policy that has the setting."""
    for i in range(len(p.profile_names)):
        args = p.evictor_args(i)
        where = f"profiles[{i}].DefaultEvictor"
        if not keep_min_pod_age and args.get("minPodAge") not in (None, "0s"):
            p = p.override(f"{where}.minPodAge", "0s", why=USER_MIN_POD_AGE_WHY)
        extra = (args.get("podProtections") or {}).get("extraEnabled") or []
        if variant == "pdb-lister-workaround" and "PodsWithoutPDB" in extra:
            kept = [x for x in extra if x != "PodsWithoutPDB"]
            p = p.override(f"{where}.podProtections.extraEnabled", kept, why=BUG_1882)
    return p


# --- context ------------------------------------------------------------------
@dataclass(frozen=True)
class ExperimentContext:
    """What an experiment needs: cluster, release, nodes, policy, where evidence goes.
    Built whole where it is made (session.context); variants are `dataclasses.replace` copies.

    `policy_label` files the records of a caller's own policy under its own name instead of
    the built-in variant's. `on_point`, when set, is called at fixed points of each round so
    a caller can act there (the embedded provider's fault injector): "before-job" (the
    watches are on, no Job exists yet), "round-ended" (the Job finished or its wait raised)
    and, once per experiment, "teardown" (after any emergency stop, before the lab goes).
    Points inside the round (the descheduler running, an eviction) are the caller's to
    detect from "before-job" on; see providers/embedded/faults.py.
    """

    cluster: Cluster
    release: Release
    policy: Policy
    source: str
    target: str
    namespace: str = "descheduler-lab"
    replicas: int = 3
    log_dir: Path = Path("desched-artifacts/logs")
    evidence: EvidenceWriter | None = None
    round_timeout: float = 120
    recovery_timeout: float = 60
    on_record: Callable[[dict[str, Any]], None] | None = None
    keep_lab: bool = False
    policy_label: str | None = None
    on_point: Callable[[str], None] | None = None
    # A lane's (experiments/lanes.py): its own pool, namespace, nodes, release and Job names.
    pool: str = POOL_VALUE
    lane: str | None = None
    # Installs the lane's own release (suspended, dry run) beside the lab's arrange step.
    prepare_release: Callable[[], Release] | None = None
    # Which policy and Helm values the user gave (descheduler.inputs.UserInputs.evidence():
    # file names and sha256 digests, the lab's flags on top); every round record carries it.
    inputs: dict[str, Any] | None = None
    # K descheduling cycles (experiments/cycles.py: K Jobs, the lab settled between them) and
    # whether "no eviction loop in K cycles" is a check of this run.
    cycles: int = 1
    no_loop: bool = False

    def lab(self) -> Lab:

        return Lab(  # not from the release: a lane's may still be installing (prepare_release)
            self.cluster,
            self.namespace,
            replicas=self.replicas,
            image=load_versions().workload_image,
            pool=self.pool,
        )

    @property
    def descheduler_version(self) -> str:
        """The version of the descheduler under test: the release's (a canary's differs)."""
        return self.release.descheduler_version


@dataclass(frozen=True)
class RolloutBaseline:
    """The runbook Deployment before the label move: what a rollout would change."""

    replicasets: dict[str, str]  # name -> pod-template-hash
    owners: frozenset[str | None]  # the ReplicaSets owning its pods
    generation: int  # metadata.generation: moves only when the spec does


@dataclass
class RoundView:
    """One round as an experiment sees it: the Job, the watch, and the lab before and after."""

    rnd: Round
    rec: Recorder
    before: Snapshot
    after: Snapshot
    decisions: list[PodDecision]
    ready_nodes: int
    audit: dict[str, Any]
    refused_by_api: dict[str, list[int]]  # "ns/name" -> eviction response codes (API's view)
    replacement: str | None = None  # ready | missing | pending (assess sets it, record writes)
    extra: dict[str, Any] = field(default_factory=dict)


class Runner:
    """Runs one experiment: policy in place, lab set up, rounds recorded, lab torn down."""

    dry_run_rounds = False  # its Jobs in dry run whatever the CronJob says (force_dry_run)

    def __init__(self, ctx: ExperimentContext, name: str, variant: str) -> None:
        self.ctx = ctx
        self.result = ExperimentResult(name, ctx.policy_label or variant)
        self.t0 = time.monotonic()
        self.lab = ctx.lab()
        self._recording = ExitStack()
        self.facts: RoundFacts | None = None  # the last round's, for known-bug classification
        self.hang_verdict: RoundVerdict | None = None  # what stopped a timed-out round (hung)
        self.views: list[RoundView] = []
        self.rollout_baseline: RolloutBaseline | None = None  # set by arrange_violation

    @property
    def label(self) -> str:
        return f"{self.result.name}[{self.result.variant}]"

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Add a step's duration to `result.timings` (the benchmark's phase breakdown)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            t = self.result.timings
            t[step] = round(t.get(step, 0.0) + time.monotonic() - t0, 3)

    def use_release(self, release: Release) -> None:
        """Drive a deferred `release`, once installed: on the runner's copy of the context."""
        self.ctx = replace(self.ctx, release=release, prepare_release=None)

    def check(self, id: str, name: str, ok: bool, detail: str = "") -> bool:
        self.result.checks.append(Check(id, name, bool(ok), detail))
        return bool(ok)

    def ensure_policy(self) -> None:
        rel, pol = self.ctx.release, self.ctx.policy
        if rel.policy is None or rel.policy.digest() != pol.digest() or rel.dry_run is not False:
            rel.apply_policy(pol, dry_run=False)
        self.result.policy_digest = pol.digest()
        self.result.overrides = list(pol.overrides)

    def arrange_violation(self, pdb_min_available: int | None = 2) -> Snapshot:
        """Runbook: label only the source, deploy, move the label to the target, add the PDB."""
        lab, src, dst = self.lab, self.ctx.source, self.ctx.target
        lab.create_namespace()
        lab.label_node(src)
        s0 = lab.deploy()
        self.check(
            "starts-on-source",
            "all pods start on the source",
            set(s0.by_node()) == {src} and len(s0.ready()) == self.ctx.replicas,
            f"distribution {s0.by_node()}",
        )
        # `no-rollout` is judged after the last round (check_no_rollout), not milliseconds
        # after the move: a rollout shows as a new ReplicaSet or a pod it owns, at any time.
        self.rollout_baseline = RolloutBaseline(
            lab.replicasets(), frozenset(p.owner for p in s0.live), lab.deployment_generation()
        )
        lab.label_node(dst)
        lab.unlabel_node(src)
        s1 = lab.snapshot()
        self.check(
            "pods-violate-affinity",
            "pods now violate their required node affinity",
            src not in lab.labelled_nodes() and all(p.node == src for p in s1.live),
            f"nodes with {POOL_LABEL}: {lab.labelled_nodes()}",
        )
        if pdb_min_available is not None:
            lab.create_pdb(min_available=pdb_min_available)
            lab.wait_pdb(max(0, self.ctx.replicas - pdb_min_available))
        return s1

    def check_no_rollout(self) -> None:
        """Runbook: moving the label triggers no rollout, over the whole experiment.

        Compared with the baseline taken before the label move: the Deployment's ReplicaSets
        and spec generation after the last round, and the owner of every pod of it the round
        watches saw and the lab holds now (replacements come from the same ReplicaSet).
        """
        base = self.rollout_baseline
        if base is None:
            return
        app = self.lab.app
        seen = [
            e.get("owner") for v in self.views for e in v.rec.pod_events if e.get("workload") == app
        ]
        seen += [p.owner for p in self.lab.snapshot().of(app)]
        self.result.checks.append(
            no_rollout(base, self.lab.replicasets(), self.lab.deployment_generation(), seen)
        )

    def run_round(self, name: str) -> RoundView:
        """One Job round, watched from before the Job exists until `stop_recording()`."""
        # The runbook's own name, so its commands find the Job; a run suffix only on collision.
        if self.ctx.lane:
            name = f"{name}-{self.ctx.lane}"
        name = runbook_job_name(self.ctx.cluster, self.ctx.release.namespace, name)
        before = self.lab.snapshot()
        pol = self.ctx.release.policy or self.ctx.policy  # what the round runs with
        nodes = node_facts(self.ctx.cluster.core.list_node().items, pol.to_dict())
        rec = self._recording.enter_context(self.lab.record())
        if before.pdb is not None and not self.dry_run_rounds:  # watched before it can evict
            wait_for(
                f"the watch on PDB {self.ctx.namespace}/{self.lab.app} to deliver its status",
                lambda: len(rec.pdb_statuses),
                lambda n: n > 0,
                timeout=10,
            )
        self.point("before-job")
        try:
            # a failed round's full log is named in the evidence folder, not a temp folder
            with self.timed("round"), keep_log(self.ctx.evidence, self.label):
                rnd = run_round(
                    self.ctx.cluster,
                    self.ctx.release,
                    name,
                    self.ctx.log_dir,
                    self.ctx.round_timeout,
                    wait_job=False,  # the Job's condition is checked at record (settle)
                    dry_run=self.dry_run_rounds,
                )
        finally:
            self.point("round-ended")
        after = self.lab.snapshot()
        self.result.rounds.append(rnd)
        # Every namespace the lab owns (a workload may live in a second one): decisions, audit
        # codes and the outside-lab check all cover each of them, none is "outside".
        decisions = rnd.result.in_namespaces(self.lab.namespaces)
        audit, by_pod = self._audit(rnd, decisions, before)
        view = RoundView(rnd, rec, before, after, decisions, nodes["ready_nodes"], audit, by_pod)
        self.views.append(view)
        evicted = [d for d in decisions if d.fate == Fate.EVICTED]
        self.result.evictions = len(evicted)
        decided = decide(decisions, rnd.result.skipped, errors=rnd.result.errors)
        self.result.blocking_layer, self.result.verdict = decided.label, decided.verdict
        self.check(
            "round-not-skipped",
            "the descheduler ran its cycle (not skipped)",
            not rnd.result.skipped,
            f"skipped: {rnd.result.skipped}",
        )
        if audit.get("available"):
            self.check(
                "log-matches-audit",
                "the descheduler's log and the API server's audit log agree on every eviction",
                not audit.get("disagreements"),
                "; ".join(audit.get("disagreements") or []),
            )
            self.check(
                "no-eviction-outside-lab",
                "no eviction touched a pod outside the lab's namespaces",
                not audit.get("outside_lab"),
                f"evicted outside the lab: {audit.get('outside_lab')}",
            )
        else:
            self.result.notes.append(
                f"no API-server audit log: {audit.get('unavailable_why')}; evidence is the descheduler's "
                "log, events and pod UIDs"
            )
        self.facts = RoundFacts(
            experiment=self.result.name,
            descheduler_version=self.ctx.descheduler_version,
            failed_checks=frozenset(),
            decisions=tuple(decisions),
            log=rnd.logs,
            replicas=self.ctx.replicas,
            pdb_expected_pods=(before.pdb or {}).get("expectedPods") if before.pdb else None,
            lab_pods_running=frozenset(p.name for p in before.live if p.phase == "Running"),
            **nodes,
        )
        if rnd.timed_out is not None:
            self.hung(rnd)
        return view

    def hung(self, rnd: Round) -> None:
        """A round that did not finish in time (stopped: rounds.stop_round) ran no cycle to
        check: its one check fails, naming the registered cause its log shows, if any, and
        RoundHung ends the experiment's steps (drive() still records and classifies it)."""
        assert self.facts is not None
        cause = hang_cause(self.facts)
        why = f"{rnd.timed_out}; the Job was deleted with its pods and its process ended"
        layer = cause[0].stops_at if cause is not None else None
        if cause is not None and layer:
            bug, evidence = cause
            why += f"; {bug.id} ({bug.title}): {evidence}"
            self.hang_verdict = RoundVerdict(f"stopped-by:{layer}", Layer(layer))
        else:
            self.hang_verdict = RoundVerdict("timed-out")
        self.result.blocking_layer = self.hang_verdict.label
        self.result.verdict = self.hang_verdict.verdict
        self.check(
            ROUND_FINISHED,
            f"round {rnd.name} finished within {self.ctx.round_timeout:.0f}s",
            False,
            why,
        )
        raise RoundHung(f"round {rnd.name} did not finish: {why}")

    def _audit(
        self, rnd: Round, decisions: list[PodDecision], before: Snapshot
    ) -> tuple[dict[str, Any], dict[str, list[int]]]:
        """The API server's own view of the round's eviction requests, per lab pod."""
        namespaces = set(self.lab.namespaces)
        requests, others = rnd.audit_requests, 0
        if self.ctx.lane and requests is not None:
            # Lanes' rounds share the audit window: another lane's descheduler evicting in its
            # own namespace is not this round's; any request touching this lab still counts.
            mine = [r for r in requests if r.user == rnd.user or r.namespace in namespaces]
            requests, others = mine, len(requests) - len(mine)
        view = compare(
            rnd.result,
            requests,
            uids={p.key: p.uid for p in before.pods},
            lab_namespaces=namespaces,
            user=rnd.user,
            unavailable_why=getattr(self.ctx.cluster, "audit_unavailable_why", None),
        )
        if others:
            view.notes.append(
                f"lane {self.ctx.lane}: {others} request(s) by other lanes' descheduler outside "
                "this lab left out"
            )
        if rnd.audit_requests is not None and rnd.audit_complete is False:
            view.disagreements.append(
                f"the audit window holds fewer eviction requests than the log proves were sent "
                f"(waited {rnd.audit_wait_s}s)"
            )
        by_pod = {
            key: [c for c in pa.codes if c is not None]
            for key, pa in view.pods.items()
            if pa.namespace in namespaces
        }
        return view.to_dict(), by_pod

    def point(self, name: str) -> None:
        """Tell the context's `on_point` hook (if any) that the round reached `name`."""
        if self.ctx.on_point is not None:
            self.ctx.on_point(name)

    def stop_recording(self) -> None:
        self._recording.close()

    def availability(self, view: RoundView) -> dict[str, OwnerWindow]:
        """Each owner's available replicas from the round's Job until now (the rebuild window),
        from the round's pod watch; filed with the round as `availability`, once: an assess
        step that reads it first fixes the figures the record carries."""
        if "availability" in view.extra:
            return {o: OwnerWindow.from_dict(d) for o, d in view.extra["availability"].items()}
        end = time.monotonic()
        try:  # the owners' spec: a round whose control plane died still gets its record
            desired = self.lab.desired_replicas()
        except Exception as exc:
            view.extra.setdefault("notes", []).append(
                f"availability not measured: the owners' desired replicas could not be read "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            )
            view.extra["availability"] = {}
            return {}
        windows = owner_windows(
            list(view.rec.pod_events),
            desired,
            view.rnd.started,
            end,
            initial=[p.__dict__ for p in view.before.pods],
        )
        view.extra["availability"] = windows_to_dict(windows)
        return windows

    def pdb_kept_healthy(self, rec: Recorder) -> None:
        """Runbook: the PDB's healthy count never drops below what it wants, at any status seen."""
        breaches = rec.pdb_breaches()
        self.check(
            "pdb-healthy",
            "PDB currentHealthy >= desiredHealthy at every status observed during the round",
            bool(rec.pdb_statuses) and not breaches,
            f"{len(rec.pdb_statuses)} statuses seen, breaches (t, current, desired) {breaches}",
        )

    def record(self, view: RoundView) -> dict[str, Any]:
        """Settle the round, observe the lab, build its record (pure), write and emit it."""
        self.availability(view)  # the window closes here unless assess closed it
        self.stop_recording()
        rnd, ctx = view.rnd, self.ctx
        rnd.settle(ctx.cluster)  # the Job controller's verdict, batched up to 1 s
        if rnd.timed_out is None:  # a timed-out round failed ROUND_FINISHED instead
            self.check(
                "job-completed",
                f"round {rnd.name} Job completed",
                rnd.succeeded,
                f"exit {rnd.exit_code}, {rnd.conditions}",
            )
        self.check(
            "watches-complete",
            "the pod and PDB watches ran without errors for the whole round",
            not view.rec.watch_errors,
            "; ".join((view.rec.watch_errors or view.rec.watch_notes)[:5]),
        )
        log_path = str(rnd.log_path) if rnd.log_path else None
        if ctx.evidence is not None:  # the audit copy of the log, redacted like the record
            log_path = str(ctx.evidence.write_log(self.label, rnd.name, rnd.logs))
        decided = decide(view.decisions, rnd.result.skipped, view.replacement, rnd.result.errors)
        if rnd.timed_out is not None and self.hang_verdict is not None:
            decided = self.hang_verdict  # no cycle ran: what stopped it is the hang's cause
        self.result.blocking_layer, self.result.verdict = decided.label, decided.verdict
        if self.facts is not None:  # every known-bug signature the round shows, as evidence
            self.result.note_signatures(self.facts)
        outcome = RoundOutcome(
            rnd,
            view.before,
            view.audit,
            view.replacement,
            dict(view.extra),
            dict(self.result.known_bugs),
            log_path,
        )
        record = build_round_record(outcome, self.observe(view.rec), self.run_facts())
        if rnd.timed_out is not None and self.hang_verdict is not None:  # no cycle: its cause
            verdict, label = self.hang_verdict.verdict, self.hang_verdict.label
            record = replace(record, verdict=verdict, deciding_layer=label)
        d = record.to_dict()
        self.result.records.append(d)
        if ctx.evidence is not None:
            ctx.evidence.write_round(record)
        if ctx.on_record is not None:
            ctx.on_record(d)
        return d

    def observe(self, rec: Recorder) -> LabObservation:
        """Everything a round's record reads from the cluster after the round, read once."""
        ctx = self.ctx
        final = self.lab.snapshot()
        live = ctx.release.live_policy_yaml()
        digest = digest_of_rendered(live)  # canonical JSON of the live policy: Policy.digest()
        tc = getattr(ctx.cluster, "toolchain", None)
        linted = live_policy_lint(  # apply_policy's own lint of it, handed down
            live, digest, ctx.release.applied_lint, ctx.descheduler_version, tc
        )
        return LabObservation(
            pending_pods=tuple(p.name for p in final.pending()),
            distribution_after=final.by_node(),
            pdb_after=self.lab.pdb_status(),
            pdb_min_disruptions_allowed_seen=rec.min_disruptions_allowed(),
            events=tuple(self.lab.events()),
            policy_applied=live,
            policy_digest=digest,
            policy_lint=tuple(linted["policy_lint"]),
            effective_policy=linted["effective_policy"],
            pod_events=tuple(rec.pod_events),
            pdb_statuses=tuple(rec.pdb_statuses),
            clock_offset_s=time.time() - time.monotonic(),
            helm=ctx.release.helm_evidence(),
        )

    def run_facts(self) -> RunFacts:
        """What every round record of this run carries about the run itself."""
        ctx, rel = self.ctx, self.ctx.release
        return RunFacts(
            label=self.label,
            provider=ctx.cluster.provider,
            namespace=ctx.namespace,
            namespaces=tuple(self.lab.namespaces),
            versions={
                **rel.versions.summary(),
                "descheduler": rel.descheduler_version,
                "image": rel.image,
            },
            chart=rel.chart.evidence(),
            policy_overrides=tuple(ctx.policy.overrides),
            caps=ctx.policy.limits,
            preflight=rel.preflight,
            inputs=ctx.inputs,
            run_label=f"{RUN_LABEL}={RUN_ID}",  # emergency stop: delete job -l ...
            t0=self.t0,
        )

    def classify(self) -> Classification:
        """The one place a failure may become an expected failure (see known_bugs.classify)."""
        facts = self.facts or RoundFacts(
            self.result.name, self.ctx.descheduler_version, frozenset()
        )
        facts = replace(facts, failed_checks=frozenset(c.id for c in self.result.failed))
        verdict = classify(facts)
        self.result.classification = verdict.to_dict()
        return verdict

    def finish(self) -> ExperimentResult:
        """Classify the checks into the result's outcome and message; never raises."""
        self.result.duration_s = time.monotonic() - self.t0
        verdict = self.classify()
        self.result.outcome = verdict.outcome
        if verdict.outcome == "pass":
            return self.result
        failed = self.result.failed
        lines = [f"{self.label} failed {len(failed)} check(s):"]
        lines += [f"  - [{c.id}] {c.name}: {c.detail}" for c in failed]
        lines.append(f"  deciding layer: {self.result.blocking_layer} ({self.result.verdict})")
        if verdict.outcome == "xfail" and verdict.bug is not None:
            lines.append(f"  known upstream bug {verdict.bug.describe()}: {verdict.evidence}")
        lines += [
            f"  (a known-bug signature is present but does not explain this failure: {c})"
            for c in verdict.context
        ]
        self.result.message = "\n".join(lines)
        return self.result

    def failure_artifacts(self) -> dict[str, str]:
        """Logs, events, pods and PDB of the lab, captured before it is torn down."""
        import json

        arts: dict[str, str] = {}
        for rnd in self.result.rounds:
            arts[f"round {rnd.name} log"] = rnd.logs
        try:
            snap = self.lab.snapshot()
            arts["pods"] = "\n".join(
                f"{p.name} uid={p.uid} node={p.node} phase={p.phase} ready={p.ready}"
                for p in snap.pods
            )
            arts["pdb"] = json.dumps(snap.pdb, indent=1, default=str)
            arts["events"] = "\n".join(
                f"{e['type']} {e['reason']} {e['kind']}/{e['name']} uid={e['uid']}: {e['message']}"
                for e in self.lab.events()
            )
        except Exception as exc:  # the cluster may be the thing that failed
            arts["collection error"] = repr(exc)
        if self.ctx.evidence is not None:
            for name, text in arts.items():
                self.ctx.evidence.write_text(self.label, "failure-" + name.replace(" ", "-"), text)
        return arts

    def teardown(self) -> None:
        self.stop_recording()
        if not self.ctx.keep_lab:  # namespaces go in the background (lab/reaper.py)
            self.lab.teardown(background=True)

    def assess_nothing_evicted(self, v: RoundView, s1: Snapshot) -> None:
        """Negative experiments: unchanged UIDs, no new pod, and no 201 at the API server."""
        final = self.lab.snapshot()
        seen = {e["uid"] for e in v.rec.pod_events}
        self.check(
            "uids-unchanged",
            "pod UIDs unchanged",
            final.uids == s1.uids,
            f"before {sorted(s1.uids)} after {sorted(final.uids)}",
        )
        self.check(
            "no-replacement",
            "no replacement pod appeared",
            seen <= s1.uids,
            f"new uids {sorted(seen - s1.uids)}",
        )
        created = {p: c for p, c in v.refused_by_api.items() if 201 in c}
        self.check(
            "no-eviction-succeeded",
            "no eviction succeeded at the API server",
            not created and not any(d.fate == Fate.EVICTED for d in v.decisions),
            f"audit 201s {created}; decisions {decisions_table(v.decisions)}",
        )

    def assess_no_eviction_request(self, v: RoundView, s1: Snapshot) -> None:
        """A policy that must fail closed: nothing evicted (`assess_nothing_evicted`) and not
        one eviction request, even a refused one, reached the API server."""
        self.assess_nothing_evicted(v, s1)
        self.check(
            "no-eviction-request",
            "no eviction request reached the API server",
            not v.refused_by_api,
            f"audit requests {v.refused_by_api}",
        )


def decisions_table(decisions: list[PodDecision]) -> str:
    """The lab's decisions as compact tuples, for check details."""
    return str([(d.name, d.fate.value, d.layer.value, d.status_code, d.checks) for d in decisions])
