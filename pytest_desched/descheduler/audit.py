"""A round's eviction requests as the audit log recorded them, cross-checked with its log.

The reading (`providers.audit_log`: what the API server answered per request) is the
provider's; this module counts what the descheduler's log says it sent (`expected_requests`)
and names every disagreement between the two (`compare`). The rounds use both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_desched.descheduler.decisions import Fate, RoundResult
from pytest_desched.providers.audit_log import FALLBACK, EvictionRequest, unreadable_reason

# A decision logged at this msg was answered 429 on purpose (EvictionsInBackground feature
# gate), yet logparse.py maps it to EVICTED: its audit answer is 429, not 201.
BACKGROUND_EVICTION_MSG = "Eviction in background assumed"


def expected_requests(result: RoundResult) -> int:
    """How many eviction requests the descheduler's log proves it sent and got an answer to.

    Every EVICTED or REFUSED decision is logged only after the Evict call returned the API
    server's response, so the server had finished (and audited) that request. ERROR decisions
    are not counted: a connection error may never have reached the server. A dry run sends
    none (its evictions go to an in-memory client).
    """
    if result.dry_run:
        return 0
    return sum(1 for d in result.decisions if d.fate in (Fate.EVICTED, Fate.REFUSED))


def uid_map(namespace: str, pods: Iterable[Any]) -> dict[str, str]:
    """Map `namespace/name` -> UID from objects with `.name` and `.uid` (the lab's PodInfo)."""
    return {f"{namespace}/{p.name}": p.uid for p in pods}


@dataclass
class PodAudit:
    """What the API server answered for one pod, in order."""

    namespace: str
    name: str
    uid: str | None  # from the caller's snapshot: audit entries carry no pod UID
    codes: list[int | None] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    audit_ids: list[str] = field(default_factory=list)


@dataclass
class AuditView:
    """The audit log of one round, cross-checked against the descheduler's log."""

    available: bool
    unavailable_why: str | None = None
    pods: dict[str, PodAudit] = field(default_factory=dict)  # "ns/name" -> eviction answers
    requests: int = 0  # eviction requests in the window
    by_code: dict[str, int] = field(default_factory=dict)
    evicted_201: int = 0  # cluster-wide
    total_evicted_log: int | None = None
    users: list[str] = field(default_factory=list)  # who made eviction requests
    outside_lab: list[str] = field(default_factory=list)  # 201s outside the lab namespaces
    direct_deletes: list[str] = field(default_factory=list)  # pod deletes by the descheduler
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return self.available and not self.disagreements

    def codes(self, namespace: str, name: str) -> list[int | None]:
        pa = self.pods.get(f"{namespace}/{name}")
        return list(pa.codes) if pa else []

    @classmethod
    def unavailable(cls, why: str) -> AuditView:
        return cls(available=False, unavailable_why=why, notes=[f"fallback: {FALLBACK}"])

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["agrees"] = self.agrees
        return d


def _expected_codes(result: RoundResult) -> tuple[dict[str, Counter[int]], Counter[str]]:
    """Per pod the codes the log implies, and per pod how many API errors without a code."""
    exp: dict[str, Counter[int]] = {}
    wild: Counter[str] = Counter()
    for d in result.decisions:
        if d.fate is Fate.EVICTED:
            code = 429 if (d.message or "") == BACKGROUND_EVICTION_MSG else 201
            exp.setdefault(d.key, Counter())[code] += 1
        elif d.fate is Fate.REFUSED and d.status_code is not None:
            exp.setdefault(d.key, Counter())[d.status_code] += 1
        elif d.fate in (Fate.REFUSED, Fate.ERROR) and d.status_code is None:
            wild[d.key] += 1  # an API error the log does not code: may explain one answer
    return exp, wild


def _fmt(counter: Counter[Any]) -> str:
    return (
        ", ".join(f"{c}x{n}" if n > 1 else str(c) for c, n in sorted(counter.items(), key=str))
        or "none"
    )


def compare(
    result: RoundResult,
    requests: Iterable[EvictionRequest] | None,
    uids: Mapping[str, str] | None = None,
    lab_namespaces: Iterable[str] = (),
    user: str | None = None,
    unavailable_why: str | None = None,
) -> AuditView:
    """Cross-check the descheduler's log (`result`) with the audit window (`requests`).

    Disagreements: an EVICTED decision without a 201 for that pod; a REFUSED decision with
    code N without an N; an eviction request no decision explains; a dry run that sent
    requests; the log's totalEvicted differing from the cluster-wide 201s; a request by a
    user other than `user`; a pod delete by the descheduler's user (bypasses the eviction API).
    `requests=None` (no readable audit log) gives `AuditView.unavailable`.
    """
    if requests is None:
        return AuditView.unavailable(unavailable_why or unreadable_reason("this cluster"))
    uids = uids or {}
    lab = set(lab_namespaces)
    reqs = list(requests)
    evictions = [r for r in reqs if r.is_eviction]
    view = AuditView(
        available=True, requests=len(evictions), total_evicted_log=result.total_evicted
    )
    for r in evictions:
        pa = view.pods.get(r.key)
        if pa is None:
            pa = view.pods[r.key] = PodAudit(r.namespace, r.pod, uids.get(r.key))
        pa.codes.append(r.code)
        pa.audit_ids.append(r.audit_id)
        if r.user not in pa.users:
            pa.users.append(r.user)
        view.by_code[str(r.code)] = view.by_code.get(str(r.code), 0) + 1
        if r.user not in view.users:
            view.users.append(r.user)
    view.evicted_201 = view.by_code.get("201", 0)
    dis = view.disagreements

    def who(key: str) -> str:
        uid = uids.get(key)
        return f"{key} (uid {uid})" if uid else key

    if user is not None:
        for r in evictions:
            if r.user != user:
                dis.append(f"eviction of {who(r.key)} made by {r.user!r}, not {user!r}")
    if result.dry_run:
        for r in evictions:
            dis.append(
                f"dry-run round, yet the API server got an eviction of {who(r.key)}: {r.code}"
            )
    else:
        exp, wild = _expected_codes(result)
        for key in sorted(set(exp) | set(view.pods)):
            want: Counter[int | None] = Counter(exp.get(key, Counter()))
            got: Counter[int | None] = Counter(view.pods[key].codes if key in view.pods else [])
            missing, extra = want - got, got - want
            for code in sorted(missing, key=str):
                what = "evicted" if code == 201 else f"refused with {code}"
                dis.append(
                    f"log: {who(key)} {what} ({missing[code]}x), audit log has {_fmt(got)} for it"
                )
            spare = wild.get(key, 0)
            for code, n in sorted(extra.items(), key=lambda kv: str(kv[0])):
                absorbed = min(n, spare) if code != 201 else 0
                spare -= absorbed
                if n - absorbed:
                    dis.append(
                        f"audit: {who(key)} answered {code} ({n - absorbed}x) with no decision "
                        f"in the descheduler's log to explain it"
                    )
        if result.total_evicted is None:
            view.notes.append("the descheduler's log has no totals line; totalEvicted unchecked")
        elif result.total_evicted != view.evicted_201:
            dis.append(
                f"log: totalEvicted={result.total_evicted}, audit log: {view.evicted_201} "
                f"evictions answered 201 cluster-wide"
            )
    if lab:
        view.outside_lab = sorted(
            who(r.key) for r in evictions if r.code == 201 and r.namespace not in lab
        )
    deschedulers = {user} if user is not None else set(view.users)
    view.direct_deletes = [
        f"{who(r.key)} deleted by {r.user} ({r.code})"
        for r in reqs
        if r.is_delete and r.user in deschedulers
    ]
    dis.extend(
        f"pod deleted directly, bypassing the eviction API: {d}" for d in view.direct_deletes
    )
    return view
