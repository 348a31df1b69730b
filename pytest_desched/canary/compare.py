"""The behaviour diff of two tracks: per round, the runbook's figures and each pod class's fates.

Both tracks run on clusters of their own, so pod names, UIDs and node names differ. Pods are
matched by the comparison core's identity (outcome/identity.py), owner and node role: a
Deployment pod `web-7d4f9c8b6-x2kq9` belongs to owner `web`, and a node is named by its position among the cluster's workers (`worker-1`...), which
both clusters create the same way. Replicas of one owner on one node are interchangeable to
the descheduler (it has nothing else to tell them apart), so their fates are compared as a
multiset: "3 filtered" against "1 evicted, 2 limited", never a guessed one-to-one pairing.

A pod the round's own eviction created (a replacement, scheduled while the round still ran) is
its own class, `owner@worker-N (created in round)`: whether a later strategy or node loop lists
it before the round ends is a race, and a track that evicted nothing has no replacement at all.
Left alone on one track only, it is `replacement-seen`; evicted, it counts like any other pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pytest_desched.canary.capacity import FigureDiff, capacity_diffs
from pytest_desched.descheduler.decisions import cycle_gap
from pytest_desched.evidence.record import lab_namespaces
from pytest_desched.evidence.timeline import REPLACEMENT_SCHEDULED
from pytest_desched.outcome.fates import Fate
from pytest_desched.outcome.identity import Identity, identity_of
from pytest_desched.outcome.identity import owner_from_name as owner_of

# A track's round figures are the ledger's RoundFigures (its `runbook` form, built by
# round_figures); imported from here for one release.
from pytest_desched.outcome.ledger import RoundFigures

STOPPED = (Fate.REFUSED, Fate.LIMITED, Fate.FILTERED, Fate.NODEFIT, Fate.ERROR)
MOVED = (Fate.EVICTED,)
# An eviction was tried on the pod (whatever the API server answered), or only a cap stopped
# it: never a replacement merely "seen", on any pod.
ATTEMPTED = (Fate.EVICTED, Fate.REFUSED, Fate.ERROR, Fate.LIMITED)
CREATED_IN_ROUND = " (created in round)"
# One label per class, the gravest first: a grown set and a fail-closed round turned evict
# are the runbook's rollback triggers.
KIND_ORDER = (
    "candidate-set-grew",
    "continue-evicting",
    "more-evictions",
    "fewer-evictions",
    "candidate-set-shrank",
    "fate-changed",
)
NOT_A_CANDIDATE = "kept: not a candidate (no strategy listed these pods)"
_FATE_WORDS: dict[str, str] = {
    Fate.EVICTED: "evicted",
    Fate.DRY_RUN: "would be evicted (dry run)",
    Fate.REFUSED: "refused by the API server",
    Fate.LIMITED: "stopped by the eviction limits",
    Fate.FILTERED: "kept by the evictor's filter",
    Fate.NODEFIT: "stopped by nodeFit",
    Fate.ERROR: "eviction failed",
}


def in_words(fates: Mapping[str, int]) -> str:
    """A class's fates on one track as a reader says them: `2 x stopped by nodeFit`."""
    if not any(fates.values()):
        return NOT_A_CANDIDATE
    parts = []
    for key, n in sorted(fates.items()):
        fate, _, _layer = key.partition("/")
        name, _, detail = fate.partition("(")
        words = _FATE_WORDS.get(name, name)
        if detail:
            words += f" ({detail.rstrip(')')})"
        parts.append(f"{n} x {words}")
    return ", ".join(parts)


def node_roles(workers: Sequence[str]) -> dict[str, str]:
    """Node name -> `worker-N`, by position among the cluster's workers."""
    return {name: f"worker-{i + 1}" for i, name in enumerate(workers)}


def round_figures(record: Mapping[str, Any]) -> RoundFigures:
    """The runbook's figures for one round of one track (outcome/ledger.RoundFigures, its
    `runbook` form).

    The per-fate counts are of the lab's pods that existed before the round: a replacement the
    round's own eviction created is listed or not by a race (see the module docstring), so it is
    counted apart, in `replacements_listed`, and never moves `candidates`.
    """
    ns = lab_namespaces(record)
    created = created_in_round(record)
    lab = [d for d in record.get("decisions") or [] if ns is None or d.get("namespace") in ns]
    new = [d for d in lab if str(d.get("name")) in created]
    lab = [d for d in lab if str(d.get("name")) not in created]
    f = RoundFigures(candidates=len(lab), replacements_listed=len(new), form="runbook")
    for d in lab:
        fate = d.get("fate")
        if fate == Fate.FILTERED:
            for check in d.get("checks") or ["(unnamed)"]:
                f.protected[check] = f.protected.get(check, 0) + 1
        elif fate == Fate.NODEFIT:
            f.nodefit += 1
        elif fate == Fate.LIMITED:
            f.limited += 1
        elif fate == Fate.REFUSED:
            if d.get("status_code") == 429:
                f.pdb_refusals += 1
            else:
                f.other_refusals += 1
        elif fate == Fate.DRY_RUN:
            f.dry_run_fates += 1
    f.evictions = int(record.get("evictions") or 0)
    f.ready_latency_s = record.get("replacement_ready_latency_s")
    f.pending = len(record.get("pending_pods") or [])
    after = record.get("distribution_after") or {}
    if after:
        f.final_skew = max(after.values()) - min(after.values())
    f.verdict = str(record.get("verdict") or "")
    f.deciding_layer = record.get("deciding_layer")
    f.known_bugs = sorted(record.get("known_bugs") or {})
    f.metric_names = sorted((record.get("metrics") or {}).get("names") or [])
    f.version = str((record.get("versions") or {}).get("descheduler") or "")
    f.no_cycle = no_cycle(record)
    f.availability = dict(record.get("availability") or {})
    ev = record.get("events_delivered") or {}
    if ev:
        # Refused pods with an event from the round or, where it was measured, from the
        # long-running process (which counts only its own: a probe that never reached its
        # refusals says 0, and must not hide what the round delivered).
        got = max(int(ev.get("outliving") or 0), int(ev.get("delivered") or 0))
        f.events_delivered, f.events_owed = got, int(ev.get("owed") or 0)
    return f


def no_cycle(record: Mapping[str, Any]) -> str | None:
    """Why a round record shows no completed descheduling cycle (None: it shows one).

    A skipped cycle, a Job that failed, or an exit code that was not measured compares
    nothing: the round's fates are the absence of a cycle, not the descheduler's decisions.
    """
    verdict = str(record.get("verdict") or "")
    skipped = (verdict.partition(":")[2] or "skipped") if verdict.startswith("skipped:") else None
    job = record.get("job") or {}
    if job.get("timed_out"):  # stopped at its timeout: say what stopped it, from its own log
        cause = "; ".join(f"{b}: {ev}" for b, ev in (record.get("known_bugs") or {}).items())
        return (
            f"it did not finish and was stopped ({job['timed_out']}; deciding layer "
            f"{record.get('deciding_layer') or 'unknown'}"
            + (f"; {cause}" if cause else "; no known bug's signature in its log")
            + ")"
        )
    return cycle_gap(skipped, job.get("succeeded"), job.get("exit_code"))


def created_in_round(record: Mapping[str, Any]) -> set[str]:
    """Names of the pods the round's evictions created: the recorder saw them scheduled during
    the round, and they were not in the lab's snapshot taken before it (evidence/timeline.py)."""
    return {
        str(e["pod"])
        for e in record.get("timeline") or []
        if e.get("what") == REPLACEMENT_SCHEDULED and e.get("pod")
    }


def class_of(ident: Identity) -> str:
    """A pod class, `owner@worker-N`, from the comparison core's identity (outcome/identity.py:
    never a random name; a replacement is generation 1, its own class)."""
    return f"{ident.owner or ''}@{ident.node}" + (CREATED_IN_ROUND if ident.generation else "")


def fate_classes(record: Mapping[str, Any], roles: Mapping[str, str]) -> dict[str, Counter[str]]:
    """`owner@role` -> fates of the lab's pods of that class in one round (fate/layer)."""
    ns = lab_namespaces(record)
    created = created_in_round(record)
    out: dict[str, Counter[str]] = {}
    for d in record.get("decisions") or []:
        if ns is not None and d.get("namespace") not in ns:
            continue
        node = d.get("node") or "?"
        name = str(d.get("name"))
        # A decision may name its class (the snapshot canary's, from the core's identity);
        # a lab round's is its owner, read from the name, and its node's role.
        key = d.get("class") or class_of(
            identity_of(
                f"{d.get('namespace')}/{name}",
                owner=owner_of(name),
                generation=int(name in created),
                node=roles.get(node, node),
            )
        )
        out.setdefault(str(key), Counter())[fate_key(d)] += 1
    return out


def fate_key(d: Mapping[str, Any]) -> str:
    """A decision's fate as a class counts it, `fate(detail)/layer`: the evictor's checks of a
    filtered pod, the API's status code of a refused one (429 (PDB) -> 403 (RBAC) is a change)."""
    fate = str(d.get("fate"))
    if fate == Fate.FILTERED and d.get("checks"):
        fate += "(" + ",".join(sorted(d["checks"])) + ")"
    elif fate in (Fate.REFUSED, Fate.ERROR) and d.get("status_code") is not None:
        fate += f"({d['status_code']})"
    return f"{fate}/{d.get('layer')}"


@dataclass
class PodClassDiff:
    """One pod class whose fates differ between the tracks."""

    pods: str  # owner@worker-N
    baseline: dict[str, int]
    candidate: dict[str, int]
    kinds: list[str]  # exactly one: KIND_ORDER's gravest that applies, or "replacement-seen"

    @property
    def baseline_words(self) -> str:
        return in_words(self.baseline)

    @property
    def candidate_words(self) -> str:
        return in_words(self.candidate)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["baseline_words"], d["candidate_words"] = self.baseline_words, self.candidate_words
        return d


def _count(fates: Counter[str], prefixes: Sequence[str]) -> int:
    return sum(n for k, n in fates.items() if k.split("/", 1)[0].split("(", 1)[0] in prefixes)


def diff_classes(
    baseline: Mapping[str, Counter[str]], candidate: Mapping[str, Counter[str]]
) -> list[PodClassDiff]:
    """Every pod class whose fate multiset differs, with the kind of change it is."""
    out: list[PodClassDiff] = []
    for key in sorted(set(baseline) | set(candidate)):
        b, c = baseline.get(key, Counter()), candidate.get(key, Counter())
        if b == c:
            continue
        kinds: list[str] = []
        b_moved, c_moved = _count(b, MOVED), _count(c, MOVED)
        tried = _count(b, ATTEMPTED) + _count(c, ATTEMPTED)
        if key.endswith(CREATED_IN_ROUND) and tried == 0:
            out.append(PodClassDiff(key, dict(b), dict(c), ["replacement-seen"]))
            continue
        if c_moved > b_moved and _count(b, STOPPED) > 0:
            kinds.append("continue-evicting")  # the baseline stopped these pods; candidate moved
        elif c_moved > b_moved:
            kinds.append("more-evictions")
        elif c_moved < b_moved:
            kinds.append("fewer-evictions")
        if sum(c.values()) > sum(b.values()):
            kinds.append("candidate-set-grew")
        elif sum(c.values()) < sum(b.values()):
            kinds.append("candidate-set-shrank")
        if not kinds:
            kinds.append("fate-changed")
        kinds = [min(kinds, key=KIND_ORDER.index)]
        out.append(PodClassDiff(key, dict(b), dict(c), kinds))
    return out


@dataclass
class RoundDiff:
    """One round (experiment label + index) of both tracks, side by side."""

    experiment: str  # name[variant]
    index: int
    baseline: RoundFigures | None
    candidate: RoundFigures | None
    classes: list[PodClassDiff] = field(default_factory=list)
    lost_metrics: list[str] = field(default_factory=list)  # served by the baseline only
    bugs_fixed: list[str] = field(default_factory=list)  # signature on baseline, gone on cand.
    bugs_new: list[str] = field(default_factory=list)
    # Every pod class of the round, changed or not, in words per track (the report's table).
    words: list[dict[str, str]] = field(default_factory=list)
    # The rebuild window's figures that differ (canary/capacity.py): capacity, Ready, Pending, skew.
    capacity: list[FigureDiff] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.classes or self.lost_metrics or self.bugs_fixed or self.bugs_new or self.capacity
        ) or ((self.baseline is None) != (self.candidate is None))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, baseline=None, candidate=None, capacity=[]))
        d["capacity"] = [c.to_dict() for c in self.capacity]
        d["baseline"] = self.baseline.to_dict() if self.baseline else None
        d["candidate"] = self.candidate.to_dict() if self.candidate else None
        d["changed"] = self.changed
        return d


def diff_rounds(
    experiment: str,
    baseline: Sequence[Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
    baseline_roles: Mapping[str, str],
    candidate_roles: Mapping[str, str],
) -> list[RoundDiff]:
    """Round i of one track against round i of the other (same experiment, same policy)."""
    out: list[RoundDiff] = []
    for i in range(max(len(baseline), len(candidate))):
        b = baseline[i] if i < len(baseline) else None
        c = candidate[i] if i < len(candidate) else None
        rd = RoundDiff(
            experiment,
            i,
            round_figures(b) if b is not None else None,
            round_figures(c) if c is not None else None,
        )
        if b is not None and c is not None:
            bf, cf = fate_classes(b, baseline_roles), fate_classes(c, candidate_roles)
            rd.classes = diff_classes(bf, cf)
            rd.words = [
                {
                    "pods": key,
                    "baseline": in_words(bf.get(key, {})),
                    "candidate": in_words(cf.get(key, {})),
                }
                for key in sorted(set(bf) | set(cf))
            ]
            assert rd.baseline is not None and rd.candidate is not None
            bn, cn = set(rd.baseline.metric_names), set(rd.candidate.metric_names)
            if bn and cn:  # both scraped: a name the baseline served must still be served
                rd.lost_metrics = sorted(bn - cn)
            bb, cb = set(rd.baseline.known_bugs), set(rd.candidate.known_bugs)
            rd.bugs_fixed, rd.bugs_new = sorted(bb - cb), sorted(cb - bb)
            rd.capacity = capacity_diffs(rd.baseline, rd.candidate)
        out.append(rd)
    return out
