"""Timeline changes from a kube-apiserver audit log (audit.k8s.io/v1 Event lines).

Two uses. A past window (`desched record --since 2h --audit-log FILE --snapshot START`): the
log's successful writes between the window's start and end become the changes, over a
snapshot taken at or before the start (writes between its takenAt and the start are folded
into it first). A watched window given a log too: the log adds the incident's own evictions
(`evict`, kept for comparison, never applied).

What a line gives depends on the audit policy's level: RequestResponse keeps the object the
server answered with (an `update` or `create` with the whole object, trimmed like a
snapshot's); Request keeps only what the client sent (a `patch` when it was a JSON object);
Metadata keeps neither (a `delete` or an `evict` still has all it needs; other writes at
Metadata are counted as `no body` and left out). Only the snapshot's kinds are read: a
Secret or ServiceAccount line is never turned into a change; status subresource writes
(kubelets, controllers) are not an incident's changes and are skipped.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import json_lines, read_text
from pytest_desched.log import Reporter
from pytest_desched.replay.capture.format import (
    FORBIDDEN_KINDS,
    KIND_SECTION,
    SECTIONS,
    Snapshot,
    utc,
)
from pytest_desched.replay.capture.timeline import Change, Timeline, make_header, snapshot_keys
from pytest_desched.replay.capture.trim import Filtered, trim
from pytest_desched.replay.objects import KINDS

# (group, resource) -> section
RESOURCE_SECTION: dict[tuple[str, str], str] = {
    (KINDS[kind].group, KINDS[kind].plural): section for section, (_, kind, _) in SECTIONS.items()
}
VERB = {"create": "create", "update": "update", "patch": "patch", "delete": "delete"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what `kubectl patch --type merge` sends)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def changes_from_audit(
    text: str, source: str, start: dt.datetime, end: dt.datetime
) -> tuple[list[tuple[dt.datetime, Change]], Counter[str]]:
    """(time, change) for each usable line in [-inf, end], in the log's order; and counts of
    what was left out and why."""
    skipped: Counter[str] = Counter()
    out: list[tuple[dt.datetime, Change]] = []
    filtered = Filtered()
    for line, ev in json_lines(text, source):
        if ev.get("kind") != "Event" or ev.get("stage") != "ResponseComplete":
            continue
        ref = ev.get("objectRef") or {}
        code = (ev.get("responseStatus") or {}).get("code")
        verb, sub = ev.get("verb"), ref.get("subresource")
        section = RESOURCE_SECTION.get((ref.get("apiGroup") or "", str(ref.get("resource"))))
        if section is None:
            if str(ref.get("resource")) in ("secrets", "serviceaccounts"):
                skipped["secrets and serviceaccounts (never read)"] += 1
            continue
        if not isinstance(code, int) or not 200 <= code < 300:
            skipped["refused requests"] += 1
            continue
        when = utc(ev.get("stageTimestamp") or ev.get("requestReceivedTimestamp"))
        if when is None or when > end:
            skipped["after the window"] += 1 if when else 0
            continue
        kind = SECTIONS[section][1]
        ns, name = ref.get("namespace") or None, ref.get("name")
        if sub == "eviction" and verb == "create" and section == "pods":
            out.append((when, Change(0, "evict", kind, str(name), ns, line=line)))
            continue
        if sub or verb not in VERB or (not name and verb != "create"):
            skipped["status and other subresources" if sub else "other verbs"] += 1
            continue
        obj = ev.get("responseObject")
        if verb == "delete":
            out.append((when, Change(0, "delete", kind, str(name), ns, line=line)))
        elif isinstance(obj, dict) and obj.get("kind") == kind:
            obj.setdefault("kind", kind)
            t = trim(section, obj, filtered)
            m = t["metadata"]
            v = "create" if verb == "create" else "update"
            out.append((when, Change(0, v, kind, m["name"], m.get("namespace"), t, line=line)))
        elif verb == "patch" and isinstance(ev.get("requestObject"), dict):
            p = ev["requestObject"]
            out.append((when, Change(0, "patch", kind, str(name), ns, patch=p, line=line)))
        else:
            skipped["no body (Metadata level)"] += 1
    return out, skipped


def fold(snap: Snapshot, changes: list[Change]) -> Snapshot:
    """The snapshot with `changes` applied in memory (what happened before the window)."""
    out = copy.deepcopy(snap)
    for c in changes:
        section = KIND_SECTION[c.kind]
        items = out.items(section)
        i = next(
            (
                j
                for j, o in enumerate(items)
                if o["metadata"].get("name") == c.name
                and o["metadata"].get("namespace") == c.namespace
            ),
            None,
        )
        if c.verb == "delete" and i is not None:
            items.pop(i)
        elif c.verb in ("create", "update") and c.object is not None:
            if i is None:
                items.append(c.object)
            else:
                items[i] = c.object
        elif c.verb == "patch" and i is not None:
            items[i] = merge_patch(items[i], c.patch)
    return out


def record_from_audit(
    audit_log: str | Path,
    start_snapshot: str | Path | None,
    start: dt.datetime,
    end: dt.datetime,
    redact: bool = False,
    report: Reporter | None = None,
) -> Timeline:
    """A past window from a snapshot at (or before) its start and the audit log."""
    if start_snapshot is None:
        raise ConfigError(
            "--audit-log without a watch needs --snapshot FILE: a snapshot taken at or before "
            "the window's start (an audit log holds changes, not the state they changed)"
        )
    snap = Snapshot.load(start_snapshot)
    if snap.header.get("redacted"):
        raise ConfigError(
            f"--snapshot {start_snapshot} is redacted: the audit log's names would not match; "
            "give the unredacted snapshot and --redact"
        )
    lag = (snap.taken_at - start).total_seconds()
    if lag > 60:
        raise ConfigError(
            f"--snapshot {start_snapshot} was taken {lag:.0f} s after the window's start "
            f"({start:%Y-%m-%dT%H:%M:%SZ}); take it at or before the start, or start later"
        )
    text = read_text(audit_log, kind="bulk", what="audit log")
    timed, skipped = changes_from_audit(text, str(audit_log), start, end)
    before = [c for (when, c) in timed if snap.taken_at <= when < start]
    snap = fold(snap, [c for c in before if c.verb != "evict"])
    window = [(when, c) for when, c in timed if start <= when <= end]
    known = snapshot_keys(snap)
    changes: list[Change] = []
    outside = 0
    for when, c in sorted(window, key=lambda wc: wc[0]):
        c.t, c.line = round((when - start).total_seconds(), 3), 0
        if c.kind in FORBIDDEN_KINDS:
            continue
        if c.verb == "create":
            known.add(c.key)
        elif c.key not in known:
            outside += 1
            continue
        elif c.verb == "delete":
            known.discard(c.key)
        changes.append(c)
    if outside:
        skipped["objects outside the snapshot (not in scope when it was taken)"] += outside
    header = make_header(
        start,
        (end - start).total_seconds(),
        "audit log",
        recorded={
            "auditLog": Path(audit_log).name,
            "startSnapshot": str(start_snapshot),
            "folded_before_window": len(before),
            "left_out": dict(skipped),
        },
    )
    tl = Timeline(header, snap, changes)
    if redact:
        # heavy: the kubernetes client, kept out of this module's import
        from pytest_desched.replay.capture.record import redact_timeline

        tl = redact_timeline(tl)
    if report:
        report(
            f"record: {len(changes)} changes from the audit log over "
            f"{(end - start).total_seconds():.0f} s ({sum(skipped.values())} lines left out)"
        )
    return tl.validate("the timeline built from the audit log")


def evictions_in(
    audit_log: str | Path, start: dt.datetime, end: dt.datetime
) -> list[tuple[float, Change]]:
    """The incident's own evictions in the window: (t, evict change)."""
    text = read_text(audit_log, kind="bulk", what="audit log")
    timed, _ = changes_from_audit(text, str(audit_log), start, end)
    out = []
    for when, c in timed:
        if c.verb == "evict" and start <= when <= end:
            c.t, c.line = round((when - start).total_seconds(), 3), 0
            out.append((c.t, c))
    return out
