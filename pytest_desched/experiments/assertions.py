"""Ready-made assertions in the runbook's vocabulary, each a `Check` that says what it saw.

Evicted or kept (by pod or by workload), the deciding layer per pod, skew per topology key,
pods per node, nothing Pending, the PDB never below its desired healthy count, the exact
eviction count by strategy. Each function returns a `Check` (stable id, name, ok, detail)
and never raises on the evidence (a wrong argument type is a TypeError naming the fix), so an
experiment records it (`Expect(runner, view).evicted(...)` adds it to the result) and a plain
test asserts it (`require(check)`). A workload is its name or the lab object itself. A selection that matches no
pod fails: an assertion that cannot fail is a defect.

Evidence is joined per pod in a `Ledger` (outcome/ledger.py): the UID and node before the
round, what the descheduler's own log decided (fate, layer, checks, strategy), what the API server's audit
log answered (201, 429, ...) and whether the UID is still live after the round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_desched.experiments.results import Check
from pytest_desched.lab.inputs import pod_names, workload_name
from pytest_desched.outcome.fates import Fate, Layer

# The ledger's types are outcome/ledger.py's; imported from here for one release.
from pytest_desched.outcome.ledger import Ledger, PodFate

if TYPE_CHECKING:
    from pytest_desched.experiments.framework import RolloutBaseline, RoundView, Runner
    from pytest_desched.lab.recorder import Recorder
    from pytest_desched.lab.snapshot import Snapshot
    from pytest_desched.lab.workloads import Pod, Workload

# The deciding layer of a pod the log never names (no strategy picked it): its `deciding`.
NOT_SELECTED = Layer.POLICY.value


def _what(workload: str | None, pods: Iterable[str] | None) -> str:
    if pods is not None:
        return f"pods {sorted(pods)}"
    return f"workload {workload}" if workload else "every lab pod"


def _key(workload: str | None, pods: Iterable[str] | None) -> str:
    return workload or (",".join(sorted(pods)) if pods is not None else "lab")


def _rows(rows: Sequence[PodFate]) -> str:
    return "[" + ", ".join(r.short() for r in rows) + "]"


def _audit_ok(r: PodFate, audit: bool) -> bool:
    return (not audit) or r.audit_codes.count(201) == 1


# --- the assertions ------------------------------------------------------------------------
def evicted(
    ledger: Ledger,
    *,
    workload: str | Workload | None = None,
    pods: Iterable[str | Pod] | None = None,
    count: int | None = None,
    strategy: str | None = None,
) -> Check:
    """The selection was evicted (all of it, or exactly `count` pods), by `strategy` if given.

    Evicted means: the log's `Evicted pod`, a 201 from the API server (when its audit log is
    readable) and the UID no longer live after the round.
    """
    workload, pods = workload_name(workload, "evicted"), pod_names(pods, "evicted")
    rows = ledger.select(workload, pods)
    done = [r for r in rows if r.evicted and _audit_ok(r, ledger.audit_available)]
    want = len(rows) if count is None else count
    by = [r for r in done if strategy is None or r.strategy == strategy]
    ok = bool(rows) and len(done) == want and len(by) == len(done)
    name = f"{_what(workload, pods)}: {'all' if count is None else count} evicted" + (
        f" by {strategy}" if strategy else ""
    )
    detail = f"{len(done)} of {len(rows)} evicted; {_rows(rows)}"
    if not rows:
        detail = f"no such pod in the lab before round {ledger.round_name}"
    return Check(f"evicted:{_key(workload, pods)}", name, ok, detail)


def kept(
    ledger: Ledger,
    *,
    workload: str | Workload | None = None,
    pods: Iterable[str | Pod] | None = None,
) -> Check:
    """Every selected pod survived the round: same UID live after, no 201 at the API server."""
    workload, pods = workload_name(workload, "kept"), pod_names(pods, "kept")
    rows = ledger.select(workload, pods)
    lost = [r for r in rows if not r.live_after or 201 in r.audit_codes or r.evicted]
    detail = _rows(rows) if rows else f"no such pod in the lab before round {ledger.round_name}"
    return Check(
        f"kept:{_key(workload, pods)}",
        f"{_what(workload, pods)}: every pod kept (same UID, no eviction)",
        bool(rows) and not lost,
        detail,
    )


def refused(
    ledger: Ledger,
    *,
    workload: str | Workload | None = None,
    pods: Iterable[str | Pod] | None = None,
    count: int,
    code: int = 429,
) -> Check:
    """Exactly `count` selected pods had their eviction refused with `code` (429: a PDB), per
    the log and, when readable, the API server's audit log; and each of them is still live."""
    workload, pods = workload_name(workload, "refused"), pod_names(pods, "refused")
    rows = ledger.select(workload, pods)
    hit = [
        r
        for r in rows
        if r.fate == Fate.REFUSED
        and r.live_after
        and (not ledger.audit_available or code in r.audit_codes)
        and 201 not in r.audit_codes
    ]
    detail = _rows(rows) if rows else f"no such pod in the lab before round {ledger.round_name}"
    return Check(
        f"refused:{_key(workload, pods)}",
        f"{_what(workload, pods)}: {count} eviction(s) refused with {code}, pods kept",
        bool(rows) and len(hit) == count,
        f"{len(hit)} refused with {code}; {detail}",
    )


def decided_by(
    ledger: Ledger,
    layer: str,
    *,
    workload: str | Workload | None = None,
    pods: Iterable[str | Pod] | None = None,
    checks: Sequence[str] | None = None,
) -> Check:
    """Each selected pod's deciding layer is `layer` (and its evictor checks are `checks`).

    Layers are the round verdict's labels: `policy` (never picked), `evictor-filter`,
    `evictor-prefilter-nodefit`, `eviction-limits`, `api-server` (refused),
    `api-server(evicted)`. `policy` is a claim about the whole round, so it needs more than
    no line in the log: no eviction request at the API server and the same UID live after
    (a log line missed, or a namespace left out of the log's scope, cannot pass as "kept by
    the policy").
    """
    workload, pods = workload_name(workload, "decided_by"), pod_names(pods, "decided_by")
    rows = ledger.select(workload, pods)
    wrong = [
        r
        for r in rows
        if r.deciding != layer
        or (checks is not None and list(r.checks) != list(checks))
        or (layer == NOT_SELECTED and (r.audit_codes or not r.live_after))
    ]
    extra = f" with checks {list(checks)}" if checks is not None else ""
    detail = _rows(rows) if rows else f"no such pod in the lab before round {ledger.round_name}"
    return Check(
        f"layer:{_key(workload, pods)}",
        f"{_what(workload, pods)}: decided by {layer}{extra}",
        bool(rows) and not wrong,
        detail,
    )


def eviction_count(ledger: Ledger, count: int, strategy: str | None = None) -> Check:
    """Exactly `count` lab pods evicted in the round (by `strategy`), log and audit agreeing."""
    done = [r for r in ledger.pods if r.fate == Fate.EVICTED]
    by = [r for r in done if strategy is None or r.strategy == strategy]
    created = sum(r.audit_codes.count(201) for r in ledger.pods)
    audit_ok = (not ledger.audit_available) or created == count
    label = f" by {strategy}" if strategy else ""
    return Check(
        f"evictions:{strategy or 'any'}",
        f"exactly {count} eviction(s){label} in the lab",
        len(by) == count and len(done) == count and audit_ok,
        f"log: {len(done)} evicted ({len(by)}{label}); audit 201s: "
        f"{created if ledger.audit_available else 'no audit log'}; {_rows(done)}",
    )


def skew(
    snapshot: Snapshot,
    domains: Mapping[str, str],
    max_skew: int,
    *,
    workload: str | Workload | None = None,
    key: str = "topology",
) -> Check:
    """Live pods per topology domain differ by at most `max_skew` (empty domains count as 0).

    `domains` maps node -> domain, e.g. `lab.topology("topology.kubernetes.io/zone")`.
    """
    workload = workload_name(workload, "skew")
    counts = dict.fromkeys(sorted(set(domains.values())), 0)
    elsewhere = []
    pods = snapshot.of(workload)
    for p in pods:
        if p.node is not None and p.node in domains:
            counts[domains[p.node]] += 1
        else:
            elsewhere.append((p.name, p.node))
    seen = max(counts.values(), default=0) - min(counts.values(), default=0)
    return Check(
        f"skew:{key}:{workload or 'lab'}",
        f"{workload or 'lab'} pods spread over {key} with skew <= {max_skew}",
        bool(pods) and seen <= max_skew and not elsewhere,
        f"per domain {counts}, skew {seen}"
        + (f"; outside the domains {elsewhere}" if elsewhere else ""),
    )


def pods_per_node(
    snapshot: Snapshot, expected: Mapping[str, int], *, workload: str | Workload | None = None
) -> Check:
    """Live pods per node are exactly `expected` (nodes not listed must hold none)."""
    workload = workload_name(workload, "pods_per_node")
    seen: dict[str, int] = {}
    for p in snapshot.of(workload):
        seen[p.node or "<unscheduled>"] = seen.get(p.node or "<unscheduled>", 0) + 1
    want = {n: c for n, c in expected.items() if c}
    return Check(
        f"pods-per-node:{workload or 'lab'}",
        f"{workload or 'lab'} pods per node are {dict(expected)}",
        seen == want,
        f"saw {seen}",
    )


def nothing_pending(snapshot: Snapshot) -> Check:
    """No live lab pod is Pending or unscheduled."""
    pending = snapshot.pending()
    return Check(
        "no-pending",
        "no Pending pod in the lab",
        not pending,
        f"pending {[(p.name, p.phase, p.node) for p in pending]}",
    )


def pdb_never_below_desired(rec: Recorder) -> Check:
    """Every PDB status the watch saw had currentHealthy >= desiredHealthy (and it saw some)."""
    breaches = {
        name: [(round(t, 3), cur, want) for t, cur, want, _ in statuses if cur < want]
        for name, statuses in rec.pdb_by_name.items()
    }
    breaches = {k: v for k, v in breaches.items() if v}
    return Check(
        "pdb-healthy",
        "every PDB's currentHealthy >= desiredHealthy at every status observed",
        bool(rec.pdb_statuses) and not breaches,
        f"{len(rec.pdb_statuses)} statuses over {sorted(rec.pdb_by_name)}; breaches {breaches}",
    )


def replaced(
    before: Snapshot,
    final: Snapshot,
    *,
    workload: str | Workload,
    count: int,
    avoid: Iterable[str] = (),
) -> Check:
    """`count` new Ready pods of `workload` (new UIDs), none on the nodes in `avoid`."""
    name = workload_name(workload, "replaced")
    avoid = set(avoid)
    new = [p for p in final.of(name) if p.uid not in before.uids]
    ok = len(new) == count and all(p.ready and p.node not in avoid for p in new)
    return Check(
        f"replaced:{name}",
        f"{count} replacement(s) of {name} Ready" + (f", not on {sorted(avoid)}" if avoid else ""),
        ok,
        f"new pods {[(p.name, p.node, p.ready) for p in new]}",
    )


def no_rollout(
    base: RolloutBaseline,
    replicasets_after: Mapping[str, str],
    generation_after: int,
    owners_seen: Iterable[str | None],
) -> Check:
    """No rollout between `base` (taken before the label move) and now: the same ReplicaSets,
    the same spec generation, and every pod seen since owned by a ReplicaSet of before."""
    new_rs = {n: h for n, h in replicasets_after.items() if n not in base.replicasets}
    strangers = sorted({str(o) for o in owners_seen} - {str(o) for o in base.owners})
    ok = (
        bool(base.replicasets)
        and bool(base.owners)
        and not new_rs
        and not strangers
        and generation_after == base.generation
    )
    return Check(
        "no-rollout",
        "moving the label triggers no rollout (same ReplicaSets, owners and generation "
        "from before the move to after the last round)",
        ok,
        f"ReplicaSets {dict(base.replicasets)} -> {dict(replicasets_after)}"
        + (f" (new: {new_rs})" if new_rs else "")
        + f"; pods owned by {sorted(map(str, base.owners))}"
        + (f", then also by {strangers}" if strangers else "")
        + f"; deployment generation {base.generation} -> {generation_after}",
    )


def require(*checks: Check) -> None:
    """Raise AssertionError listing each failed check with what it saw (for plain tests)."""
    failed = [c for c in checks if not c.ok]
    if failed:
        raise AssertionError("\n".join(f"[{c.id}] {c.name}: {c.detail}" for c in failed))


class Expect:
    """The assertions bound to one round of a running experiment: each result is recorded.

    `Expect(self.r, view).evicted(workload="dup", count=2, strategy="RemoveDuplicates")`
    adds the check to the experiment's result and returns whether it held.
    """

    def __init__(self, runner: Runner, view: RoundView, after: Snapshot | None = None) -> None:
        self.r = runner
        self.view = view
        self.ledger = Ledger.of(view, after)

    def _add(self, check: Check) -> bool:
        self.r.result.checks.append(check)
        return check.ok

    def evicted(self, **kw: Any) -> bool:
        return self._add(evicted(self.ledger, **kw))

    def kept(self, **kw: Any) -> bool:
        return self._add(kept(self.ledger, **kw))

    def refused(self, **kw: Any) -> bool:
        return self._add(refused(self.ledger, **kw))

    def decided_by(self, layer: str, **kw: Any) -> bool:
        return self._add(decided_by(self.ledger, layer, **kw))

    def eviction_count(self, count: int, strategy: str | None = None) -> bool:
        return self._add(eviction_count(self.ledger, count, strategy))

    def skew(
        self, snapshot: Snapshot, domains: Mapping[str, str], max_skew: int, **kw: Any
    ) -> bool:
        return self._add(skew(snapshot, domains, max_skew, **kw))

    def pods_per_node(self, snapshot: Snapshot, expected: Mapping[str, int], **kw: Any) -> bool:
        return self._add(pods_per_node(snapshot, expected, **kw))

    def nothing_pending(self, snapshot: Snapshot) -> bool:
        return self._add(nothing_pending(snapshot))

    def pdb_never_below_desired(self) -> bool:
        return self._add(pdb_never_below_desired(self.view.rec))

    def replaced(self, final: Snapshot, **kw: Any) -> bool:
        return self._add(replaced(self.view.before, final, **kw))


__all__ = [
    "NOT_SELECTED",
    "Expect",
    "Ledger",
    "PodFate",
    "decided_by",
    "evicted",
    "eviction_count",
    "kept",
    "no_rollout",
    "nothing_pending",
    "pdb_never_below_desired",
    "pods_per_node",
    "refused",
    "replaced",
    "require",
    "skew",
]
