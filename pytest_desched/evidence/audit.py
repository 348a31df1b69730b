"""The API server's own record of a round's eviction requests, read from its audit log.

The descheduler's log says what the descheduler *thinks* happened; the audit log is what the
API server answered: per request the pod, the response code (201 evicted, 429 PDB, 403 RBAC)
and the authenticated user. The embedded cluster's kube-apiserver writes it with
`manifests/audit-policy.yaml` (eviction creates and pod deletes, Metadata level, one line per
request at ResponseComplete). kind and existing clusters expose no readable audit log: their
`Cluster.audit_log` is None with a reason, and `AuditView.unavailable` records that the run
fell back to events and UIDs.

Facts this module relies on (kube-apiserver v1.36, k8s.io/apiserver v0.36):

* the log backend's `--audit-log-mode` defaults to `blocking`
  (pkg/server/options/audit.go NewAuditOptions); kwokctl v0.8.0 passes no mode. The
  ResponseComplete event is processed in a defer of the audit filter
  (pkg/endpoints/filters/audit.go WithAudit) after the handler wrote the (small, buffered)
  response but before the handler chain returns, i.e. before the client can read it, and
  written with one unbuffered write. So an entry is normally on disk before the descheduler
  logs the outcome; `AuditWindow.collect` still waits, bounded, in case a cluster runs the
  batch mode.
* Metadata-level eviction entries carry no pod UID: `objectRef.uid` is copied from the
  request object's metadata (pkg/audit/request.go LogRequestObject), and the descheduler's
  Eviction object names the pod but has no UID (see tests/unit/data/audit/). Pod UIDs come
  from a caller-provided map (the lab's snapshot taken before the round).
* a successful eviction is always 201 (handlers/create.go sets StatusCreated on the
  registry's Status{Success}); refusals carry their code (429 PDB, 403 RBAC, 500 for
  several PDBs).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.decisions import Fate, RoundResult
from pytest_desched.kube import WaitTimeout, wait_for

# A decision logged at this msg was answered 429 on purpose (EvictionsInBackground feature
# gate), yet logparse.py maps it to EVICTED: its audit answer is 429, not 201.
BACKGROUND_EVICTION_MSG = "Eviction in background assumed"
FALLBACK = "events and UIDs"


def unreadable_reason(provider: str) -> str:
    """The recorded reason for a provider whose API server audit log the tests cannot read."""
    return (
        f"{provider}: the API server's audit log is not readable from the test process; "
        f"falling back to {FALLBACK}"
    )


@dataclass(frozen=True)
class EvictionRequest:
    """One audited request on a pod: an eviction (create pods/eviction) or a direct delete."""

    namespace: str
    pod: str
    code: int | None  # responseStatus.code: 201 evicted, 429 PDB, 403 RBAC, ...
    user: str  # user.username, e.g. system:serviceaccount:kube-system:descheduler
    audit_id: str
    stage_ts: datetime | None  # stageTimestamp (UTC) of the ResponseComplete stage
    verb: str = "create"
    subresource: str | None = "eviction"
    stage: str = "ResponseComplete"
    reason: str | None = None  # responseStatus.reason (TooManyRequests, Forbidden)
    message: str | None = None  # responseStatus.message, for people; never matched

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def is_eviction(self) -> bool:
        return self.verb == "create" and self.subresource == "eviction"

    @property
    def is_delete(self) -> bool:
        return self.verb == "delete" and not self.subresource

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stage_ts"] = self.stage_ts.isoformat() if self.stage_ts else None
        return d


def _ts(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_event(event: Mapping[str, Any]) -> EvictionRequest | None:
    """An audit.k8s.io/v1 Event -> EvictionRequest, or None when it is not about a pod.

    Keys only on structured fields: objectRef.resource/subresource, verb, stage,
    responseStatus.code and user.username.
    """
    ref = event.get("objectRef") or {}
    if ref.get("resource") != "pods" or event.get("stage") not in ("ResponseComplete", "Panic"):
        return None
    verb, sub = event.get("verb"), ref.get("subresource") or None
    if not ((verb == "create" and sub == "eviction") or (verb == "delete" and sub is None)):
        return None
    status = event.get("responseStatus") or {}
    code = status.get("code")
    return EvictionRequest(
        namespace=str(ref.get("namespace", "")),
        pod=str(ref.get("name", "")),
        code=int(code) if code is not None else None,
        user=str((event.get("user") or {}).get("username", "")),
        audit_id=str(event.get("auditID", "")),
        stage_ts=_ts(event.get("stageTimestamp")),
        verb=str(verb),
        subresource=sub,
        stage=str(event.get("stage")),
        reason=status.get("reason") or None,
        message=status.get("message") or None,
    )


def read_requests(path: Path, since_offset: int = 0) -> tuple[list[EvictionRequest], int]:
    """Pod eviction creates and pod deletes appended after `since_offset`, and the new offset.

    JSON lines; a last line without its newline is still being written, so it is left for the
    next read (the returned offset points at its start). A file shorter than the offset was
    rotated (lumberjack, at 100 MB by default): it is read from the start.
    """
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            if fh.tell() < since_offset:
                since_offset = 0
            fh.seek(since_offset)
            data = fh.read()
    except FileNotFoundError:
        return [], since_offset
    complete = data.rfind(b"\n") + 1
    out: list[EvictionRequest] = []
    for raw in data[:complete].splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue  # not an audit event line; nothing to key on
        req = parse_event(event) if isinstance(event, dict) else None
        if req is not None:
            out.append(req)
    return out, since_offset + complete


def read_evictions(path: Path, since_offset: int = 0) -> tuple[list[EvictionRequest], int]:
    """Only the eviction requests (create pods/eviction) appended after `since_offset`."""
    reqs, offset = read_requests(path, since_offset)
    return [r for r in reqs if r.is_eviction], offset


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


class AuditWindow:
    """The audit log from one offset on: each round reads only its own requests.

    Open it (records the file's size) before the round's Job is created; `collect` after the
    Job finished.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.start = path.stat().st_size
        except FileNotFoundError:
            self.start = 0
        self.offset = self.start
        self.requests: list[EvictionRequest] = []

    def read(self) -> list[EvictionRequest]:
        """Everything appended since the window opened (eviction creates and pod deletes)."""
        new, self.offset = read_requests(self.path, self.offset)
        self.requests.extend(new)
        return list(self.requests)

    def evictions(self) -> list[EvictionRequest]:
        return [r for r in self.requests if r.is_eviction]

    def collect(
        self,
        expected: int,
        timeout: float = 10,
        counts: Callable[[EvictionRequest], bool] | None = None,
    ) -> tuple[list[EvictionRequest], float, bool]:
        """Read until the window holds at least `expected` eviction requests, or `timeout`.

        `counts` picks the requests that count toward `expected` (the round's own user:
        another release's round may share the window); every request is returned.

        Sound because `expected` (see `expected_requests`) counts only requests the
        descheduler got an answer to, and the API server audits a request before answering
        it; any extra requests were logged at the same time. Returns (requests, seconds
        waited, complete). Incomplete is not an error here: `compare` then names each
        missing request, which is the honest record.
        """
        t0 = time.monotonic()
        mine = counts or (lambda r: True)
        try:
            wait_for(
                f"{expected} eviction requests in the audit log {self.path}",
                self.read,
                lambda reqs: sum(r.is_eviction and mine(r) for r in reqs) >= expected,
                timeout,
                describe=lambda reqs: (
                    f"{sum(r.is_eviction and mine(r) for r in reqs)} eviction requests"
                ),
                max_interval=0.2,
            )
            complete = True
        except WaitTimeout:
            complete = False
        return list(self.requests), time.monotonic() - t0, complete

    def __enter__(self) -> AuditWindow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.read()


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
            want = exp.get(key, Counter())
            got = Counter(view.pods[key].codes) if key in view.pods else Counter()
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
