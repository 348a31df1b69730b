"""The runbook's experiments, as plain functions over a lab: arrange, one round, assess.

Every experiment returns (or raises with) a list of named checks, and each "nothing was
evicted" claim is paired with the layer that stopped the eviction, read from the
descheduler's own log: unchanged UIDs alone are never evidence.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.lab import POOL_LABEL, Lab, Snapshot
from pytest_desched.metrics import round_metrics
from pytest_desched.policy import Policy, load_default
from pytest_desched.results import Fate, Layer, PodDecision

if TYPE_CHECKING:
    from pytest_desched.chart import Release
    from pytest_desched.evidence import EvidenceWriter
    from pytest_desched.providers.base import Cluster
    from pytest_desched.rounds import Round

STRATEGY = "RemovePodsViolatingNodeAffinity"
EVICTOR = "profiles.safe-rebalance.DefaultEvictor"

# --- policy variants ------------------------------------------------------------
MIN_POD_AGE_WHY = (
    "lab pods are seconds old; the runbook's 10m would filter every candidate "
    "(test_minpodage_protects_young_pods proves the unmodified value does)"
)
BUG_1882 = (
    "descheduler v0.36.0 bug kubernetes-sigs/descheduler#1882: the PodsWithoutPDB protection "
    "reads a PodDisruptionBudget lister that is never started, so every pod looks uncovered "
    "and is filtered; the PDB itself stays in force at the API server"
)
VARIANTS = ("runbook", "pdb-lister-workaround")
# The descheduler's own log line when its event broadcaster gave up on an event at exit.
EVENT_DROPPED = '"msg":"Unable to write event'


def lab_policy(variant: str = "runbook", keep_min_pod_age: bool = False) -> Policy:
    """The runbook policy with each lab deviation explicit and recorded in `policy.overrides`."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown policy variant {variant!r}; use one of {VARIANTS}")
    p = load_default()
    if not keep_min_pod_age:
        p = p.override(f"{EVICTOR}.minPodAge", "0s", why=MIN_POD_AGE_WHY)
    if variant == "pdb-lister-workaround":
        extra = [
            x for x in p.evictor_args()["podProtections"]["extraEnabled"] if x != "PodsWithoutPDB"
        ]
        p = p.override(f"{EVICTOR}.podProtections.extraEnabled", extra, why=BUG_1882)
    return p.validate()


# --- results ------------------------------------------------------------------
@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


class ExperimentFailed(AssertionError):
    """A runbook expectation did not hold; the message lists each failed check and the layers."""


class KnownUpstreamBug(ExperimentFailed):
    """Failed, and the round's log shows the signature of a known upstream bug (named in the text)."""


@dataclass
class ExperimentResult:
    name: str
    variant: str
    checks: list[Check] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    evictions: int = 0
    blocking_layer: str | None = None
    ready_latency_s: float | None = None
    policy_digest: str = ""
    overrides: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "variant": self.variant,
            "evictions": self.evictions,
            "blocking_layer": self.blocking_layer,
            "ready_latency_s": self.ready_latency_s,
            "checks": [c.__dict__ for c in self.checks],
            "duration_s": round(self.duration_s, 2),
            "policy_digest": self.policy_digest,
            "overrides": self.overrides,
            "notes": self.notes,
        }


# --- context ------------------------------------------------------------------
@dataclass
class ExperimentContext:
    """What an experiment needs: cluster, release, nodes, policy, where evidence goes."""

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

    def lab(self) -> Lab:
        return Lab(
            self.cluster,
            self.namespace,
            replicas=self.replicas,
            image=self.release.versions.workload_image,
        )


class Runner:
    """Runs one experiment: policy in place, lab set up, rounds recorded, lab torn down."""

    def __init__(self, ctx: ExperimentContext, name: str, variant: str) -> None:
        self.ctx = ctx
        self.result = ExperimentResult(name, variant)
        self.t0 = time.monotonic()
        self.lab = ctx.lab()

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.result.checks.append(Check(name, bool(ok), detail))
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
            "all pods start on the source",
            set(s0.by_node()) == {src} and len(s0.ready()) == self.ctx.replicas,
            f"distribution {s0.by_node()}",
        )
        gen0 = lab.replica_set_generation()
        lab.label_node(dst)
        lab.unlabel_node(src)
        s1 = lab.snapshot()
        self.check(
            "moving the label triggers no rollout",
            s1.uids == s0.uids
            and s1.owners() == s0.owners()
            and lab.replica_set_generation() == gen0,
            f"uids kept={s1.uids == s0.uids}, owners {s1.owners()}",
        )
        self.check(
            "pods now violate their required node affinity",
            src not in lab.labelled_nodes() and all(p.node == src for p in s1.live),
            f"nodes with {POOL_LABEL}: {lab.labelled_nodes()}",
        )
        if pdb_min_available is not None:
            lab.create_pdb(min_available=pdb_min_available)
            lab.wait_pdb(max(0, self.ctx.replicas - pdb_min_available))
        return s1

    def run_round(self, name: str) -> tuple[Round, Any, Snapshot, Snapshot, list[PodDecision]]:
        import uuid

        from pytest_desched.rounds import run_round

        name = f"{name}-{uuid.uuid4().hex[:5]}"  # runbook name, unique per round
        before = self.lab.snapshot()
        with self.lab.record() as rec:
            rnd = run_round(
                self.ctx.cluster, self.ctx.release, name, self.ctx.log_dir, self.ctx.round_timeout
            )
            after = self.lab.snapshot()
        self.result.rounds.append(rnd)
        decisions = self.lab_decisions(rnd)
        evicted = [d for d in decisions if d.fate == Fate.EVICTED]
        self.result.evictions = len(evicted)
        self.result.blocking_layer = "api-server(evicted)" if evicted else _blocking(decisions)
        self.check(
            f"round {name} Job completed", rnd.succeeded, f"exit {rnd.exit_code}, {rnd.conditions}"
        )
        return rnd, rec, before, after, decisions

    def lab_decisions(self, rnd: Round) -> list[Any]:
        return rnd.result.in_namespace(self.ctx.namespace)

    def record(
        self, rnd: Round, rec: Any, before: Snapshot, after: Snapshot, **extra: Any
    ) -> dict[str, Any]:
        """Write the round's evidence (see evidence.py) and keep it on the result."""
        from pytest_desched.evidence import RoundRecord

        ctx = self.ctx
        pol = ctx.policy
        exp = self.result.name + f"[{self.result.variant}]"
        log_path = str(rnd.log_path) if rnd.log_path else None
        if ctx.evidence is not None:  # the audit copy of the log, redacted like the record
            log_path = str(
                ctx.evidence.write_text(exp, f"{rnd.name}.log", rnd.logs, max_bytes=4 << 20)
            )
        record = RoundRecord.from_round(
            exp,
            rnd.name,
            ctx.cluster.provider,
            rnd.result,
            versions=ctx.release.versions.summary(),
            chart=ctx.release.chart.evidence(),
            policy_digest=ctx.release.configmap_digest(),
            policy_overrides=list(pol.overrides),
            job={
                "name": rnd.name,
                "uid": rnd.job_uid,
                "namespace": rnd.namespace,
                "succeeded": rnd.succeeded,
                "exit_code": rnd.exit_code,
                "service_account": rnd.service_account,
                "executor": rnd.executor,
            },
            started_s=round(rnd.started - self.t0, 3),
            ended_s=round(rnd.ended - self.t0, 3),
            caps=pol.limits,
            pdb_before=before.pdb,
            pdb_after=self.lab.pdb_status(),
            pdb_min_disruptions_allowed_seen=rec.min_disruptions_allowed(),
            events=self.lab.events(),
            pending_pods=[p.name for p in self.lab.snapshot().pending()],
            distribution_before=before.by_node(),
            distribution_after=self.lab.snapshot().by_node(),
            metrics=round_metrics(rnd),
            log_path=log_path,
            **extra,
        )
        d = record.to_dict()
        self.result.records.append(d)
        if ctx.evidence is not None:
            ctx.evidence.write_round(record)
        if ctx.on_record is not None:
            ctx.on_record(d)
        return d

    def finish(self, bug_signature: str | None = None) -> ExperimentResult:
        self.result.duration_s = time.monotonic() - self.t0
        failed = self.result.failed
        if failed:
            lines = [f"{self.result.name}[{self.result.variant}] failed {len(failed)} check(s):"]
            lines += [f"  - {c.name}: {c.detail}" for c in failed]
            lines.append(f"  blocking layer seen: {self.result.blocking_layer}")
            if bug_signature:
                lines.append(f"  known upstream bug: {bug_signature}")
                raise KnownUpstreamBug("\n".join(lines))
            raise ExperimentFailed("\n".join(lines))
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
            exp = f"{self.result.name}[{self.result.variant}]"
            for name, text in arts.items():
                self.ctx.evidence.write_text(exp, "failure-" + name.replace(" ", "-"), text)
        return arts

    def teardown(self) -> None:
        if not self.ctx.keep_lab:
            self.lab.teardown()


def bug_1882_signature(rnd: Round, namespace: str, pdb_exists: bool) -> str | None:
    """The PodsWithoutPDB check failed for pods that a PDB does cover, and no PDB informer ran."""
    if not pdb_exists:
        return None
    hits = [d for d in rnd.result.in_namespace(namespace) if "PodsWithoutPDB" in d.checks]
    pdb_reflector = "*v1.PodDisruptionBudget" in rnd.logs
    if hits and not pdb_reflector:
        return (
            f"{BUG_1882}. Evidence: {len(hits)} pod(s) covered by PDB {namespace}/spread-demo failed "
            f"check PodsWithoutPDB, and the log starts no *v1.PodDisruptionBudget reflector"
        )
    return None


def _blocking(decisions: list[Any]) -> str | None:
    layers = [d.layer.value for d in decisions if d.fate not in (Fate.EVICTED, Fate.DRY_RUN)]
    return layers[0] if layers else None


def _run(
    ctx: ExperimentContext, name: str, variant: str, body: Callable[[Runner], None]
) -> ExperimentResult:
    r = Runner(ctx, name, variant)
    try:
        r.ensure_policy()
        body(r)
        sig = None
        for rnd in r.result.rounds:
            sig = sig or bug_1882_signature(rnd, ctx.namespace, True)
        return r.finish(sig)
    except Exception as exc:
        exc.artifacts = r.failure_artifacts()  # type: ignore[attr-defined]
        if not isinstance(exc, KnownUpstreamBug):
            # Runbook: on anything unexpected, stop the executor first.
            from pytest_desched.safety import emergency_stop

            try:
                exc.artifacts["emergency stop"] = str(emergency_stop(ctx.cluster, ctx.release))  # type: ignore[attr-defined]
            except Exception as stop_exc:  # never mask the original failure
                exc.artifacts["emergency stop"] = f"failed: {stop_exc!r}"  # type: ignore[attr-defined]
        raise
    finally:
        r.teardown()


# --- the experiments -------------------------------------------------------------
def positive_affinity_migration(
    ctx: ExperimentContext, variant: str = "runbook"
) -> ExperimentResult:
    """Runbook positive: one round moves exactly one violating pod to the target."""

    def body(r: Runner) -> None:
        lab = r.lab
        s1 = r.arrange_violation()
        rnd, rec, before, after, decisions = r.run_round("descheduler-positive")
        evicted = [d for d in decisions if d.fate == Fate.EVICTED]
        cap = ctx.policy.limits.get("namespace")
        r.check(
            "at most one eviction in the namespace",
            cap is None or len(evicted) <= cap,
            f"{len(evicted)} evicted, cap {cap}",
        )
        r.check(
            "exactly one pod evicted by the API server",
            len(evicted) == 1 and all(d.layer == Layer.API_SERVER for d in evicted),
            f"decisions: {[(d.name, d.fate.value, d.layer.value, d.checks) for d in decisions]}",
        )
        r.check(
            f"eviction attributed to {STRATEGY}",
            bool(evicted) and all(d.strategy == STRATEGY for d in evicted),
            f"strategies {[d.strategy for d in evicted]}",
        )
        latency = None
        if evicted:
            gone = {p.uid for p in s1.pods if p.name in {d.name for d in evicted}}
            try:
                final = lab.wait_ready(ctx.replicas, timeout=ctx.recovery_timeout)
            except AssertionError as exc:
                final = lab.snapshot()
                r.check("replicas back to Ready", False, str(exc))
            new = [p for p in final.live if p.uid not in s1.uids]
            r.check(
                "evicted pod's UID is gone",
                not (gone & final.uids),
                f"gone={gone}, now={final.uids}",
            )
            r.check(
                "replacement has a new UID, runs on the target and is Ready",
                len(new) == 1 and new[0].node == ctx.target and new[0].ready,
                f"new pods {[(p.name, p.node, p.ready) for p in new]}",
            )
            if new:
                t_ready = rec.first_ready(new[0].uid)
                t_gone = min(
                    (t for u in gone if (t := rec.first_deleting(u)) is not None), default=None
                )
                if t_ready is None:  # became Ready after the recorder stopped
                    t_ready = final.at
                if t_gone is not None:
                    latency = round(max(0.0, t_ready - t_gone), 3)
            r.result.ready_latency_s = latency
        else:
            final = lab.snapshot()
        mins = rec.min_disruptions_allowed()
        r.check(
            "PDB disruptionsAllowed never below zero", mins is None or mins >= 0, f"min seen {mins}"
        )
        r.check(
            "no Pending pod at the end",
            not final.pending(),
            f"pending {[p.name for p in final.pending()]}",
        )
        r.record(
            rnd,
            rec,
            before,
            after,
            replacement_ready_latency_s=latency,
            verdict="evicted" if evicted else f"stopped-by:{r.result.blocking_layer}",
        )

    return _run(ctx, "positive-affinity-migration", variant, body)


def negative_nodefit(ctx: ExperimentContext, variant: str = "runbook") -> ExperimentResult:
    """Runbook negative 1: no feasible node; nodeFit (PreEvictionFilter) must stop every candidate."""

    def body(r: Runner) -> None:
        lab = r.lab
        s1 = r.arrange_violation()  # PDB kept at minAvailable 2: only nodeFit is under test
        lab.unlabel_node(ctx.target)
        r.check(
            "no node carries the pool label", lab.labelled_nodes() == [], f"{lab.labelled_nodes()}"
        )
        rnd, rec, before, after, decisions = r.run_round("descheduler-negative-nodefit")
        final = lab.snapshot()
        seen = {e["uid"] for e in rec.pod_events}
        r.check("pod UIDs unchanged", final.uids == s1.uids, f"before {s1.uids} after {final.uids}")
        r.check("no replacement pod appeared", seen <= s1.uids, f"new uids {seen - s1.uids}")
        r.check(
            "no eviction request reached the API server",
            not any(d.fate in (Fate.EVICTED, Fate.REFUSED) for d in decisions),
            "",
        )
        nodefit = {
            d.name for d in decisions if d.fate == Fate.NODEFIT and d.layer == Layer.EVICTOR_NODEFIT
        }
        r.check(
            "every pod stopped by nodeFit at the evictor's PreEvictionFilter",
            nodefit == {p.name for p in s1.live},
            f"nodeFit-rejected {sorted(nodefit)}; decisions {[(d.name, d.fate.value, d.layer.value, d.checks) for d in decisions]}",
        )
        r.record(rnd, rec, before, after, verdict=f"stopped-by:{r.result.blocking_layer}")

    return _run(ctx, "negative-nodefit", variant, body)


def negative_pdb(ctx: ExperimentContext, variant: str = "runbook") -> ExperimentResult:
    """Runbook negative 2: a feasible target, but the PDB allows no disruption: HTTP 429."""

    def body(r: Runner) -> None:
        lab = r.lab
        s1 = r.arrange_violation()
        lab.patch_pdb(3)
        pdb = lab.wait_pdb(0)
        r.check("PDB disruptionsAllowed is 0", pdb["disruptionsAllowed"] == 0, f"{pdb}")
        rnd, rec, before, after, decisions = r.run_round("descheduler-negative-pdb")
        final = lab.snapshot()
        refused = [d for d in decisions if d.fate == Fate.REFUSED]
        r.check("pod UIDs unchanged", final.uids == s1.uids, f"before {s1.uids} after {final.uids}")
        r.check("no Pending pod", not final.pending(), f"{[p.name for p in final.pending()]}")
        r.check(
            "disruptionsAllowed still 0",
            (lab.pdb_status() or {}).get("disruptionsAllowed") == 0,
            f"{lab.pdb_status()}",
        )
        r.check(
            "the API server refused the eviction with 429 (disruption budget)",
            bool(refused)
            and all(d.status_code == 429 and d.layer == Layer.API_SERVER for d in refused),
            f"decisions {[(d.name, d.fate.value, d.layer.value, d.status_code, d.checks) for d in decisions]}",
        )
        events: list[dict[str, Any]] = []
        # Runbook: check the *mounted* policy, not the intended one, before expecting events.
        import yaml

        mounted = yaml.safe_load(ctx.release.live_policy_yaml()) or {}
        notify = mounted.get("evictionFailureEventNotification") is True
        r.check(
            "evictionFailureEventNotification is in the mounted policy",
            notify == bool(ctx.policy.event_notification),
            f"mounted={mounted.get('evictionFailureEventNotification')!r}",
        )
        dropped = rnd.logs.count(EVENT_DROPPED)
        if notify and refused:
            from pytest_desched.kube import WaitTimeout, wait_for

            uids = {p.uid for p in s1.pods if p.name in {d.name for d in refused}}
            # v0.36.0 as a one-shot Job cancels its event broadcaster on exit: the last events
            # can be dropped, and its own log says so. Every refused pod needs its event, or a
            # logged drop to account for it; a silent absence fails.
            try:
                events = wait_for(
                    "EvictionFailed events for the refused pods",
                    lambda: [
                        e
                        for e in lab.events()
                        if e["reason"] == "EvictionFailed" and e["uid"] in uids
                    ],
                    lambda evs: len({e["uid"] for e in evs}) + dropped >= len(uids),
                    timeout=15,
                )
            except WaitTimeout as exc:
                r.result.notes.append(str(exc))
            covered = {e["uid"] for e in events}
            r.check(
                "an EvictionFailed event per refused pod, or a drop logged by the descheduler",
                bool(events) and len(covered) + dropped >= len(uids),
                f"{len(uids)} refused, {len(covered)} with an EvictionFailed event, {dropped} "
                "event(s) the log says were dropped at exit; absence is never read as success",
            )
        if dropped:
            r.result.notes.append(f"{dropped} event(s) dropped at process exit (descheduler log)")
        r.record(
            rnd,
            rec,
            before,
            after,
            verdict=f"stopped-by:{r.result.blocking_layer}",
            notes=[f"EvictionFailed events: {len(events)}", *r.result.notes],
        )

    return _run(ctx, "negative-pdb", variant, body)


def minpodage_protects(
    ctx: ExperimentContext, variant: str = "pdb-lister-workaround"
) -> ExperimentResult:
    """The runbook's unmodified minPodAge (10m) keeps seconds-old pods out of every round."""

    def body(r: Runner) -> None:
        lab = r.lab
        s1 = r.arrange_violation()
        rnd, rec, before, after, decisions = r.run_round("descheduler-minpodage")
        final = lab.snapshot()
        r.check("pod UIDs unchanged", final.uids == s1.uids, f"{final.uids}")
        young = {d.name for d in decisions if d.fate == Fate.FILTERED and "minPodAge" in d.checks}
        r.check(
            "every pod filtered by the evictor's minPodAge check",
            young == {p.name for p in s1.live},
            f"decisions {[(d.name, d.fate.value, d.checks) for d in decisions]}",
        )
        r.record(rnd, rec, before, after, verdict=f"stopped-by:{r.result.blocking_layer}")

    return _run(ctx, "minpodage-protects-young-pods", variant, body)


EXPERIMENTS: dict[str, Callable[..., ExperimentResult]] = {
    "positive": positive_affinity_migration,
    "nodefit": negative_nodefit,
    "pdb": negative_pdb,
    "minpodage": minpodage_protects,
}
