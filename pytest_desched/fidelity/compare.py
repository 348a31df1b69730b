"""Dry-run fidelity: pair a dry-run round's pods with a real round's, and explain each difference.

Pure logic, no cluster. The two halves ran the same state, version and policy in two lab
namespaces, so pods are compared by a namespace-relative identity (the workload, else the
owner, else the pod's own name) and the node they ran on; pods of one identity on one node are
interchangeable, so equal fates are paired first. A difference is explained only by a layer a
dry run cannot see, each proven from the halves' own evidence (explain.py: a 429 from a PDB
that selects the pod, an RBAC 403, the caps each half filled, a replacement left Pending), or
by a known upstream bug whose signature the dry-run round shows (descheduler#1917). Anything
else is unexplained: the fidelity verdict fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from pytest_desched.descheduler.decisions import PodDecision
from pytest_desched.descheduler.known_bugs import PROOF_1917_SETTLED
from pytest_desched.fidelity.explain import (
    BUG_1917,
    EXPLAINERS,
    NOT_COMPARABLE,
    Budget,
    refusal_unexplained,
    skip_gap,
)
from pytest_desched.outcome import identity as core
from pytest_desched.outcome.fates import FATE_RANK, Fate

# One pod's fate in one half is the ledger's PodFate (its fidelity view: `shown`, `same_as`);
# imported from here for one release.
from pytest_desched.outcome.ledger import PodFate, rank
from pytest_desched.outcome.verdict import Outcome as VerdictOutcome

Mode = Literal["dry-run", "real"]
# A pod the log names more than once keeps the fate furthest down the runbook's chain
# (outcome/ledger.rank); the name stays for one release.
RANK = FATE_RANK


@dataclass(frozen=True)
class PodRef:
    """A lab pod before the round: its key, namespace-relative identity and node."""

    key: str  # namespace/name
    identity: str  # "<lab>/spread-demo": the same in both halves
    node: str | None
    namespace: str = ""
    budgets: tuple[Budget, ...] = ()  # the PDBs that select it (budgets_of)


@dataclass(frozen=True)
class Half:
    """What one half's round showed: its pods' fates and the evidence explanations may use.

    `caps`: the policy's limits (None: unlimited); `pdb_disruptions_allowed`: the lab PDB's
    status before the round (None: no PDB; the same-state check reads it, a 429 is judged by
    the PDBs that select its pod, PodFate.budgets); `pending`: identities with a Pending pod at
    the end; `signatures`: known-bug id -> evidence proven from this half's round; `user`: the
    descheduler's service account user, when known (an RBAC 403 must name it).
    """

    mode: Mode
    fates: tuple[PodFate, ...]
    caps: Mapping[str, int | None] = field(default_factory=dict)
    pdb_disruptions_allowed: int | None = None
    pending: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    signatures: Mapping[str, str] = field(default_factory=dict)
    skipped: str | None = None
    user: str = ""
    # Dry run only: the same binary's settled cycle on the same unchanged lab (mirror_probe.py)
    # and how it ran; what the Job's cycle missed and this one predicts is #1917's. A
    # `settled_how` with no `settled`: the probe ran and found no complete cycle, or could not
    # run here; the verdict on an unexplained row then says so.
    settled: tuple[PodFate, ...] | None = None
    settled_how: str = ""

    def evictions(self, scope: str, of: PodFate) -> int:
        """Evictions counted against `of`'s cap of kind `scope` (node, namespace or total)."""
        return sum(
            1
            for f in self.fates
            if f.fate == Fate.EVICTED
            and (
                scope == "total"
                or (scope == "node" and f.node == of.node)
                or (scope == "namespace" and f.namespace == of.namespace)
            )
        )


@dataclass(frozen=True)
class Row:
    """One pod pair: the same identity on the same node in each half."""

    identity: str
    node: str | None
    dry: PodFate | None
    real: PodFate | None
    explained_by: str | None = None  # the layer or bug; None on a row with no difference
    proof: str = ""
    pending: tuple[str, ...] = ()  # evicted in both, but the real half's replacement Pending

    @property
    def differs(self) -> bool:
        d, r = self.dry, self.real
        if d is None or r is None:
            return True
        if d.same_as() != r.same_as():
            return True
        return bool(self.pending)  # evicted in both halves, then Pending in the real one

    @property
    def explained(self) -> bool:
        return not self.differs or self.explained_by is not None

    def to_dict(self) -> dict[str, Any]:
        either = self.real or self.dry
        return {
            "identity": self.identity,
            "node": self.node,
            "dry_run": self.dry.shown() if self.dry else None,
            "real": self.real.shown() if self.real else None,
            "strategy": either.strategy if either else None,
            "differs": self.differs,
            "explained_by": self.explained_by,
            "proof": self.proof,
            "pending": list(self.pending),
            "dry_pod": self.dry.key if self.dry else None,
            "real_pod": self.real.key if self.real else None,
        }


@dataclass(frozen=True)
class FidelityResult:
    """The comparison: every row, the counts the summary line states, and the verdict."""

    rows: tuple[Row, ...]
    predicted: int  # real evictions the dry run also predicted
    real_evictions: int
    dry_evictions: int
    mirror: str = ""  # what the #1917 mirror probe did (or why not), when it was asked
    # Why the halves could not be compared (a half's cycle skipped: explain.skip_gap): the
    # rows then agree on nothing but the absence of a cycle, and the verdict cannot pass.
    not_comparable: tuple[str, ...] = ()

    @property
    def differences(self) -> list[Row]:
        return [r for r in self.rows if r.differs]

    @property
    def unexplained(self) -> list[Row]:
        return [r for r in self.rows if not r.explained]

    @property
    def ok(self) -> bool:
        return not self.unexplained and not self.not_comparable

    def line(self) -> str:
        if self.not_comparable:
            return NOT_COMPARABLE + "; ".join(self.not_comparable)
        k, u = len(self.differences), len(self.unexplained)
        tail = "each explained" if not u else f"{u} unexplained"
        if u and self.mirror:  # #1917 was the one explanation left: say why it is not proven
            tail += f" ({BUG_1917} not proven: {self.mirror})"
        return (
            f"dry-run predicted {self.predicted} of {self.real_evictions} real evictions; "
            f"{k} difference{'' if k == 1 else 's'}, {tail}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.line(),
            "ok": self.ok,
            "predicted": self.predicted,
            "real_evictions": self.real_evictions,
            "dry_run_evictions": self.dry_evictions,
            "differences": len(self.differences),
            "unexplained": len(self.unexplained),
            "mirror_probe": self.mirror or None,
            "not_comparable": list(self.not_comparable),
            "rows": [r.to_dict() for r in self.rows],
        }


# -- building a half's fates ---------------------------------------------------------------


def relative_namespace(namespace: str, lab_namespace: str) -> str:
    """`<lab>` for the lab's namespace, `<lab>-b` for a second one it owns, else as is."""
    if namespace == lab_namespace:
        return "<lab>"
    if namespace.startswith(lab_namespace + "-"):
        return "<lab>" + namespace[len(lab_namespace) :]
    return namespace


def identity_of(
    namespace: str, lab_namespace: str, workload: str | None, owner: str | None, name: str
) -> str:
    """The pod's namespace-relative identity: workload, else owner, else its own name.

    The comparison core's rule (outcome/identity.py): the halves' pods are originals in two
    lab namespaces, so a controller's random name is dropped and only a bare pod keeps its own.
    """
    ns = relative_namespace(namespace, lab_namespace)
    return core.identity_of(f"{ns}/{name}", owner=workload or owner, bare=True).lineage


def _normal(d: PodDecision, mode: Mode) -> Fate:
    """A decision's fate, normalised so the halves compare: a dry run's "would evict" and a
    real run's 201 are both EVICTED (the same prediction); the other mode's is an error."""
    if d.fate in (Fate.EVICTED, Fate.DRY_RUN):
        return Fate.EVICTED if (d.fate == Fate.DRY_RUN) == (mode == "dry-run") else Fate.ERROR
    return d.fate


def fates_of(
    pods: Iterable[PodRef], decisions: Iterable[PodDecision], mode: Mode
) -> tuple[PodFate, ...]:
    """Each lab pod's furthest fate in the round (untouched: the log names it nowhere)."""
    best: dict[str, PodDecision] = {}
    for d in decisions:
        cur = best.get(d.key)
        if cur is None or rank(_normal(d, mode)) >= rank(_normal(cur, mode)):
            best[d.key] = d
    out = []
    for p in pods:
        found = best.get(p.key)
        namespace, _, name = p.key.rpartition("/")
        if found is None:
            out.append(
                PodFate(
                    Fate.NOT_PICKED,
                    identity=p.identity,
                    node=p.node,
                    namespace=namespace,
                    name=name,
                    budgets=p.budgets,
                )
            )
            continue
        out.append(
            PodFate(
                _normal(found, mode),
                identity=p.identity,
                node=p.node,
                strategy=found.strategy,
                status_code=found.status_code,
                checks=tuple(found.checks),
                namespace=namespace,
                name=name,
                budgets=p.budgets,
                message=found.message or "",
            )
        )
    return tuple(out)


def _explain(row: Row, dry: Half, real: Half) -> Row:
    for name, fn in EXPLAINERS:
        proof = fn(row, dry, real)
        if proof:
            return Row(row.identity, row.node, row.dry, row.real, name, proof, row.pending)
    r = row.real
    if r is not None and r.fate == Fate.REFUSED and r.status_code in (403, 429):
        return replace(row, proof=f"UNEXPLAINED: {refusal_unexplained(r)}")
    return row


# -- pairing -------------------------------------------------------------------------------


def _pair(dry: list[PodFate], real: list[PodFate]) -> list[tuple[PodFate | None, PodFate | None]]:
    """Equal fates first (the pods of one identity on one node are interchangeable), then
    the rest by rank, so a refusal faces an eviction before it faces a filter."""
    out: list[tuple[PodFate | None, PodFate | None]] = []
    left = list(real)
    rest: list[PodFate] = []
    for d in dry:
        same = next(
            (r for r in left if r.same_as() == d.same_as()),
            None,
        )
        if same is None:
            same = next((r for r in left if r.fate == d.fate), None)
        if same is None:
            rest.append(d)
        else:
            left.remove(same)
            out.append((d, same))
    rest.sort(key=lambda f: -rank(f.fate))
    left.sort(key=lambda f: -rank(f.fate))
    for i in range(max(len(rest), len(left))):
        out.append((rest[i] if i < len(rest) else None, left[i] if i < len(left) else None))
    return out


def compare(dry: Half, real: Half) -> FidelityResult:
    """Every pod pair of the two halves, each difference explained or left unexplained."""
    groups: dict[tuple[str, str], tuple[list[PodFate], list[PodFate]]] = {}
    for half, i in ((dry, 0), (real, 1)):
        for f in half.fates:
            groups.setdefault((f.identity, f.node or ""), ([], []))[i].append(f)
    rows: list[Row] = []
    for (identity, node), (ds, rs) in sorted(groups.items()):
        for d, r in _pair(ds, rs):
            both = d is not None and r is not None and d.fate == r.fate == Fate.EVICTED
            pending = tuple(real.pending.get(identity, ())) if both else ()
            row = Row(identity, node or None, d, r, pending=pending)
            if row.differs:
                row = _explain(row, dry, real)
            rows.append(row)
    if dry.settled is not None and any(not r.explained for r in rows):
        rows = _against_settled(rows, dry, real)
    if dry.settled_how:
        rows = [_unproven(r, dry) if not r.explained else r for r in rows]
    real_ev = [r for r in rows if r.real and r.real.fate == Fate.EVICTED]
    return FidelityResult(
        rows=tuple(rows),
        predicted=len(
            [
                r
                for r in real_ev
                if r.real
                and r.dry
                and r.dry.fate == Fate.EVICTED
                and r.dry.strategy == r.real.strategy
            ]
        ),
        real_evictions=len(real_ev),
        dry_evictions=sum(1 for r in rows if r.dry and r.dry.fate == Fate.EVICTED),
        mirror=dry.settled_how,
        not_comparable=tuple(
            g for h in (real, dry) if (g := skip_gap(h.mode, h.skipped, h.signatures))
        ),
    )


def _unproven(row: Row, dry: Half) -> Row:
    """An unexplained row, with why the mirror probe did not explain it either."""
    why = (
        f"the settled dry-run cycle does not account for it either ({dry.settled_how})"
        if dry.settled is not None
        else f"{BUG_1917} not proven: {dry.settled_how}"
    )
    said = row.proof.removeprefix("UNEXPLAINED: ")
    said = f"{said}; " if said else ""
    return replace(
        row, proof=f"UNEXPLAINED: {said}no hidden layer or proven bug explains it; {why}"
    )


def _against_settled(rows: list[Row], dry: Half, real: Half) -> list[Row]:
    """Unexplained rows the settled cycle accounts for: #1917, proven.

    Only when the settled cycle's fates differ from the Job's cycle (the mirror changed the
    answer) and, for the pod, the settled cycle's own comparison with the real half holds
    (the same fate, or a difference a hidden layer explains, such as a cap its would-be
    evictions filled): the bug then explains only the mirror's part.
    """
    settled = dry.settled or ()
    if sorted(f.shown() for f in settled) == sorted(f.shown() for f in dry.fates):
        return rows  # the settled cycle said what the Job's did: the mirror changed nothing
    alt = compare(replace(dry, fates=settled, settled=None), real)
    by_real = {r.real.key: r for r in alt.rows if r.real is not None}
    out = []
    for row in rows:
        a = by_real.get(row.real.key) if row.real is not None and not row.explained else None
        d = row.dry
        if a is None or a.dry is None or d is None or not a.explained:
            out.append(row)
            continue
        if rank(a.dry.fate) < rank(d.fate):
            out.append(row)  # the settled cycle got less far: not the mirror's doing
            continue
        then = f", then {a.explained_by}" if a.differs else ""
        proof = (
            f"known bug {BUG_1917}: the Job's dry-run cycle said {d.shown()} for this pod (its "
            f"mirror of the cluster was incomplete), {PROOF_1917_SETTLED} {a.dry.shown()} "
            f"({dry.settled_how})" + (f"; {a.proof}" if a.differs else "")
        )
        out.append(Row(row.identity, row.node, d, row.real, BUG_1917 + then, proof, row.pending))
    return out


# -- the table -----------------------------------------------------------------------------

COLUMNS = ("POD", "NODE", "STRATEGY", "DRY-RUN", "REAL", "EXPLAINED BY")


def table_rows(result: FidelityResult, everything: bool = False) -> list[dict[str, str]]:
    """The rows a person reads: every pod either half decided something about (or all)."""
    out = []
    for r in result.rows:
        d, x = r.dry, r.real
        if (
            not everything
            and not r.differs
            and all(f is None or f.fate == Fate.NOT_PICKED for f in (d, x))
        ):
            continue
        out.append(
            {
                "POD": r.identity,
                "NODE": r.node or "-",
                "STRATEGY": (either.strategy or "-") if (either := x or d) else "-",
                "DRY-RUN": d.shown() if d else "(missing)",
                "REAL": x.shown() if x else "(missing)",
                "EXPLAINED BY": (r.explained_by or "UNEXPLAINED") if r.differs else "same",
            }
        )
    return out


def as_dict(obj: Any) -> dict[str, Any]:
    """A dataclass of this module as plain data (for records)."""
    return asdict(obj)


def merge(results: Iterable[FidelityResult]) -> FidelityResult:
    """Several rounds' comparisons as one (their rows in order, their counts summed)."""
    rs = list(results)
    return FidelityResult(
        rows=tuple(row for r in rs for row in r.rows),
        predicted=sum(r.predicted for r in rs),
        real_evictions=sum(r.real_evictions for r in rs),
        dry_evictions=sum(r.dry_evictions for r in rs),
        mirror=next((r.mirror for r in rs if r.mirror), ""),
        not_comparable=tuple(g for r in rs for g in r.not_comparable),
    )


Outcome = Literal["pass", "fail", "error"]  # a fidelity run's verdict (one rule for both forms)
# A fidelity run's outcome as the one verdict (outcome/verdict.py): "error" is a comparison not
# made, no verdict (exit 3).
VERDICT_OF = {
    "pass": VerdictOutcome.PASS,
    "fail": VerdictOutcome.FAIL,
    "error": VerdictOutcome.NO_VERDICT,
}


def verdict_summary(
    name: str, outcome: Outcome, message: str, comparison: FidelityResult | None
) -> dict[str, Any]:
    """The head of a fidelity run's summary, the same for a lab run and a snapshot run."""
    return {
        "name": name,
        "outcome": outcome,
        "message": message,
        "summary": comparison.line() if comparison else None,
        "comparison": comparison.to_dict() if comparison else None,
    }
