"""`desched record`: an incident window as a timeline: the snapshot at its start, then every
change of the snapshot's kinds, from watch events, until the window ends.

The same rules as `desched snapshot`, by reusing it: read-only (get, list and watch; every
request listed in the header), never a Secret or a ServiceAccount (neither is watched, and
the change lines are checked by the timeline's own loader), objects trimmed by `trim` and,
with `--redact`, renamed by `redact` with one table for the snapshot and every change.

Why watches start before the snapshot: a change made while the snapshot lists would
otherwise fall between the two. Each resource's watch starts at the resourceVersion of a
one-item list taken first; events that arrive before the snapshot is done are kept only
where they differ from what the snapshot holds (trimmed: status heartbeats and resource
versions never count as a change). A watch the server closes is resumed from its last
resourceVersion; one whose version expired (410) is listed again and the difference
recorded. Ctrl-C ends the window early; the file is still written whole.

A past window cannot be watched: `--since` needs `--audit-log` (`audit_changes`).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_desched import kube
from pytest_desched.errors import ConfigError
from pytest_desched.log import Reporter, say
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.audit_changes import evictions_in, record_from_audit
from pytest_desched.replay.capture.format import KIND_SECTION, SECTIONS, Snapshot, key
from pytest_desched.replay.capture.redact import Aliases, alias_name, redact_object, redact_snapshot
from pytest_desched.replay.capture.snapshot import RESOURCES, Reads, check_inputs, take_snapshot
from pytest_desched.replay.capture.timeline import (
    MAX_WINDOW_S,
    Change,
    Timeline,
    make_header,
    parse_time,
    sorted_changes,
)
from pytest_desched.replay.capture.trim import Filtered, trim


def check_window(
    since: str | None, until: str | None, now: dt.datetime, audit_log: Any = None
) -> tuple[dt.datetime, dt.datetime]:
    """(start, end) of the window, or ConfigError with the numbers."""
    if since is None and until is None:
        raise ConfigError(
            "give the window: --until TIME|DURATION (watch from now on), or --since with "
            "--audit-log FILE (a past window)"
        )
    start = parse_time(since, "--since", now, -1) if since is not None else now
    if since is not None and audit_log is None and start < now - dt.timedelta(seconds=1):
        raise ConfigError(
            f"--since {since}: a watch sees only what happens from now on; a past window needs "
            "--audit-log FILE (the API server's audit log), or record forward with --until"
        )
    end = parse_time(until, "--until", now, +1) if until is not None else now
    length = (end - start).total_seconds()
    if length <= 0:
        raise ConfigError(
            f"window from {start:%Y-%m-%dT%H:%M:%SZ} to {end:%Y-%m-%dT%H:%M:%SZ} is "
            f"{length:.0f} s long; the end must come after the start"
        )
    if length > MAX_WINDOW_S:
        raise ConfigError(
            f"window of {length:.0f} s ({length / 3600:.1f} h) is longer than the 24 h "
            f"({MAX_WINDOW_S} s) a replay takes; record a shorter window"
        )
    return start, end


# -- one state per object, trimmed -------------------------------------------------------
class State:
    """The window's objects as last seen (trimmed), and the changes between them."""

    def __init__(self, namespaces: list[str] | None, descheduler: set[tuple[str, str]]) -> None:
        self.known: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (section, trimmed)
        self.changes: list[Change] = []
        self.filtered = Filtered()
        self.namespaces = namespaces
        self.descheduler = descheduler
        self.dropped_same = 0
        self._lock = threading.Lock()

    def seed(self, snap: Snapshot) -> None:
        for section, obj in snap.all_objects():
            self.known[_okey(section, obj)] = (section, obj)

    def in_scope(self, section: str, obj: dict[str, Any]) -> bool:
        m = obj.get("metadata") or {}
        ns = m.get("namespace")
        if self.namespaces and SECTIONS[section][2] and ns not in self.namespaces:
            return False
        if self.namespaces and section == "namespaces" and m.get("name") not in self.namespaces:
            return False
        return section != "cronJobs" or (ns, m.get("name")) in self.descheduler

    def event(self, section: str, etype: str, raw: dict[str, Any], t: float) -> Change | None:
        """One watch event at window time t -> the change it makes (None: none)."""
        if not self.in_scope(section, raw):
            return None
        obj = trim(section, raw, self.filtered)
        kind = SECTIONS[section][1]
        m = obj["metadata"]
        k = _okey(section, obj)
        with self._lock:
            prior = self.known.get(k)
            if etype == "DELETED":
                if prior is None:
                    return None
                del self.known[k]
                gone = {"metadata": _pick_meta(m)}
                c = Change(max(0.0, t), "delete", kind, m["name"], m.get("namespace"), gone)
            else:
                if prior is not None and _same(prior[1], obj):
                    self.dropped_same += 1
                    return None
                self.known[k] = (section, obj)
                verb = "update" if prior is not None else "create"
                c = Change(max(0.0, t), verb, kind, m["name"], m.get("namespace"), obj)
            self.changes.append(c)
            return c

    def relisted(self, section: str, items: list[dict[str, Any]], t: float) -> None:
        """A watch's version expired: the listed state against the known one."""
        seen = set()
        for raw in items:
            if self.in_scope(section, raw):
                seen.add(_okey(section, raw))
                self.event(section, "MODIFIED", raw, t)
        for k, (sec, obj) in list(self.known.items()):
            if sec == section and k not in seen:
                self.event(section, "DELETED", obj, t)


def _okey(section: str, obj: dict[str, Any]) -> str:
    return f"{section}:{key(obj)}"


def _pick_meta(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m[k] for k in ("name", "namespace", "ownerReferences", "labels") if k in m}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def norm(o: dict[str, Any]) -> str:
        o = copy.deepcopy(o)
        (o.get("metadata") or {}).pop("generation", None)
        return json.dumps(o, sort_keys=True)

    return norm(a) == norm(b)


# -- watching --------------------------------------------------------------------------------
def _start_version(api: Any, path: str) -> str:
    doc = kubeapi.get(api, path, [("limit", 1)])
    return str((doc.get("metadata") or {}).get("resourceVersion") or "")


def _stream(api: Any, path: str, rv: str, timeout_s: int) -> Iterable[dict[str, Any]]:
    """The events of one watch request (the server closes it after timeout_s)."""
    query = [
        ("watch", "true"),
        ("resourceVersion", rv),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", max(1, timeout_s)),
    ]
    m, url, hdrs, _body, _post = api.param_serialize(
        method="GET",
        resource_path=path,
        query_params=query,
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(m, url, header_params=hdrs, _request_timeout=(10, timeout_s + 30))
    if not 200 <= resp.status < 300:
        from kubernetes.client.rest import ApiException

        raise ApiException(http_resp=resp)
    for line in resp.response:
        line = line.strip()
        if line:
            yield json.loads(line)


class Watcher(threading.Thread):
    """One resource's watch for the window, feeding `State` (see the module docstring)."""

    def __init__(
        self, api: Any, section: str, path: str, rv: str, rec: Recording, reads: Any
    ) -> None:
        super().__init__(name=f"desched-record-{section}", daemon=True)
        self.api, self.section, self.path, self.rv, self.rec, self.reads = (
            api,
            section,
            path,
            rv,
            rec,
            reads,
        )
        self.error: str | None = None
        # The server's refusal (403, 401, 404 ...): this resource was not watched from then on,
        # so the window is not whole. A dropped connection is resumed and is not a refusal.
        self.refused: str | None = None
        self.events = 0

    def run(self) -> None:
        from kubernetes.client.rest import ApiException

        while not self.rec.stop.is_set():
            left = int(self.rec.end_wall - time.time()) + 1
            if left <= 0:
                return
            self.reads.add("watch", self.path)
            try:
                for evt in _stream(self.api, self.path, self.rv, left):
                    etype, obj = evt.get("type"), evt.get("object") or {}
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            self._relist()
                            break
                        raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('reason')}")
                    self.rv = str((obj.get("metadata") or {}).get("resourceVersion") or self.rv)
                    if etype == "BOOKMARK":
                        continue
                    if self.rec.stop.is_set():
                        return
                    obj.setdefault("kind", SECTIONS[self.section][1])
                    self.events += 1
                    self.rec.feed(self.section, str(etype), obj, time.time())
            except ApiException as exc:
                if exc.status == 410:
                    self._relist()
                    continue
                self.error = f"watch {self.path}: {kubeapi.status_reason(exc)}"
                self.refused = self.error
                return
            except Exception as exc:  # the connection dropped: resume from the last version
                if self.rec.stop.is_set():
                    return
                self.error = f"watch {self.path}: {type(exc).__name__}: {str(exc)[:200]}"
                time.sleep(1)  # not a test wait: a reconnect back-off

    def _relist(self) -> None:
        self.reads.add("list", self.path)
        items = kubeapi.list_all(self.api, self.path)
        doc = kubeapi.get(self.api, self.path, [("limit", 1)])
        self.rv = str((doc.get("metadata") or {}).get("resourceVersion") or "")
        for it in items:
            it.setdefault("kind", SECTIONS[self.section][1])
        self.rec.state.relisted(self.section, items, self.rec.t_of(time.time()))


class Recording:
    """The window being recorded: state, clock, stop flag; events before the snapshot is done
    are held and reconciled with it."""

    def __init__(self, state: State, start_wall: float, end_wall: float) -> None:
        self.state, self.start_wall, self.end_wall = state, start_wall, end_wall
        self.stop = threading.Event()
        self._held: list[tuple[str, str, dict[str, Any], float]] | None = []
        self._lock = threading.Lock()

    def t_of(self, wall: float) -> float:
        return round(max(0.0, wall - self.start_wall), 3)

    def feed(self, section: str, etype: str, obj: dict[str, Any], wall: float) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append((section, etype, obj, wall))
                return
        if wall <= self.end_wall:
            self.state.event(section, etype, obj, self.t_of(wall))

    def snapshot_done(self, snap: Snapshot) -> int:
        """Seed the state with the snapshot, then the held events in order; how many held."""
        self.state.seed(snap)
        with self._lock:
            held, self._held = self._held or [], None
        for section, etype, obj, wall in held:
            self.state.event(section, etype, obj, self.t_of(wall))
        return len(held)


# -- the recorder ----------------------------------------------------------------------------
def record(
    kubeconfig: str | Path | None,
    context: str | None,
    until: str | None = None,
    since: str | None = None,
    namespaces: Iterable[str] | None = None,
    redact: bool = False,
    audit_log: str | Path | None = None,
    start_snapshot: str | Path | None = None,
    report: Reporter = say,
    wait: Callable[[float], bool] | None = None,
) -> Timeline:
    """Record a window (see the module docstring); every input is checked before a request.

    `wait(seconds)` blocks until the window's end (default: a stop flag with a timeout);
    it returns early on Ctrl-C, which ends the window there.
    """

    now = dt.datetime.now(dt.UTC)
    start, end = check_window(since, until, now, audit_log)
    path, context, ns_list = check_inputs(kubeconfig, context, namespaces)
    if audit_log is not None and start < now - dt.timedelta(seconds=1):  # a past window
        return record_from_audit(
            audit_log, start_snapshot, start, end, redact=redact, report=report
        )
    api = kube.user_client(path, context)  # exit 2 for a bad server URL, 3 when none answers
    reads = Reads()
    state = State(ns_list, set())
    paths = {
        section: (
            [f"{prefix}/namespaces/{ns}/{res}" for ns in ns_list]
            if namespaced and ns_list
            else [f"{prefix}/{res}"]
        )
        for section, (prefix, res, namespaced) in RESOURCES.items()
        if not (section == "namespaces" and ns_list)
    }
    start_wall = time.time()
    end_wall = start_wall + (end - start).total_seconds()
    rec = Recording(state, start_wall, end_wall)
    watchers = []
    for section, ps in paths.items():
        for p in ps:
            reads.add("list", p)
            watchers.append(Watcher(api, section, p, _start_version(api, p), rec, reads))
    for w in watchers:
        w.start()
    snap = take_snapshot(path, context, namespaces=ns_list, exporter="client", report=report)
    d = snap.descheduler
    if d.get("kind") == "CronJob":
        state.descheduler = {(str(d.get("namespace")), str(d.get("name")))}
    held = rec.snapshot_done(snap)
    window_s = (end - start).total_seconds()
    report(
        f"record: snapshot taken ({len(snap.nodes)} nodes, {len(snap.pods)} pods); watching "
        f"{len(watchers)} resources until {end:%H:%M:%SZ} ({window_s:.0f} s); Ctrl-C ends early"
    )
    try:
        (wait or rec.stop.wait)(max(0.0, end_wall - time.time()))
    except KeyboardInterrupt:
        report("record: interrupted; the window ends now")
    ended = time.time()
    rec.stop.set()
    window_s = round(min(window_s, max(0.001, ended - start_wall)), 3)
    errors = [w.error for w in watchers if w.error]
    changes = [c for c in state.changes if c.t <= window_s]
    evictions = 0
    if audit_log is not None:  # the incident's own evictions, for comparison
        found = evictions_in(audit_log, start, start + dt.timedelta(seconds=window_s))
        changes += [c for _, c in found]
        evictions = len(found)
    changes = sorted_changes(changes)
    header = make_header(
        start,
        window_s,
        "watch",
        context=context,
        recorded={
            "readOnly": "only get, list and watch requests",
            "requests": sorted({f"{v} {w}" for v, w in reads.calls} | _snap_requests(snap)),
            "events": sum(w.events for w in watchers),
            "unchanged_dropped": state.dropped_same,
            "before_snapshot_done": held,
            "watch_errors": errors[:10],
            "watch_refused": [w.refused for w in watchers if w.refused][:10],
            "evictions_from_audit_log": evictions if audit_log is not None else None,
        },
        filtered=dict(state.filtered),
    )
    tl = Timeline(header, snap, changes)
    if redact:
        tl = redact_timeline(tl)
    return tl.validate("the timeline just recorded")


def _snap_requests(snap: Snapshot) -> set[str]:
    return set((snap.header.get("takenWith") or {}).get("requests") or [])


def redact_timeline(tl: Timeline) -> Timeline:
    """The snapshot and every change renamed with one alias table (the mapping never kept)."""

    a = Aliases()
    snap = redact_snapshot(tl.snapshot, a)
    changes = []
    for c in tl.changes:
        section = KIND_SECTION[c.kind]
        if c.patch is not None:
            raise ConfigError(
                f"timeline change at t={c.t} ({c.verb} {c.key}) is a bare patch (an audit log "
                "at Request level); --redact cannot rename inside it: give a RequestResponse log"
            )
        obj = c.object
        if obj is not None and (obj.get("metadata") or {}).get("name"):
            obj = redact_object(a, section, obj)
        ns = a.ns(c.namespace) if c.namespace else None
        changes.append(Change(c.t, c.verb, c.kind, alias_name(a, section, c.name), ns, obj))
    header = {**tl.header, "redacted": True}
    header.pop("context", None)
    return Timeline(header, snap, changes)
