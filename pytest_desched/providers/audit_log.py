"""The API server's audit log as a provider gives it: its eviction requests, a window a round.

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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_desched.errors import WaitTimeout
from pytest_desched.kube import wait_for

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
