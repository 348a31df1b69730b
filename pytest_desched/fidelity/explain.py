"""The layers a dry run cannot see, each proven from the halves' own evidence.

One explainer per layer (EXPLAINERS, tried in order): a PDB that selects the pod and had no
budget left, or whose refusal the API server's answer names (429); the descheduler's service
account denied pods/eviction (403, RBAC); the caps each half filled; a replacement left
Pending; a known upstream bug whose signature the round shows. A refusal none of them
explains is named as what it was (refusal_unexplained), never given a layer by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.decisions import cycle_gap
from pytest_desched.outcome import identity as core
from pytest_desched.outcome.fates import Fate, Layer
from pytest_desched.replay.rebuild.settled import selector_matches

if TYPE_CHECKING:
    from pytest_desched.fidelity.compare import Half, Mode, PodFate, Row

# The fidelity comparison's words are the ledger's fates (outcome/fates.py); these names stay
# for one release.
EVICT = Fate.EVICTED  # dry run's "would evict" and a real run's 201 are the same prediction
UNTOUCHED = Fate.NOT_PICKED  # no decision about the pod in the round's log
CAP_KEYS = ("node", "namespace", "total")
CAP_FIELDS = {
    "node": "maxNoOfPodsToEvictPerNode",
    "namespace": "maxNoOfPodsToEvictPerNamespace",
    "total": "maxNoOfPodsToEvictTotal",
}
BUG_1917 = "descheduler#1917"
BUG_1882 = "descheduler#1882"
# The API server's answer when a PDB refuses an eviction (registry/core/pod/storage/eviction.go);
# a 429 without it (client-side throttling, API priority and fairness) is not a PDB's.
PDB_ANSWER = "would violate the pod's disruption budget"
# An RBAC denial of the eviction subresource names the user and what it may not do.
RBAC_ANSWER = re.compile(
    r'User "(system:serviceaccount:[^"]+)" cannot create resource "pods/eviction"'
)


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget that selects a pod, with its budget before the round."""

    name: str  # namespace/name
    disruptions_allowed: int | None  # status.disruptionsAllowed (None: no status yet)


def budgets_of(
    namespace: str, labels: Mapping[str, str], pdbs: Iterable[Mapping[str, Any]]
) -> tuple[Budget, ...]:
    """The PDBs (API objects as dicts) that select a pod: same namespace, selector matches.

    A PDB with no selector selects nothing here: it can explain no refusal.
    """
    out = []
    for pdb in pdbs:
        meta, spec = pdb.get("metadata") or {}, pdb.get("spec") or {}
        if meta.get("namespace") != namespace or spec.get("selector") is None:
            continue
        if selector_matches(spec["selector"], dict(labels)):
            allowed = (pdb.get("status") or {}).get("disruptionsAllowed")
            out.append(Budget(f"{namespace}/{meta.get('name')}", allowed))
    return tuple(out)


# The verdict's words when a half completed no cycle: the comparison core's one wording.
NOT_COMPARABLE = f"{core.NOT_COMPARABLE}: "


def skip_gap(mode: Mode, skipped: str | None, signatures: Mapping[str, str]) -> str | None:
    """Why a half's skipped cycle leaves nothing to compare (None: not skipped, or excused).

    The one excuse: the dry-run half's skip with descheduler#1917's signature proven in its
    own round is the bug under test (its mirror saw too few nodes), compared and explained
    row by row.
    """
    if not skipped or (mode == "dry-run" and BUG_1917 in signatures):
        return None
    return f"the {mode} half's round completed no descheduling cycle (skipped: {skipped})"


def half_gap(
    mode: Mode,
    skipped: str | None,
    succeeded: bool | None,
    exit_code: int | None,
    signatures: Mapping[str, str],
) -> str | None:
    """Why a half's round completed no cycle the comparison can stand on (None: it did):
    a skip (skip_gap), a Job that failed or whose exit code was not measured
    (descheduler.decisions.cycle_gap); the half's fates are then the absence of a cycle."""
    if gap := skip_gap(mode, skipped, signatures):
        return gap
    if job := cycle_gap(None, succeeded, exit_code):
        return f"the {mode} half's round completed no descheduling cycle ({job})"
    return None


# -- explainers --------------------------------------------------------------------------

Explainer = Callable[["Row", "Half", "Half"], "str | None"]


def _pdb_429(row: Row, dry: Half, real: Half) -> str | None:
    """A 429 is the PDB layer only when a PDB selecting the pod says so: its budget was 0
    before the round, or the API server's answer names the disruption budget."""
    d, r = row.dry, row.real
    if not (d and r and d.fate == EVICT and r.fate == Fate.REFUSED and r.status_code == 429):
        return None
    spent = [
        b for b in r.budgets if b.disruptions_allowed is not None and b.disruptions_allowed <= 0
    ]
    answered = PDB_ANSWER in r.message
    if not r.budgets or not (spent or answered):
        return None  # throttling, or a PDB with budget left: not the PDB layer, unexplained
    pdb = (spent or r.budgets)[0]
    said = [f"{pdb.name} selects it"]
    if spent:
        said[0] += f" and allowed {pdb.disruptions_allowed} disruption(s) before the round"
    if answered:
        said.append("the API server answered that it would violate the pod's disruption budget")
    why = "; ".join(said)
    return (
        f"api-server: the eviction of {r.key} got 429: {why}; a dry run calls no eviction API, "
        "so no PDB is checked (descheduler#1584, #1805)"
    )


def _rbac_403(row: Row, dry: Half, real: Half) -> str | None:
    """A 403 is RBAC only when the answer says the descheduler's service account may not
    create pods/eviction (and names that account, where the half knows it)."""
    d, r = row.dry, row.real
    if not (d and r and d.fate == EVICT and r.fate == Fate.REFUSED and r.status_code == 403):
        return None
    m = RBAC_ANSWER.search(r.message)
    if m is None or (real.user and m.group(1) != real.user):
        return None  # another 403 (or another user's): named as such, unexplained
    return (
        f"api-server: the eviction of {r.key} got 403 (RBAC: {m.group(1)} cannot create "
        "pods/eviction); a dry run sends its evictions to an in-memory client, which "
        "authorises nothing"
    )


def refusal_unexplained(r: PodFate) -> str:
    """What an unexplained refusal was, named as such (never a PDB's or RBAC's by default)."""
    if r.status_code == 429:
        pdbs = ", ".join(f"{b.name} allowed {b.disruptions_allowed}" for b in r.budgets)
        return (
            f"a 429 no PDB explains (PDBs selecting the pod: {pdbs or 'none'}; the answer "
            f"does not name a disruption budget: {r.message or 'not logged'!r})"
        )
    return f"a {r.status_code} that is not RBAC on pods/eviction: {r.message or 'not logged'!r}"


def _in_scope(scope: str, a: PodFate, b: PodFate) -> bool:
    return scope == "total" or (a.node == b.node if scope == "node" else a.namespace == b.namespace)


def _caps(row: Row, dry: Half, real: Half) -> str | None:
    """One half stopped the pod at a cap that the other half's evictions never filled.

    Stopped means `limited`, or left unnamed after a `limited` pod of the same cap's scope: a
    strategy stops walking a node (or the cluster) at the first cap error, v0.36.0's plugins
    `break` there. The other half must have reached the eviction step for its pod.
    """
    d, r = row.dry, row.real
    if d is None or r is None or d.fate == r.fate:
        return None
    for capped, other, pod, twin in ((dry, real, d, r), (real, dry, r, d)):
        if pod.fate not in (Fate.LIMITED, UNTOUCHED) or twin.fate not in (EVICT, Fate.REFUSED):
            continue
        for scope in CAP_KEYS:
            cap = capped.caps.get(scope)
            if cap is None:
                continue
            if pod.fate == UNTOUCHED and not any(
                f.fate == Fate.LIMITED and _in_scope(scope, f, pod) for f in capped.fates
            ):
                continue
            filled = capped.evictions(scope, pod)
            there = other.evictions(scope, twin) - (twin.fate == EVICT)  # besides it
            if filled >= cap > there:
                stop = (
                    "the strategy stopped there, so this pod is named nowhere; "
                    if pod.fate == UNTOUCHED
                    else ""
                )
                return (
                    f"eviction-limits: {CAP_FIELDS[scope]}={cap} was filled by {filled} "
                    f"{'would-be ' if capped.mode == 'dry-run' else ''}eviction(s) in the "
                    f"{capped.mode} half and by {there} in the {other.mode} half; {stop}a dry run "
                    "counts every would-be eviction, a real run only those the API server accepted"
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


def _known_1882(row: Row, dry: Half, real: Half) -> str | None:
    """The real run filtered the pod by PodsWithoutPDB, #1882's signature proven in its round:
    v0.36.0's real PDB lister is never started, while the dry run's mirror lister is."""
    r = row.real
    if r is None or r.fate != Fate.FILTERED or r.checks != ("PodsWithoutPDB",):
        return None
    ev = real.signatures.get(BUG_1882)
    if not ev:
        return None
    return (
        f"known bug {BUG_1882} (signature proven in the real round): {ev}; the dry run reads "
        "PDBs from its own mirror, whose lister is started, so it does not show the bug"
    )


EXPLAINERS: tuple[tuple[str, Explainer], ...] = (
    ("api-server(pdb-429)", _pdb_429),
    ("api-server(rbac-403)", _rbac_403),
    (Layer.LIMITS.value, _caps),
    (Layer.SCHEDULER.value, _pending),
    (BUG_1882, _known_1882),
    (BUG_1917, _known_1917),
)
