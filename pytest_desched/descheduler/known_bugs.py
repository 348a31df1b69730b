"""Known upstream descheduler bugs as data, and the one rule that may excuse a failure with them.

A failed experiment is an *expected* failure only when a registered bug explains every
failed check, the round's own evidence shows exactly that bug's signature, and the bug's
preconditions were verified from the cluster (never assumed). Anything else fails, with
any signature that was present shown as context. A fixed descheduler (a version outside
`affected`) is never excused, so a strict xfail turns into XPASS and the workaround can go.

`affected` is a version range, `[since, fixed_in)` by semver: a release nobody ran here
(v0.34.0) is affected when it lies inside it, and a build (`v0.36.0-g7d2b28bf2`, a master
snapshot or a pull request) is placed by its base release. Each range names how its ends are
known: a run, or the file and line in the release's tree (../shared/upstream).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_desched.descheduler.bug_ranges import (
    CHART_1839,
    RANGE_1687,
    RANGE_1839,
    RANGE_1840,
    RANGE_1882,
    RANGE_1917,
    RANGE_LONG_LIVED_STALE,
    RANGE_PROM_SECRET_RACE,
    RANGE_PROM_STALE_LOOKBACK,
    RANGE_STALE_IDLE,
    VersionRange,
)
from pytest_desched.descheduler.decisions import Fate, PodDecision
from pytest_desched.descheduler.node_selector import count_selected
from pytest_desched.descheduler.policy.model import notifies_eviction_failures
from pytest_desched.descheduler.utilization_log import classified_on_failed_fetch, cycles

Outcome = Literal["pass", "xfail", "fail"]

# `KnownBug.explains` key for a bug that breaks every experiment alike (a round that hangs).
ANY_EXPERIMENT = "*"
# The check a round that did not finish within its timeout fails (experiments/framework.py):
# the only one a hang bug explains, since a round that ran no cycle gives nothing else to check.
ROUND_FINISHED = "round-finished"


# Log evidence keys (klog JSON, v0.36.0): the reflector start line names the informer's type.
PDB_REFLECTOR = "*v1.PodDisruptionBudget"
# client-go logs it at V(3) as each informer starts (reflector.go RunWithContext), before
# any cache syncs: a round log without any such line does not cover its informers' start
# (a cut log, or -v below 3), so a missing PDB reflector there proves nothing.
REFLECTOR_START_MSG = "Starting reflector"
SKIP_MSG = "Skipping descheduling cycle: requires >=2 nodes"
EVENT_DROPPED_MSG = '"msg":"Unable to write event'
EVICTION_ATTEMPT_MSGS = ('"msg":"Evicted pod"', '"msg":"Error evicting pod"')
# A one-shot run hands events to a background writer and cancels it right after the cycle
# (descheduler.go: `defer eventBroadcaster.Shutdown()`); client-go makes no attempt to drain
# its queue. An exit this soon after the last eviction attempt leaves queued events unsent.
EVENT_FLUSH_WINDOW_S = 1.0


@dataclass(frozen=True)
class RoundFacts:
    """What classification may rely on, each field read from the cluster or the round's log.

    `pdb_expected_pods` is the PDB's `status.expectedPods` read before the round (None: no
    PDB); `lab_pods_running` the lab pod names the API showed Running before the round;
    `ready_nodes` the Ready node count from the API; `mounted_policy` the policy.yaml the
    descheduler's pod mounted; timestamps are the log's own `ts` (ms since the epoch).
    """

    experiment: str
    descheduler_version: str
    failed_checks: frozenset[str]
    decisions: tuple[PodDecision, ...] = ()
    log: str = ""
    replicas: int = 0
    pdb_expected_pods: int | None = None
    lab_pods_running: frozenset[str] = frozenset()
    ready_nodes: int = 0
    mounted_policy: Mapping[str, object] = field(default_factory=dict)
    refused_by_api: int = 0  # 429s the API server's audit log (or, without one, the log) saw
    events_delivered: int = 0
    # Refused pods with an EvictionFailed event once the same binary ran long enough to
    # outlive its refusals (event_probe.py); None: not measured (no local binary).
    events_outliving: int | None = None
    # The policy's top-level nodeSelector and each Ready node's labels: the nodes the
    # descheduler's `found` counts (node_selector.py). None labels: not read.
    node_selector: str | None = None
    ready_node_labels: tuple[Mapping[str, str], ...] | None = None
    # Running lab pods on Ready nodes, from the API just before the round (None: not read):
    # what a complete mirror's LowNodeUtilization must count at least.
    lab_pods_on_ready_nodes: int | None = None


@dataclass(frozen=True)
class KnownBug:
    """One upstream bug: where it is, which versions have it, what it can explain, its proof."""

    id: str
    title: str
    link: str
    affected: VersionRange
    explains: Mapping[str, frozenset[str]]  # experiment -> check ids the bug can make fail
    signature: Callable[[RoundFacts], str | None]  # evidence text, or None when absent
    fix: str = ""
    # "xfail": the experiment is an expected failure. "tolerate": the explained check is met
    # with the bug named beside it, for a loss that varies from run to run by scheduling and
    # that the API server's own record already makes harmless to the verdict.
    mode: Literal["xfail", "tolerate"] = "xfail"
    # Whether a policy triggers the bug, read from the *effective* policy (after the
    # descheduler's own defaults, as the policy checker prints it): a reason, or None.
    policy_trigger: Callable[[Mapping[str, Any]], str | None] | None = None
    workaround: str = ""  # what a policy can do until the fix (desched lint's fix text)
    # The per-pod fates the bug causes, as the canary's diff spells them: a candidate whose
    # signature is gone and whose pods left exactly these fates is explained by the fix.
    fates: tuple[str, ...] = ()
    # A chart bug: the charts it is in (by chart version), and the ClusterRole rules whose
    # absence is the bug ((apiGroup, resource, verbs) each), for the canary's RBAC comparison.
    chart_range: VersionRange | None = None
    rbac: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # A bug that keeps a round from finishing (its descheduler waits forever): the deciding
    # layer a timed-out round whose log shows the signature is stopped by (hang_cause).
    stops_at: str | None = None

    def explains_checks(self, experiment: str) -> frozenset[str]:
        """The checks the bug can make fail in `experiment` (ANY_EXPERIMENT: in every one)."""
        return self.explains.get(experiment, self.explains.get(ANY_EXPERIMENT, frozenset()))

    def applies_to(self, version: str) -> bool:
        """An affected release, or a build derived from one (`v0.36.0-g7d2b28bf2`).

        A derived build may or may not carry the fix: only the signature, proven from its own
        round, can then excuse anything; an absent signature means the bug did not show.
        """
        return self.affected.holds(version)

    def excuses(self, facts: RoundFacts) -> bool:
        return (
            self.applies_to(facts.descheduler_version)
            and bool(facts.failed_checks)
            and (facts.failed_checks <= self.explains_checks(facts.experiment))
        )

    def describe(self) -> str:
        return f"{self.link} ({self.title})"


@dataclass(frozen=True)
class Classification:
    outcome: Outcome
    bug: KnownBug | None = None
    evidence: str = ""
    context: tuple[str, ...] = ()  # signatures present that did not excuse the failure

    def to_dict(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "bug": self.bug.id if self.bug else None,
            "link": self.bug.link if self.bug else None,
            "evidence": self.evidence,
            "context": list(self.context),
        }


# -- signatures -----------------------------------------------------------------------------


def _sig_1882(f: RoundFacts) -> str | None:
    """Every lab pod FILTERED by exactly PodsWithoutPDB, although a PDB covers all of them,
    and a log that shows its informers starting shows none for PodDisruptionBudgets."""
    if f.pdb_expected_pods is None:
        return None  # no PDB: PodsWithoutPDB filtering is the protection working, not a bug
    if f.pdb_expected_pods != f.replicas:
        return None  # the PDB does not cover every pod: not the precondition
    if not f.decisions or not f.lab_pods_running:
        return None
    if any(d.fate != Fate.FILTERED or d.checks != ["PodsWithoutPDB"] for d in f.decisions):
        return None
    if {d.name for d in f.decisions} != set(f.lab_pods_running):
        return None
    if PDB_REFLECTOR in f.log:
        return None  # the lister was started: the filtering has another cause
    if REFLECTOR_START_MSG not in f.log:
        return None  # the log shows no informer start at all: an absence, not the proof
    return (
        f"{len(f.decisions)} lab pod(s) filtered with checks exactly [PodsWithoutPDB] while the "
        f"PDB's status.expectedPods={f.pdb_expected_pods} covers all {f.replicas} replicas, and "
        f"the log starts no {PDB_REFLECTOR} reflector"
    )


def _skip_found(log: str) -> int | None:
    import json

    for line in log.splitlines():
        if SKIP_MSG in line:
            try:
                return int(json.loads(line).get("found"))
            except (ValueError, TypeError, AttributeError):
                return None
    return None


DRY_RUN_MIRROR_MSG = "Building a cached client from the cluster for the dry run"

# The forms #1917's proof takes, one phrase each: the signature below writes the first three,
# the fidelity comparison's settled-cycle proof (fidelity/compare.py) the fourth. Tests that
# check a row is explained by #1917 only with its proof ask proves_1917, never a restated
# substring (a new form once failed a test that knew only the older two).
PROOF_1917_SKIP = "with found="
PROOF_1917_NODES = "partial dry-run mirror: the cycle's plugins processed"
PROOF_1917_PODS = "partial dry-run mirror: LowNodeUtilization counted"
PROOF_1917_SETTLED = "the same binary's settled dry-run cycle on the unchanged lab says"
PROOF_FORMS_1917 = (PROOF_1917_SKIP, PROOF_1917_NODES, PROOF_1917_PODS, PROOF_1917_SETTLED)


def proves_1917(proof: str) -> bool:
    """Whether `proof` is one of #1917's proof forms (an evidence line, not an absence)."""
    return any(form in proof for form in PROOF_FORMS_1917)


def _sig_1917(f: RoundFacts) -> str | None:
    """The dry-run mirror was empty or partial, identified positively from the descheduler's
    own lines against the API server, each a count the cycle itself reports:

    - it skipped its cycle for too few nodes (`found`) while the API server showed more Ready
      nodes among those the policy's nodeSelector selects;
    - in dry run, its plugins processed fewer nodes (every plugin gets every Ready node of the
      mirror, and says `Processing node`) than that count;
    - in dry run, with no nodeSelector, LowNodeUtilization classified every Ready node and
      counted fewer pods on them than the lab alone had Running there.

    "No decision and no lab pod named in the log" is also what a round whose listing was
    forbidden, or where no strategy ran, looks like: it is an absence, and an absence excuses
    nothing.
    """
    selected, which = _selected_ready(f)
    if selected is None:
        return None
    found = _skip_found(f.log)
    if found is not None:
        if found < selected:
            return (
                f"'{SKIP_MSG}' {PROOF_1917_SKIP}{found} while the API server reports {selected} "
                f"{which}"
            )
        return None
    if DRY_RUN_MIRROR_MSG not in f.log:
        return None
    processed = _logged_nodes(f.log, "Processing node")
    if processed and len(processed) < selected:
        return (
            f"{PROOF_1917_NODES} {len(processed)} node(s) "
            f"({', '.join(sorted(processed))}) while the API server reports {selected} {which}"
        )
    usage = _lnu_pods(f.log)
    lab = f.lab_pods_on_ready_nodes
    if not f.node_selector and lab and len(usage) == selected and sum(usage.values()) < lab:
        return (
            f"{PROOF_1917_PODS} {sum(usage.values())} pod(s) on "
            f"all {selected} Ready nodes while the API server showed {lab} lab pods Running there"
        )
    return None


def _selected_ready(f: RoundFacts) -> tuple[int | None, str]:
    """The Ready nodes the policy's nodeSelector selects (what `found` counts), and their name;
    None when the nodes' labels were not read (no proof then)."""
    if not f.node_selector:
        return f.ready_nodes, "Ready nodes"
    if f.ready_node_labels is None:
        return None, ""
    try:
        selected = count_selected(f.node_selector, f.ready_node_labels)
    except ValueError:  # a selector the descheduler cannot parse: it would not start
        return None, ""
    return selected, f"Ready nodes the policy's nodeSelector {f.node_selector!r} selects"


def _json_lines(log: str, msg: str) -> list[dict[str, object]]:
    import json

    out = []
    for line in log.splitlines():
        if msg not in line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("msg") == msg:
            out.append(obj)
    return out


def _node_name(obj: Mapping[str, object]) -> str | None:
    node = obj.get("node")
    name = node.get("name") if isinstance(node, dict) else None
    return name if isinstance(name, str) else None


def _logged_nodes(log: str, msg: str) -> set[str]:
    """The node names the log's `msg` lines name."""
    return {n for o in _json_lines(log, msg) if (n := _node_name(o))}


def _lnu_pods(log: str) -> dict[str, int]:
    """LowNodeUtilization's pod count per node it classified (its `usage.pods`)."""
    out: dict[str, int] = {}
    for o in _json_lines(log, "Node has been classified"):
        usage, name = o.get("usage"), _node_name(o)
        if name and isinstance(usage, dict):
            try:
                out[name] = int(str(usage.get("pods")))
            except ValueError:
                continue
    return out


def _last_ts(log: str, needles: tuple[str, ...] | None = None) -> float | None:
    import json

    last = None
    for line in log.splitlines():
        if needles is not None and not any(n in line for n in needles):
            continue
        try:
            ts = json.loads(line).get("ts")
        except (ValueError, AttributeError):
            continue
        if isinstance(ts, (int, float)):
            last = float(ts)
    return last


def _sig_1687(f: RoundFacts) -> str | None:
    """Refusals proven by the API server, events missing, and the process exited at once."""
    if notifies_eviction_failures(f.mounted_policy) is not True:
        return None  # without the notification no event is owed: not this bug
    if f.refused_by_api <= 0 or f.events_delivered >= f.refused_by_api:
        return None
    if f.events_outliving is not None and f.events_outliving < f.refused_by_api:
        return None  # it sends none even when it outlives its refusals: not an exit race
    attempt, exit_ts = _last_ts(f.log, EVICTION_ATTEMPT_MSGS), _last_ts(f.log)
    if attempt is None or exit_ts is None:
        return None
    gap = (exit_ts - attempt) / 1000
    if gap > EVENT_FLUSH_WINDOW_S:
        return None
    return (
        f"events delivered: {f.events_delivered} of {f.refused_by_api} refusals; the process "
        f"exited {gap * 1000:.0f} ms after its last eviction attempt (within the "
        f"{EVENT_FLUSH_WINDOW_S:.0f} s flush window), with evictionFailureEventNotification "
        "true in the mounted policy"
    )


def _policy_1882(effective: Mapping[str, Any]) -> str | None:
    """PodsWithoutPDB enabled (podProtections or the deprecated boolean) in an evicting profile."""
    for i, prof in enumerate(effective.get("profiles") or []):
        plugins = prof.get("plugins") or {}
        evicting = [
            n
            for ep in ("deschedule", "balance")
            for n in ((plugins.get(ep) or {}).get("enabled") or [])
        ]
        if not evicting:
            continue
        for j, pc in enumerate(prof.get("pluginConfig") or []):
            if pc.get("name") != "DefaultEvictor":
                continue
            args = pc.get("args") or {}
            extra = (args.get("podProtections") or {}).get("extraEnabled") or []
            if "PodsWithoutPDB" in extra:
                return (
                    f"profiles[{i}].pluginConfig[{j}].args.podProtections.extraEnabled "
                    f"has PodsWithoutPDB (profile {prof.get('name')!r} enables {evicting})"
                )
            if args.get("ignorePodsWithoutPDB"):
                return f"profiles[{i}].pluginConfig[{j}].args.ignorePodsWithoutPDB is true"
    return None


# -- the registry -----------------------------------------------------------------------------

# The signature of a forbidden PVC list, as the reflector logs it (upstream #1839, #1845).
PVC_FORBIDDEN = "persistentvolumeclaims is forbidden"
PVC_LIST_REFUSED = "failed to list *v1.PersistentVolumeClaim"  # not the watch-list fallback
PVC_TYPE = '"*v1.PersistentVolumeClaim"'
PVC_SYNCED = '"msg":"Caches populated"'
PROM_NOT_INITIALIZED = "prometheus client not initialized"


def _sig_1839(f: RoundFacts) -> str | None:
    """The descheduler's informer was refused the PVC list by the API server (its RBAC), and
    its PersistentVolumeClaim cache never synced (the start waits for it: no cycle).

    client-go's reflector logs each refused list ("Failed to watch ... failed to list
    *v1.PersistentVolumeClaim: persistentvolumeclaims is forbidden ... cannot list") and
    retries with backoff; "Caches populated" for the type would mean it synced after all.
    """
    lines = [ln for ln in f.log.splitlines() if PVC_FORBIDDEN in ln]
    if not lines:
        return None
    if any(PVC_SYNCED in ln and PVC_TYPE in ln for ln in f.log.splitlines()):
        return None  # refused once, then listed: the cache synced, no wait came of it
    refused = [ln for ln in lines if PVC_LIST_REFUSED in ln] or lines
    return (
        f"the descheduler's log: the PersistentVolumeClaim list refused {len(refused)} "
        f"time(s) and that cache never synced; first: {_err_of(refused[0])[:300]}"
    )


def _err_of(line: str) -> str:
    """A klog JSON line's `err` (what the API server answered), else the line itself."""
    import json

    try:
        obj = json.loads(line)
    except ValueError:
        return line.strip()
    err = obj.get("err") if isinstance(obj, dict) else None
    return str(err) if err else line.strip()


def _sig_1840(f: RoundFacts) -> str | None:
    """A profile could not be built: LowNodeUtilization found no Prometheus client."""
    for line in f.log.splitlines():
        if PROM_NOT_INITIALIZED in line:
            return f"the descheduler's log: {line.strip()[:300]}"
    return None


def _ts_of(log: str, msg: str) -> float | None:
    """The `ts` of the first JSON log line whose msg is `msg`."""
    for line in log.splitlines():
        if f'"msg":"{msg}"' in line:
            m = re.search(r'"ts":([0-9.]+)', line)
            return float(m.group(1)) if m else None
    return None


def _sig_prom_secret_race(f: RoundFacts) -> str | None:
    """The cycle began before the token Secret's reconciler started, and found no client."""
    started = _ts_of(f.log, "Resetting pod evictor counters")
    reconciler = _ts_of(f.log, "Starting authentication secret reconciler")
    if PROM_NOT_INITIALIZED not in f.log or started is None or reconciler is None:
        return None
    if reconciler <= started:
        return None
    line = next(ln for ln in f.log.splitlines() if PROM_NOT_INITIALIZED in ln)
    return (
        f"the cycle began {reconciler - started:.1f} ms before the token Secret's reconciler "
        f"started; the descheduler's log: {line.strip()[:300]}"
    )


def _policy_1839(effective: Mapping[str, Any]) -> str | None:
    """Every policy lists PVCs on an affected release; one that protects PVC pods also reads
    them in every eviction decision (DefaultEvictor's PodsWithPVC)."""
    for i, prof in enumerate(effective.get("profiles") or []):
        for j, pc in enumerate(prof.get("pluginConfig") or []):
            args = pc.get("args") or {}
            if pc.get("name") != "DefaultEvictor" or not isinstance(args, Mapping):
                continue
            extra = (args.get("podProtections") or {}).get("extraEnabled") or []
            if "PodsWithPVC" in extra:
                return (
                    f"profiles[{i}].pluginConfig[{j}].args.podProtections.extraEnabled has "
                    "PodsWithPVC: the evictor reads the PersistentVolumeClaim lister"
                )
    return None


def _policy_1840(effective: Mapping[str, Any]) -> str | None:
    """A Prometheus metrics provider and a LowNodeUtilization that reads it."""
    providers = effective.get("metricsProviders") or []
    if not any(isinstance(p, Mapping) and p.get("source") == "Prometheus" for p in providers):
        return None
    for i, prof in enumerate(effective.get("profiles") or []):
        for j, pc in enumerate(prof.get("pluginConfig") or []):
            args = pc.get("args") or {}
            if pc.get("name") != "LowNodeUtilization" or not isinstance(args, Mapping):
                continue
            if (args.get("metricsUtilization") or {}).get("source") == "Prometheus":
                return (
                    f"profiles[{i}].pluginConfig[{j}].args.metricsUtilization.source is "
                    "Prometheus: the profile cannot be built before the client exists"
                )
    return None


def _sig_stale_idle(f: RoundFacts) -> str | None:
    """A node classified underutilized at exactly 0% CPU: a lab node never reads 0 on live
    metrics (each has its own idle usage, providers/embedded/metrics_server.py NODE_BASELINE),
    so 0 is the rate metrics-server serves for counters that stopped advancing."""
    for rec in _json_lines(f.log, "Node has been classified"):
        pct = rec.get("usagePercentage")
        if (
            rec.get("category") == "underutilized"
            and isinstance(pct, Mapping)
            and pct.get("cpu") == 0
        ):
            return (
                f"node {_node_name(rec)} classified underutilized at 0% CPU, the reading "
                "of its frozen counters, taken without its sample time"
            )
    return None


def _sig_long_lived_stale(f: RoundFacts) -> str | None:
    """A later cycle of one process that classified a node whose last fetch by the
    collector had failed before the cycle: read on the value kept from an earlier collect.
    A one-shot round's log has one cycle, so it never shows this."""
    for cyc in cycles(f.log)[1:]:
        nodes = classified_on_failed_fetch(cyc)
        if nodes:
            got = {
                n: f"{cyc.classified[n].category} at {cyc.classified[n].percent.get('cpu')}% CPU"
                for n in nodes
            }
            return (
                f"cycle {cyc.number} of a long-lived process classified {got} although the "
                'collector\'s last fetch of each had failed ("Error fetching metrics" within '
                f"one collect period before the cycle), and evicted {len(cyc.evicted)}: "
                "usage kept from before the outage"
            )
    return None


def _sig_prom_stale_lookback(f: RoundFacts) -> str | None:
    """A node classified from the Prometheus source (`usagePercentage` on MetricResource):
    the descheduler read samples. In prometheus-stale-in-lookback (the only experiment this
    bug explains) Prometheus ingested nothing since before the round, which that experiment's
    own, never excused, `source-stale-in-lookback` check proves; a fresh-sample guard in the
    query leaves no such line."""
    for rec in _json_lines(f.log, "Node has been classified"):
        pct = rec.get("usagePercentage")
        if isinstance(pct, Mapping) and "MetricResource" in pct:
            return (
                f"node {_node_name(rec)} classified {rec.get('category')} at "
                f"{pct.get('MetricResource')}% from Prometheus samples no longer ingested "
                "(the instant query's answer carries no sample age)"
            )
    return None


# Checks the secret-token race makes fail (the positive experiment's, literal in its module).
PROM_SECRET_RACE_CHECKS = frozenset(
    {
        "usage-logged-overutilized",
        "usage-logged-underutilized",
        "evictions:LowNodeUtilization",
        "evicted:hot",
        "replaced:hot",
    }
)
REGISTRY: tuple[KnownBug, ...] = (
    KnownBug(
        id="descheduler#1882",
        title="PodsWithoutPDB reads a PodDisruptionBudget lister that is never started",
        link="https://github.com/kubernetes-sigs/descheduler/issues/1882",
        affected=RANGE_1882,
        explains={
            "positive-affinity-migration": frozenset({"one-evicted", "evicted-by-strategy"}),
            "negative-nodefit": frozenset({"nodefit-stops-every-pod"}),
            "negative-pdb": frozenset({"refused-429-per-candidate"}),
        },
        signature=_sig_1882,
        fix="https://github.com/kubernetes-sigs/descheduler/pull/1883 (proposed)",
        policy_trigger=_policy_1882,
        fates=("filtered(PodsWithoutPDB)",),
        workaround=(
            "remove PodsWithoutPDB from podProtections.extraEnabled (the pdb-lister-workaround "
            "variant); the PDB itself is still enforced by the API server (429)"
        ),
    ),
    KnownBug(
        id="descheduler#1917",
        title="dry run: the fake informer mirror is synced before the real factory filled it",
        link="https://github.com/kubernetes-sigs/descheduler/issues/1917",
        affected=RANGE_1917,
        # No experiment's check: its signature is evidence in a fidelity run, where it
        # explains the dry-run half's skipped cycle and the pods it left untouched
        # (fidelity/explain.py: half_gap, _known_1917).
        explains={},
        signature=_sig_1917,
        fix="https://github.com/kubernetes-sigs/descheduler/pull/1922 (proposed)",
    ),
    KnownBug(
        id="descheduler#1687",
        title="a one-shot run exits before its event broadcaster wrote queued events",
        link="https://github.com/kubernetes-sigs/descheduler/issues/1687",
        affected=RANGE_1687,
        explains={"negative-pdb": frozenset({"eviction-failed-events"})},
        signature=_sig_1687,
        fix="none upstream (closed without a fix)",
        mode="tolerate",
    ),
    KnownBug(
        id="descheduler#1839",
        title="chart 0.35.0's ClusterRole cannot list the PersistentVolumeClaims v0.35.0 lists",
        link="https://github.com/kubernetes-sigs/descheduler/issues/1839",
        affected=RANGE_1839,
        chart_range=CHART_1839,
        # The informer never syncs: the descheduler waits at start and runs no cycle, whatever
        # the experiment, until the round's timeout stops it (rounds.stop_round); the canary's
        # static comparison names it too (an RBAC rule the fix widens).
        explains={ANY_EXPERIMENT: frozenset({ROUND_FINISHED})},
        stops_at="rbac",
        signature=_sig_1839,
        fix="chart 0.35.1 (https://github.com/kubernetes-sigs/descheduler/pull/1836; also #1845)",
        policy_trigger=_policy_1839,
        rbac=(("", "persistentvolumeclaims", ("get", "list", "watch")),),
        workaround=(
            "install chart 0.35.1, or grant get/list/watch on persistentvolumeclaims to the "
            "descheduler's ClusterRole; no policy avoids it (the informer is registered for "
            "every policy)"
        ),
    ),
    KnownBug(
        id="descheduler#1840",
        title="LowNodeUtilization fails at start: Prometheus client not initialized",
        link="https://github.com/kubernetes-sigs/descheduler/issues/1840",
        affected=RANGE_1840,
        explains={},  # the descheduler exits before any cycle: no experiment's check
        signature=_sig_1840,
        fix="https://github.com/kubernetes-sigs/descheduler/pull/1862 (v0.36.0)",
        policy_trigger=_policy_1840,
        workaround=(
            "use metricsUtilization from metrics.k8s.io (source KubernetesMetrics) until v0.36.0"
        ),
    ),
    KnownBug(
        id="desched:stale-read-as-idle",
        title="a stale Kubernetes Metrics reading is taken as the node's usage (no sample-age check)",
        link=(
            "https://github.com/kubernetes-sigs/descheduler/blob/v0.36.0/pkg/descheduler/"
            "metricscollector/metricscollector.go#L129-L149"
        ),
        affected=RANGE_STALE_IDLE,
        explains={
            "utilization-kubernetes-metrics-stale": frozenset(
                {
                    "stale-node-not-read-as-idle",
                    "uids-unchanged",
                    "no-replacement",
                    "no-eviction-succeeded",
                    "no-eviction-request",
                }
            )
        },
        signature=_sig_stale_idle,
        fix="none upstream (no issue filed)",
        workaround=(
            "alert on metrics-server's NodeMetrics timestamp age and suspend the descheduler "
            "while any node's is older than two resolutions"
        ),
    ),
    KnownBug(
        id="desched:long-lived-keeps-pre-outage-usage",
        title=(
            "a long-lived descheduler keeps classifying nodes on the last usage it fetched "
            "while metrics.k8s.io answers nothing: nodes read as idle on a missing source"
        ),
        link=(
            "https://github.com/kubernetes-sigs/descheduler/blob/v0.36.0/pkg/descheduler/"
            "metricscollector/metricscollector.go#L131-L133"
        ),
        affected=RANGE_LONG_LIVED_STALE,
        explains={
            # Only the classification: with the whole source down each candidate pod's usage
            # is fetched live (usageclients.go:169) and the pod skipped on its error
            # (nodeutilization.go:312-318), so the cycle evicts nothing; an eviction in it
            # is no part of this cause and fails.
            "utilization-kubernetes-metrics-long-lived-missing": frozenset(
                {"ll-outage-cycle-classifies-nothing"}
            ),
            # With one node's metrics missing the other nodes' pods have live usage, so the
            # node read on its kept value lets the cycle run on and evict, where a fresh
            # collector refuses the whole cycle (usageclients.go:212).
            "utilization-kubernetes-metrics-long-lived-absent": frozenset(
                {
                    "ll-outage-cycle-classifies-nothing",
                    "ll-outage-cycle-evicts-nothing",
                    "ll-outage-cycle-no-eviction-request",
                }
            ),
        },
        signature=_sig_long_lived_stale,
        fix="none upstream (no issue filed)",
        workaround=(
            "run the descheduler as the runbook's Job (a fresh collector fails closed), or "
            "alert on metrics-server's availability and suspend a long-lived descheduler while "
            "metrics.k8s.io is unavailable"
        ),
    ),
    KnownBug(
        id="desched:prometheus-stale-in-lookback",
        title=(
            "Prometheus samples older than the rule interval but inside the query's lookback are "
            "taken as the nodes' usage (no sample-age check)"
        ),
        link=(
            "https://github.com/kubernetes-sigs/descheduler/blob/v0.36.0/pkg/framework/plugins/"
            "nodeutilization/usageclients.go#L266-L295"
        ),
        affected=RANGE_PROM_STALE_LOOKBACK,
        explains={
            "utilization-prometheus-stale-in-lookback": frozenset(
                {
                    "no-node-read-as-idle",
                    "uids-unchanged",
                    "no-replacement",
                    "no-eviction-succeeded",
                    "no-eviction-request",
                }
            )
        },
        signature=_sig_prom_stale_lookback,
        fix="none upstream (no issue filed)",
        workaround=(
            "guard the policy's query with the samples' age, e.g. `Q and on(instance) "
            "(time() - timestamp(Q)) < 2 * the rule interval` (prometheus-stale-in-lookback-"
            "guarded): a stale source then has no entry and the round fails closed"
        ),
    ),
    KnownBug(
        # Found here, not filed upstream as an issue of its own: #1840's message on the
        # secretReference path of the release that fixed #1840's in-cluster path.
        id="desched:prometheus-secret-first-cycle",
        title=(
            "a one-shot round with authToken.secretReference finds no Prometheus client: the "
            "token reconciler starts after the cycle"
        ),
        link="https://github.com/kubernetes-sigs/descheduler/issues/1840",
        affected=RANGE_PROM_SECRET_RACE,
        explains={"utilization-prometheus-secret-token": PROM_SECRET_RACE_CHECKS},
        signature=_sig_prom_secret_race,
        workaround=(
            "name no authToken (the pod's ServiceAccount token is read before each cycle) "
            "behind a proxy that reviews it, or run the descheduler long-lived "
            "(--descheduling-interval): every cycle after the first has the client"
        ),
    ),
)

BY_ID = {b.id: b for b in REGISTRY}


def hang_cause(
    facts: RoundFacts, registry: tuple[KnownBug, ...] = REGISTRY
) -> tuple[KnownBug, str] | None:
    """The registered bug (and its proof) that explains why a timed-out round never finished:
    one that `stops_at` a layer and whose signature the round's log so far shows."""
    for bug in registry:
        if bug.stops_at and (ev := bug.signature(facts)):
            return bug, ev
    return None


def classify(facts: RoundFacts, registry: tuple[KnownBug, ...] = REGISTRY) -> Classification:
    """pass / xfail (one bug explains every failed check and its signature is proven) / fail."""
    present = signatures(facts, registry)  # each signature evaluated once
    context = tuple(f"{bug_id}: {ev}" for bug_id, ev in present.items())
    if not facts.failed_checks:
        return Classification("pass", context=context)
    for bug in registry:
        if bug.mode == "xfail" and bug.id in present and bug.excuses(facts):
            # context: the other signatures; this one is the evidence, not an aside that
            # "does not explain this failure" (finish() words context that way)
            others = tuple(c for c in context if not c.startswith(f"{bug.id}: "))
            return Classification("xfail", bug, present[bug.id], others)
    return Classification("fail", context=context)


def tolerated(
    check: str, facts: RoundFacts, registry: tuple[KnownBug, ...] = REGISTRY
) -> tuple[KnownBug, str] | None:
    """The tolerating bug (and its proof) that accounts for this one check's shortfall."""
    for bug in registry:
        if (
            bug.mode == "tolerate"
            and bug.applies_to(facts.descheduler_version)
            and check in bug.explains_checks(facts.experiment)
            and (ev := bug.signature(facts))
        ):
            return bug, ev
    return None


def signatures(facts: RoundFacts, registry: tuple[KnownBug, ...] = REGISTRY) -> dict[str, str]:
    """Every registered signature present in a round, by bug id (for records and notes)."""
    return {
        b.id: ev
        for b in registry
        if b.applies_to(facts.descheduler_version) and (ev := b.signature(facts))
    }


def observed(facts: RoundFacts, registry: tuple[KnownBug, ...] = REGISTRY) -> dict[str, str]:
    """Every registered signature present in a round, whatever releases the registry says
    have the bug: evidence only (it excuses nothing), how a release matrix checks `affected`."""
    return {b.id: ev for b in registry if (ev := b.signature(facts))}
