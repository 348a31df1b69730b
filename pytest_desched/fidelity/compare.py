"""Dry-run fidelity: pair a dry-run round's pods with a real round's, and explain each difference.

Pure logic, no cluster. The two halves ran the same state, version and policy in two lab
namespaces, so pods are compared by a namespace-relative identity (the workload, else the
owner, else the pod's own name) and the node they ran on; pods of one identity on one node are
interchangeable, so equal fates are paired first. A difference is explained only by a layer a
dry run cannot see, each proven from the halves' own evidence (a 429 or 403 status from the API
server, the caps each half filled, a replacement left Pending), or by a known upstream bug whose
signature the dry-run round shows (descheduler#1917). Anything else is unexplained: the
fidelity verdict fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pytest_desched.descheduler.decisions import Fate, PodDecision

Mode = Literal["dry-run", "real"]
EVICT = "evict"  # dry run's "would evict" and a real run's 201 are the same prediction
UNTOUCHED = "untouched"  # no decision about the pod in the round's log
# A pod the log names more than once keeps the fate furthest down the runbook's chain.
RANK = {
    UNTOUCHED: 0,
    "error": 1,
    "filtered": 2,
    "nodefit": 3,
    "limited": 4,
    "refused": 5,
    EVICT: 6,
}
CAP_KEYS = ("node", "namespace", "total")
CAP_FIELDS = {
    "node": "maxNoOfPodsToEvictPerNode",
    "namespace": "maxNoOfPodsToEvictPerNamespace",
    "total": "maxNoOfPodsToEvictTotal",
}
BUG_1917 = "descheduler#1917"


@dataclass(frozen=True)
class PodRef:
    """A lab pod before the round: its key, namespace-relative identity and node."""

    key: str  # namespace/name
    identity: str  # "<lab>/spread-demo": the same in both halves
    node: str | None
    namespace: str = ""


@dataclass(frozen=True)
class PodFate:
    """One pod's fate in one half, normalised so the halves compare."""

    identity: str
    node: str | None
    fate: str  # evict | refused | limited | nodefit | filtered | error | untouched
    strategy: str | None = None
    status_code: int | None = None
    checks: tuple[str, ...] = ()
    key: str = ""
    namespace: str = ""

    def shown(self) -> str:
        if self.fate == "refused" and self.status_code:
            return f"refused({self.status_code})"
        if self.fate == "filtered" and self.checks:
            return f"filtered({','.join(self.checks)})"
        return self.fate


@dataclass(frozen=True)
class Half:
    """What one half's round showed: its pods' fates and the evidence explanations may use.

    `caps`: the policy's limits (None: unlimited); `pdb_disruptions_allowed`: the lab PDB's
    status before the round (None: no PDB); `pending`: identities with a Pending pod at the
    end; `signatures`: known-bug id -> evidence proven from this half's round.
    """

    mode: Mode
    fates: tuple[PodFate, ...]
    caps: Mapping[str, int | None] = field(default_factory=dict)
    pdb_disruptions_allowed: int | None = None
    pending: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    signatures: Mapping[str, str] = field(default_factory=dict)
    skipped: str | None = None

    def evictions(self, scope: str, of: PodFate) -> int:
        """Evictions counted against `of`'s cap of kind `scope` (node, namespace or total)."""
        return sum(
            1
            for f in self.fates
            if f.fate == EVICT
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
        if (d.fate, d.strategy if d.fate == EVICT else None) != (
            r.fate,
            r.strategy if r.fate == EVICT else None,
        ):
            return True
        return bool(self.pending)  # evicted in both halves, then Pending in the real one

    @property
    def explained(self) -> bool:
        return not self.differs or self.explained_by is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "node": self.node,
            "dry_run": self.dry.shown() if self.dry else None,
            "real": self.real.shown() if self.real else None,
            "strategy": (self.real or self.dry).strategy if (self.real or self.dry) else None,
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

    @property
    def differences(self) -> list[Row]:
        return [r for r in self.rows if r.differs]

    @property
    def unexplained(self) -> list[Row]:
        return [r for r in self.rows if not r.explained]

    @property
    def ok(self) -> bool:
        return not self.unexplained

    def line(self) -> str:
        k, u = len(self.differences), len(self.unexplained)
        tail = "each explained" if not u else f"{u} unexplained"
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
    """The pod's namespace-relative identity: workload, else owner, else its own name."""
    return f"{relative_namespace(namespace, lab_namespace)}/{workload or owner or name}"


def _normal(d: PodDecision, mode: Mode) -> str:
    if d.fate in (Fate.EVICTED, Fate.DRY_RUN):
        return EVICT if (d.fate == Fate.DRY_RUN) == (mode == "dry-run") else "error"
    return d.fate.value


def fates_of(
    pods: Iterable[PodRef], decisions: Iterable[PodDecision], mode: Mode
) -> tuple[PodFate, ...]:
    """Each lab pod's furthest fate in the round (untouched: the log names it nowhere)."""
    best: dict[str, PodDecision] = {}
    for d in decisions:
        cur = best.get(d.key)
        if cur is None or RANK[_normal(d, mode)] >= RANK[_normal(cur, mode)]:
            best[d.key] = d
    out = []
    for p in pods:
        d = best.get(p.key)
        if d is None:
            out.append(PodFate(p.identity, p.node, UNTOUCHED, key=p.key, namespace=p.namespace))
            continue
        out.append(
            PodFate(
                p.identity,
                p.node,
                _normal(d, mode),
                d.strategy,
                d.status_code,
                tuple(d.checks),
                key=p.key,
                namespace=p.namespace,
            )
        )
    return tuple(out)


# -- explanations --------------------------------------------------------------------------

Explainer = Callable[[Row, Half, Half], str | None]


def _pdb_429(row: Row, dry: Half, real: Half) -> str | None:
    d, r = row.dry, row.real
    if not (d and r and d.fate == EVICT and r.fate == "refused" and r.status_code == 429):
        return None
    pdb = real.pdb_disruptions_allowed
    if pdb is None:
        return None  # a 429 with no PDB in the lab is not the PDB layer: unexplained
    return (
        f"api-server: the eviction of {r.key} got 429 while the lab PDB allowed {pdb} "
        "disruption(s); a dry run calls no eviction API, so no PDB is checked "
        "(descheduler#1584, #1805)"
    )


def _rbac_403(row: Row, dry: Half, real: Half) -> str | None:
    d, r = row.dry, row.real
    if not (d and r and d.fate == EVICT and r.fate == "refused" and r.status_code == 403):
        return None
    return (
        f"api-server: the eviction of {r.key} got 403 (RBAC); a dry run sends its evictions to "
        "an in-memory client, which authorises nothing"
    )


def _caps(row: Row, dry: Half, real: Half) -> str | None:
    """One half stopped the pod at a cap that the other half's evictions never filled."""
    d, r = row.dry, row.real
    if d is None or r is None or "limited" not in (d.fate, r.fate) or d.fate == r.fate:
        return None
    limited, other = (dry, real) if d.fate == "limited" else (real, dry)
    pod = d if d.fate == "limited" else r
    other_pod = r if pod is d else d
    if other_pod.fate not in (EVICT, "refused"):
        return None  # the other half never reached the eviction step for it: not a cap
    for scope in CAP_KEYS:
        cap = limited.caps.get(scope)
        if cap is None:
            continue
        filled = limited.evictions(scope, pod)
        there = other.evictions(scope, other_pod) - (other_pod.fate == EVICT)  # besides it
        if filled >= cap > there:
            return (
                f"eviction-limits: {CAP_FIELDS[scope]}={cap} was filled by {filled} "
                f"{'would-be ' if limited.mode == 'dry-run' else ''}eviction(s) in the "
                f"{limited.mode} half and by {there} in the {other.mode} half (a dry run counts "
                "every would-be eviction, a real run only those the API server accepted)"
            )
    return None


def _pending(row: Row, dry: Half, real: Half) -> str | None:
    d, r = row.dry, row.real
    if not (d and r and d.fate == EVICT and r.fate == EVICT):
        return None
    if not row.pending:
        return None
    return (
        f"scheduler: the eviction happened, and {', '.join(row.pending)} stayed Pending after it; a "
        "dry run simulates no scheduling (descheduler#1584)"
    )


def _known_1917(row: Row, dry: Half, real: Half) -> str | None:
    d, r = row.dry, row.real
    if not (d and r and d.fate == UNTOUCHED and r.fate == EVICT):
        return None
    ev = dry.signatures.get(BUG_1917)
    if not ev:
        return None
    return f"known bug {BUG_1917} (signature proven in the dry-run round): {ev}"


EXPLAINERS: tuple[tuple[str, Explainer], ...] = (
    ("api-server(pdb-429)", _pdb_429),
    ("api-server(rbac-403)", _rbac_403),
    ("eviction-limits", _caps),
    ("scheduler", _pending),
    (BUG_1917, _known_1917),
)


def _explain(row: Row, dry: Half, real: Half) -> Row:
    for name, fn in EXPLAINERS:
        proof = fn(row, dry, real)
        if proof:
            return Row(row.identity, row.node, row.dry, row.real, name, proof, row.pending)
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
            (
                r
                for r in left
                if (r.fate, r.strategy, r.status_code) == (d.fate, d.strategy, d.status_code)
            ),
            None,
        )
        if same is None:
            same = next((r for r in left if r.fate == d.fate), None)
        if same is None:
            rest.append(d)
        else:
            left.remove(same)
            out.append((d, same))
    rest.sort(key=lambda f: -RANK[f.fate])
    left.sort(key=lambda f: -RANK[f.fate])
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
            both = d is not None and r is not None and d.fate == r.fate == EVICT
            pending = tuple(real.pending.get(identity, ())) if both else ()
            row = Row(identity, node or None, d, r, pending=pending)
            if row.differs:
                row = _explain(row, dry, real)
            rows.append(row)
    real_ev = [r for r in rows if r.real and r.real.fate == EVICT]
    return FidelityResult(
        rows=tuple(rows),
        predicted=sum(
            1
            for r in real_ev
            if r.dry and r.dry.fate == EVICT and r.dry.strategy == r.real.strategy
        ),
        real_evictions=len(real_ev),
        dry_evictions=sum(1 for r in rows if r.dry and r.dry.fate == EVICT),
    )


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
            and all(f is None or f.fate == UNTOUCHED for f in (d, x))
        ):
            continue
        out.append(
            {
                "POD": r.identity,
                "NODE": r.node or "-",
                "STRATEGY": (x or d).strategy or "-" if (x or d) else "-",
                "DRY-RUN": d.shown() if d else "(missing)",
                "REAL": x.shown() if x else "(missing)",
                "EXPLAINED BY": (r.explained_by or "UNEXPLAINED") if r.differs else "same",
            }
        )
    return out


def as_dict(obj: Any) -> dict[str, Any]:
    """A dataclass of this module as plain data (for records)."""
    return asdict(obj)
