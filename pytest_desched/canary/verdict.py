"""The canary's verdict: every observed change explained, or the upgrade is rolled back.

The runbook's rollback triggers are the headline (`TRIGGERS`): the candidate set grows, a
fail-closed round becomes continue-evicting, a metric the baseline served is gone, a known
bug appears. Every other behaviour change fails too unless explained: an upgrade canary
exists to catch what nobody predicted. Explanations come from two places only: the user's
file (expectations.py) and a known upstream bug the candidate fixes, proven by its signature
present on the baseline's round (of a version the registry lists as affected) and gone from
a candidate round that completed its cycle and listed pods, with the pods' baseline fates
exactly the ones the bug causes (known_bugs.KnownBug.fates) and none of them left on the
candidate's same pods. When the tracks' Kubernetes differ, a change with neither is attributed
to the control plane where the clusters' own readings explain it (canary/control_plane.py):
named, with both versions, and never counted against the descheduler. A baseline round that completed no cycle is no reference: nothing of
it is compared (the engine's NO VERDICT names it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.canary.capacity import CAPACITY_INFORMATIVE
from pytest_desched.canary.compare import RoundDiff, RoundFigures
from pytest_desched.canary.expectations import TRIGGERS, Change, Explanation
from pytest_desched.descheduler.known_bugs import BY_ID, KnownBug

# Good news, or a known bug the baseline shows too, now reached on another path (e.g. #1687's
# lost events once a fixed #1882 lets evictions reach the PDB), or a run-to-run race both
# versions have that one track lost this time, or a replacement pod the round's own eviction
# created that the descheduler listed and left alone on one track only (compare.py): said,
# never a failure alone.
INFORMATIVE = (
    "bug-fixed",
    "bug-reached",
    "bug-intermittent",
    "replacement-seen",
    *CAPACITY_INFORMATIVE,  # better capacity, or what follows a judged eviction change
)


def _fate_names(counts: dict[str, int]) -> set[str]:
    return {k.split("/", 1)[0] for k, n in counts.items() if n}


def changes_of(rounds: Iterable[RoundDiff]) -> list[tuple[Change, str | None]]:
    """Each observed change, with the known-bug fix that explains it (or None).

    A bug whose signature the candidate shows in a round is `bug-new` (a trigger) only when
    the baseline never showed it in any round; otherwise it is `bug-reached`. A tolerated
    bug (known_bugs mode "tolerate": a loss that varies from run to run) whose signature is
    on one track only, while the other track's version is affected too, is
    `bug-intermittent`: one run proves neither a regression nor a fix.
    """
    rounds = list(rounds)
    baseline_bugs = {b for rd in rounds if rd.baseline for b in rd.baseline.known_bugs}

    def race_on_both(bug_id: str, other: RoundFigures) -> str | None:
        bug = BY_ID.get(bug_id)
        if bug is None or bug.mode != "tolerate" or not bug.applies_to(other.version):
            return None
        return (
            f"{bug.describe()} varies from run to run, and {other.version} on the other track "
            "is affected too: one run's signature is neither a regression nor a fix"
        )

    out: list[tuple[Change, str | None]] = []
    for rd in rounds:
        if rd.baseline is None or rd.candidate is None:
            side = "candidate" if rd.candidate is None else "baseline"
            out.append(
                (Change(rd.experiment, rd.index, "round-missing", "-", f"no round on {side}"), None)
            )
            continue
        if rd.baseline.no_cycle:
            # no reference to compare against: the engine's NO VERDICT names it; a hang the
            # baseline's log proves (a bug that `stops_at` a layer) and the candidate's
            # completed cycle does not show is that bug's fix, said as such
            for bug_id in rd.bugs_fixed:
                bug = BY_ID.get(bug_id)
                if bug is not None and bug.stops_at and rd.candidate.no_cycle is None:
                    hang = (
                        f"the baseline's round never finished (stopped at its timeout, deciding "
                        f"layer {bug.stops_at}: {bug.title}); the candidate's round completed "
                        "its cycle without the signature"
                    )
                    out.append((Change(rd.experiment, rd.index, "bug-fixed", bug_id, hang), bug_id))
            continue
        fixed: list[KnownBug] = []
        unproven: dict[str, str] = {}  # bug id -> why its absence on the candidate proves nothing
        for bug_id in rd.bugs_fixed:
            if why := race_on_both(bug_id, rd.candidate):
                out.append(
                    (Change(rd.experiment, rd.index, "bug-intermittent", bug_id, why), bug_id)
                )
                continue
            if why := fix_unproven(bug_id, rd.baseline, rd.candidate):
                unproven[bug_id] = why
                continue
            fixed.append(BY_ID[bug_id])
            why = f"signature gone from the candidate's round ({rd.candidate.candidates} pod(s) listed)"
            out.append((Change(rd.experiment, rd.index, "bug-fixed", bug_id, why), bug_id))
        for bug_id in rd.bugs_new:
            if bug_id in baseline_bugs:
                why = "signature appeared here; the baseline shows it in another round"
                out.append((Change(rd.experiment, rd.index, "bug-reached", bug_id, why), bug_id))
            elif why := race_on_both(bug_id, rd.baseline):
                out.append(
                    (Change(rd.experiment, rd.index, "bug-intermittent", bug_id, why), bug_id)
                )
            else:
                why = "signature appeared; the baseline never showed it"
                out.append((Change(rd.experiment, rd.index, "bug-new", bug_id, why), None))
        if lost := events_lost(rd.baseline, rd.candidate):
            out.append(
                (Change(rd.experiment, rd.index, "events-lost", "EvictionFailed", lost), None)
            )
        for fd in rd.capacity:  # the rebuild window's figures (canary/capacity.py)
            out.append((Change(rd.experiment, rd.index, fd.kind, fd.subject, fd.detail), None))
        for name in rd.lost_metrics:
            out.append(
                (
                    Change(rd.experiment, rd.index, "lost-metric", name, "served by baseline only"),
                    None,
                )
            )
        for cd in rd.classes:
            base_fates, cand_fates = _fate_names(cd.baseline), _fate_names(cd.candidate)
            by = next((b.id for b in fixed if _fix_explains(b, base_fates, cand_fates)), None)
            detail = f"baseline: {cd.baseline_words}; candidate: {cd.candidate_words}"
            detail += "".join(
                f"; not credited to a fix of {bug_id}: {why}" for bug_id, why in unproven.items()
            )
            if cd.kinds == ["replacement-seen"]:
                detail += (
                    ": a pod this round's own eviction created, listed before the round ended "
                    "and left alone (whether it is listed in time is a race)"
                )
            for kind in cd.kinds:
                out.append((Change(rd.experiment, rd.index, kind, cd.pods, detail), by))
    return out


def fix_unproven(bug_id: str, b: RoundFigures, c: RoundFigures) -> str | None:
    """Why a signature on the baseline and absent from the candidate proves no fix, or None.

    An absence is proof only from a candidate round that completed its cycle and listed pods
    (a candidate that listed nothing shows no signature of anything), of a bug the registry
    says the baseline's version has.
    """
    bug = BY_ID.get(bug_id)
    if bug is None:
        return f"{bug_id} is not in the known-bug registry (known_bugs.REGISTRY)"
    if not bug.applies_to(b.version):
        return (
            f"the registry does not list the baseline's version ({b.version or 'not recorded'}) "
            f"in {bug_id}'s range ({bug.affected})"
        )
    if c.no_cycle:
        return f"the candidate's round completed no descheduling cycle ({c.no_cycle})"
    if not c.candidates:
        return "the candidate's round listed no pod, so its missing signature proves nothing"
    return None


def _fix_explains(bug: KnownBug, base_fates: set[str], cand_fates: set[str]) -> bool:
    """The class's baseline fates are exactly the bug's, and the candidate's own pods show
    they are gone: it listed them (some fate) and none of them kept a fate the bug causes."""
    return bool(
        bug.fates
        and base_fates
        and base_fates <= set(bug.fates)
        and cand_fates
        and not cand_fates & set(bug.fates)
    )


def events_lost(b: RoundFigures, c: RoundFigures) -> str | None:
    """The candidate delivered no EvictionFailed event for its refusals; the baseline did.

    A one-shot run can lose queued events at exit (descheduler#1687, a race: on v0.36.0 2 of
    3 arrive in most runs), so fewer events than the baseline is not a change. None of them,
    where the baseline's same round delivered some, is: #1687 never excuses a candidate that
    sends none, since the baseline shows the same binary path does deliver.
    """
    if not (b.events_owed and c.events_owed) or b.events_delivered is None:
        return None
    if c.events_delivered == 0 and b.events_delivered > 0:
        return (
            f"candidate delivered 0 of {c.events_owed} EvictionFailed events for its refusals; "
            f"the baseline delivered {b.events_delivered} of {b.events_owed}"
        )
    return None


# A change's key for an attribution made apart from its words (experiment, round, kind, subject).
ChangeKey = tuple[str, int, str, str]


def key_of(change: Change) -> ChangeKey:
    return (change.experiment, change.round, change.kind, change.subject)


@dataclass
class Judged:
    change: Change
    # "explained" | "fixed-bug" | "informative" | "control-plane" | "unexplained"
    status: str
    by: str | None = None  # explanation source or bug id
    trigger: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.change.to_dict(),
            "status": self.status,
            "by": self.by,
            "trigger": self.trigger,
        }


@dataclass
class CanaryVerdict:
    ok: bool
    judged: list[Judged] = field(default_factory=list)
    stale: list[Explanation] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def unexplained(self) -> list[Judged]:
        return [j for j in self.judged if j.status == "unexplained"]

    @property
    def control_plane(self) -> list[str]:
        """Each change attributed to the control plane, in one line (the verdict's notes)."""
        return [
            f"{j.change.kind} in {j.change.where}: {j.change.subject}: {j.by}"
            for j in self.judged
            if j.status == "control-plane"
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reasons": self.reasons,
            "changes": [j.to_dict() for j in self.judged],
            "stale_explanations": [e.to_dict() for e in self.stale],
        }


def judge(
    changes: Sequence[tuple[Change, str | None]],
    explanations: Sequence[Explanation],
    control_plane: Mapping[ChangeKey, str] | None = None,
) -> CanaryVerdict:
    """Explain each change (user's file first, then a proven bug fix, then the control plane
    where `control_plane` attributes it: key_of(change) -> why); fail on the rest."""
    judged: list[Judged] = []
    attributed = control_plane or {}
    used: set[int] = set()
    for change, bug in changes:
        trigger = change.kind in TRIGGERS
        hit = next((i for i, e in enumerate(explanations) if e.matches(change)), None)
        if hit is not None:
            used.add(hit)
            judged.append(Judged(change, "explained", explanations[hit].source, trigger))
        elif change.kind in INFORMATIVE:
            judged.append(Judged(change, "informative", bug, trigger))
        elif bug is not None:
            judged.append(Judged(change, "fixed-bug", bug, trigger))
        elif why := attributed.get(key_of(change)):
            judged.append(Judged(change, "control-plane", why, trigger))
        else:
            judged.append(Judged(change, "unexplained", None, trigger))
    stale = [e for i, e in enumerate(explanations) if i not in used]
    reasons: list[str] = []
    for j in judged:
        if j.status == "unexplained" and j.change.kind == "track-error":
            reasons.append(
                f"the {j.change.subject} track could not run, so nothing was compared: "
                f"{j.change.detail}"
            )
        elif j.status == "unexplained":
            what = "rollback trigger" if j.trigger else "unexplained change"
            reasons.append(
                f"{what} {j.change.kind} in {j.change.where}: {j.change.subject}: {j.change.detail}"
            )
    for e in stale:
        reasons.append(
            f"stale explanation {e.source} ({e.reason!r}): matches no observed change; the "
            "candidate does not do what it says, or remove it"
        )
    return CanaryVerdict(not reasons, judged, stale, reasons)
