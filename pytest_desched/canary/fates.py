"""The snapshot canary's comparison: every restored pod's round-1 fate on both tracks, by
identity, and the pods whose fate differs with each track's reason.

Pure: built from the two replays' ledgers (replay/ledger.py), no cluster. Both tracks restore
the same snapshot, so a snapshot pod has the same name, owner and node on both; its identity
is still the comparison core's (outcome/identity.py: namespace, owner, node, fate, layer,
strategy, code, checks; never a random name), so siblings of one owner on one node that swap
fates (a cap cut the other one) are the same up to order, not a difference. Every pod is
compared, picked by no strategy included; a pod not restored on a track, or a round that
completed no cycle, is named as not compared, never counted as "the same".

The verdict's changes come from the lab canary's own diff (canary/compare.py): each pod's
decision goes into a round record whose class is the core's lineage and node
(`namespace/Kind/owner@node`), so the kinds, triggers and `--expect` matching are the lab
form's. The per-pod rows say why each track decided as it did, in explain's words
(evidence/explain.fate_reason, from the descheduler's own log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.canary.compare import RoundDiff
from pytest_desched.canary.expectations import Explanation
from pytest_desched.canary.verdict import Judged
from pytest_desched.descheduler.decisions import Fate
from pytest_desched.evidence.explain import fate_reason
from pytest_desched.outcome.identity import (
    Coverage,
    Identity,
    NotCompared,
    answer,
    answer_label,
    differences,
)
from pytest_desched.render import table
from pytest_desched.replay.ledger import NOT_RESTORED, SKIPPED, PodFate, fate_identity

DECIDED = {f.value for f in Fate}  # a decision the log made (not-picked, undecided: none)
MAX_MD_ROWS = 500  # per-pod rows in canary.md (all of them in canary.json)


@dataclass(frozen=True)
class TrackRound:
    """One track's round 1 of the snapshot: who ran it and each snapshot pod's fate."""

    name: str  # baseline | candidate
    version: str
    fates: dict[str, PodFate]  # restored snapshot pod -> its round-1 fate
    facts: dict[str, dict[str, Any]]  # pod -> {"owner": Kind/name, "node": ...}
    no_cycle: str | None = None  # why round 1 completed no descheduling cycle
    values: tuple[str, ...] = ()  # the track's values files, by name
    policy: str = ""  # where the track's policy came from


def track_round(
    name: str,
    ledger: Any,
    version: str,
    no_cycle: str | None = None,
    values: Sequence[str] = (),
    policy: str = "",
) -> TrackRound:
    """A replay's ledger as one track's round: the snapshot's pods only (a replacement or a
    pod born during the replay exists on one track's cluster alone)."""
    fates, facts = {}, {}
    for row in ledger.rows:
        if row.origin != "snapshot" or not row.fates:
            continue
        fates[row.pod] = row.fates[0]
        facts[row.pod] = {"owner": row.owner, "node": row.node, "generation": 0}
    return TrackRound(name, version, fates, facts, no_cycle, tuple(values), policy)


def identity(pod: str, t: TrackRound) -> Identity:
    return fate_identity(pod, t.fates[pod], t.facts.get(pod))


def class_of(ident: Identity) -> str:
    """`namespace/Kind/owner@node` (a bare pod: `namespace/name@node`): the core's lineage."""
    return f"{ident.lineage}@{ident.node or '?'}"


def round_record(t: TrackRound, compared: set[str]) -> dict[str, Any]:
    """The compared pods' decisions as the lab canary's diff reads a round record
    (canary/compare.RoundFigures.of, fate_classes), each with its class."""
    decisions = []
    for pod in sorted(compared):
        f = t.fates[pod]
        if f.fate not in DECIDED:
            continue
        ns, _, name = pod.partition("/")
        decisions.append(
            {
                "namespace": ns,
                "name": name,
                "node": t.facts[pod].get("node"),
                "fate": f.fate,
                "layer": f.layer,
                "strategy": f.strategy,
                "checks": list(f.checks),
                "status_code": f.status_code,
                "class": class_of(identity(pod, t)),
            }
        )
    skipped = next((f.detail for f in t.fates.values() if f.fate == SKIPPED), None)
    return {
        "decisions": decisions,
        "evictions": sum(1 for d in decisions if d["fate"] == Fate.EVICTED.value),
        "verdict": f"skipped:{skipped}" if skipped else "",
        "versions": {"descheduler": t.version},
        "pending_pods": [p for p in compared if t.fates[p].replacement == "pending"],
    }


@dataclass
class PodDifference:
    """One pod whose fate differs between the tracks, with each track's reason."""

    pod: str
    owner: str | None
    node: str | None
    baseline: str  # the fate's label (ledger.PodFate.label)
    candidate: str
    baseline_why: str
    candidate_why: str
    pods: str  # its class (owner@node), the subject of the verdict's change
    kind: str = ""  # the class's change kind ("" when the class's fates did not change)
    status: str = ""  # the verdict on that change: explained, unexplained, ...
    explained_by: str = ""  # the explanation's reason (and where), or the fixed bug

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class SnapshotFates:
    """The per-pod comparison of the two tracks' round 1 on one snapshot."""

    snapshot: dict[str, Any]
    tracks: dict[str, dict[str, Any]]
    coverage: Coverage
    differ: list[PodDifference] = field(default_factory=list)
    identities: list[dict[str, Any]] = field(default_factory=list)  # core Difference dicts
    not_compared: list[NotCompared] = field(default_factory=list)
    up_to_order: int = 0  # pods whose own fate changed, their identities' counts did not
    classes: int = 0  # pod classes compared

    @property
    def same(self) -> bool | str:
        return answer(not self.identities, self.coverage)

    def newly(self, side: str, fate: str = Fate.EVICTED.value) -> list[PodDifference]:
        """Pods `side` gives `fate` and the other track does not."""
        other = "baseline" if side == "candidate" else "candidate"
        return [
            d
            for d in self.differ
            if _fate(getattr(d, side)) == fate and _fate(getattr(d, other)) != fate
        ]

    def _who(self, side: str) -> str:
        t = self.tracks.get(side) or {}
        values = t.get("values_files") or []
        return f"{t.get('version') or side}" + (f" with {', '.join(values)}" if values else "")

    def sentences(self) -> list[str]:
        """The answer in a user's words: which pods one release would evict, the other not."""
        b, c = self._who("baseline"), self._who("candidate")
        if self.same is not True and not self.identities:
            return [f"no pod fate compared: {self.coverage.line()}"]
        out = []
        for side in ("candidate", "baseline"):
            pods = self.newly(side)
            who, whom = (c, b) if side == "candidate" else (b, c)
            out.append(
                f"{who} would evict {len(pods)} pod(s) that {whom} would not"
                + (": " + ", ".join(d.pod for d in pods[:20]) if pods else "")
                + (f" (and {len(pods) - 20} more)" if len(pods) > 20 else "")
            )
        rest = len(self.differ) - len(self.newly("candidate")) - len(self.newly("baseline"))
        out.append(f"{rest} other pod(s) keep a different fate (see the table)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "tracks": self.tracks,
            "same_fates_up_to_order": self.same,
            "coverage": self.coverage.to_dict(),
            "sentences": self.sentences(),
            "differ": [d.to_dict() for d in self.differ],
            "identities_differ": self.identities,
            "not_compared": [n.to_dict() for n in self.not_compared],
            "up_to_order": self.up_to_order,
            "classes": self.classes,
        }

    def markdown(self) -> str:
        s = self.snapshot
        lines = [
            "## Pod fates on the snapshot",
            "",
            f"- snapshot: {s.get('path')} taken {s.get('takenAt')} ({s.get('nodes')} nodes, "
            f"{s.get('pods')} pods)",
        ]
        lines += [
            f"- {side}: {self._who(side)}; policy: {t.get('policy') or '?'}"
            for side, t in self.tracks.items()
        ]
        lines += [
            f"- the same fates up to order: {answer_label(self.same)} ({self.coverage.line()}; "
            f"{self.classes} pod classes)",
        ]
        lines += [f"- {x}" for x in self.sentences()]
        if self.up_to_order:
            lines.append(
                f"- {self.up_to_order} pod(s) swapped fates with a sibling (same owner, same "
                "node): the same up to order, not a difference"
            )
        if self.differ:
            rows = [
                [
                    d.pod,
                    d.node or "",
                    d.baseline,
                    d.baseline_why,
                    d.candidate,
                    d.candidate_why,
                    d.kind or "-",
                    d.status or "-",
                    d.explained_by,
                ]
                for d in self.differ[:MAX_MD_ROWS]
            ]
            heads = ["pod", "node", "baseline", "baseline's reason", "candidate"]
            heads += ["candidate's reason", "change", "verdict", "explained by"]
            lines += ["", table(rows, heads, "md")]
            if len(self.differ) > MAX_MD_ROWS:
                lines.append(f"\n... {len(self.differ) - MAX_MD_ROWS} more pods in canary.json")
        if self.not_compared:
            lines += ["", f"### Not compared ({len(self.not_compared)} pods)", ""]
            lines += [
                f"- `{n.what}`{' ' + n.detail if n.detail else ''}: {n.why}"
                for n in self.not_compared[:200]
            ]
        return "\n".join(lines) + "\n"


def _fate(label: str) -> str:
    return label.split(" ", 1)[0]


def compare_fates(
    b: TrackRound, c: TrackRound, snapshot: Mapping[str, Any]
) -> tuple[SnapshotFates, set[str]]:
    """Every snapshot pod's round-1 fate on both tracks, by identity; the pods compared."""
    left_out: list[NotCompared] = []
    compared: set[str] = set()
    for pod in sorted(set(b.fates) | set(c.fates)):
        fb, fc = b.fates.get(pod), c.fates.get(pod)
        if fb is None or fc is None:
            side = "baseline" if fb is not None else "candidate"
            left_out.append(NotCompared(pod, f"in the {side} track's ledger only"))
        elif NOT_RESTORED in (fb.fate, fc.fate):
            f, side = (fb, "baseline") if fb.fate == NOT_RESTORED else (fc, "candidate")
            left_out.append(NotCompared(pod, f"not restored on the {side} track: {f.detail}"))
        else:
            compared.add(pod)
    gaps = [(t.name, t.no_cycle) for t in (b, c) if t.no_cycle]
    left_out += [NotCompared(f"({n} round)", f"no descheduling cycle: {why}") for n, why in gaps]
    if gaps:
        compared = set()
    ids_b = {p: identity(p, b) for p in compared}
    ids_c = {p: identity(p, c) for p in compared}
    diffs = differences([ids_b, ids_c])
    behind = {p for d in diffs for side in d.pods for p in side}
    rows, swapped = [], 0
    for pod in sorted(compared):
        fb, fc = b.fates[pod], c.fates[pod]
        if ids_b[pod] == ids_c[pod]:
            continue
        if pod not in behind:
            swapped += 1  # its identity's counts agree: a sibling took the other fate
            continue
        facts = b.facts.get(pod) or {}
        rows.append(
            PodDifference(
                pod,
                facts.get("owner"),
                facts.get("node"),
                fb.label,
                fc.label,
                _why(fb),
                _why(fc),
                class_of(ids_b[pod]),
            )
        )
    every = len(set(b.fates) | set(c.fates))
    cov = Coverage("pods", len(compared), every, anything=bool(compared))
    out = SnapshotFates(
        dict(snapshot),
        {t.name: _track(t) for t in (b, c)},
        cov,
        rows,
        [d.to_dict(("baseline", "candidate")) for d in diffs],
        left_out,
        swapped,
        len({class_of(i) for i in ids_b.values()}),
    )
    return out, compared


def _track(t: TrackRound) -> dict[str, Any]:
    return {"version": t.version, "values_files": list(t.values), "policy": t.policy}


def _why(f: PodFate) -> str:
    """The track's reason for the pod, as `desched explain` words it."""
    reason = fate_reason({"reason": f.detail, "checks": f.checks, "status_code": f.status_code})
    if f.strategy and f.fate in (Fate.EVICTED.value, Fate.REFUSED.value, Fate.DRY_RUN.value):
        reason = (
            f"{reason}; by {f.strategy}"
            if reason and f.strategy not in reason
            else (reason or f"by {f.strategy}")
        )
    return f"{reason} ({f.layer})" if f.layer and reason else reason or str(f.layer or "")


def attach_verdict(
    fates: SnapshotFates,
    rounds: Sequence[RoundDiff],
    judged: Sequence[Judged],
    explanations: Sequence[Explanation],
) -> None:
    """Each differing pod gets its class's change kind and the verdict on it (with the
    explanation's own reason, not only where it was written)."""
    kinds = {cd.pods: cd.kinds[0] for rd in rounds for cd in rd.classes}
    by_class = {j.change.subject: j for j in judged if j.change.is_pods}
    reasons = {e.source: e.reason for e in explanations}
    for d in fates.differ:
        d.kind = kinds.get(d.pods, "")
        j = by_class.get(d.pods)
        if j is None:
            continue
        d.status = j.status
        if j.by in reasons:
            d.explained_by = f"{reasons[j.by]} ({j.by})"
        elif j.by:
            d.explained_by = j.by
