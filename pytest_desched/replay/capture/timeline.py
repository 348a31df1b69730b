"""The timeline file: an incident window as the start snapshot plus ordered object changes.

JSON lines, so a long window streams and a reader can stop at any line:

    {"apiVersion": "desched.pytest.io/v1alpha1", "kind": "Timeline", "version": 1,
     "windowStart": "2026-12-01T14:00:00Z", "windowSeconds": 1800, "source": "watch", ...}
    {"snapshot": {<a ClusterSnapshot document, the cluster at the window's start>}}
    {"t": 12.5, "verb": "update", "kind": "Node", "name": "node-2", "object": {...}}
    {"t": 13.0, "verb": "delete", "kind": "Pod", "namespace": "shop", "name": "web-1"}
    {"t": 20.1, "verb": "patch", "kind": "Deployment", "namespace": "shop", "name": "web",
     "patch": {"spec": {"replicas": 5}}}

`t` is seconds from the window's start (never wall clock, so a replay at any speed places
each change at the same moment of the window); `verb` is create, update, patch (a JSON merge
patch, from an audit log that did not keep the object), delete or evict (the incident's own
evictions, kept for comparison and never applied). Objects are trimmed and redacted by the
snapshot's own rules (`trim`, `redact`): one source of truth for what leaves a cluster.

Loading checks everything a replay would trip on, before anything starts (ConfigError, exit
2, with the numbers): the header, the window (at most 24 h), the order of the changes, and
that each change names an object the snapshot holds or an earlier change created.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import json_lines, read_text
from pytest_desched.replay.capture.credentials import note, scrub_credentials
from pytest_desched.replay.capture.format import (
    API_VERSION,
    FORBIDDEN_KINDS,
    KIND_SECTION,
    SECTIONS,
    Snapshot,
    rfc3339,
    utc,
)

KIND = "Timeline"
VERSION = 1
MAX_WINDOW_S = 24 * 3600
VERBS = ("create", "update", "patch", "delete", "evict")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str, flag: str) -> float:
    """`90s`, `30m`, `1h30m`, or plain seconds; ConfigError naming the flag otherwise."""
    s = str(text).strip()
    try:
        v = float(s)
    except ValueError:
        m = _DURATION.fullmatch(s)
        if not s or not m or not any(m.groups()):
            raise ConfigError(
                f"{flag} {text!r}: not a duration; use e.g. 90s, 30m, 1h30m, or an RFC 3339 time"
            ) from None
        h, mi, se = m.groups()
        v = int(h or 0) * 3600 + int(mi or 0) * 60 + float(se or 0)
    if not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{flag} {text!r}: must be a positive duration")
    return v


def parse_time(text: str, flag: str, now: dt.datetime, sign: int) -> dt.datetime:
    """An RFC 3339 time, or a duration counted from `now` (sign -1: ago, +1: from now)."""
    s = str(text).strip()
    if s == "now":
        return now
    if "T" in s or s.count("-") >= 2:
        try:
            t = utc(s)
        except (TypeError, ValueError):
            t = None
        if t is None:
            raise ConfigError(f"{flag} {text!r}: not an RFC 3339 time (2026-12-01T14:00:00Z)")
        return t
    return now + sign * dt.timedelta(seconds=parse_duration(s, flag))


def check_speed(speed: float) -> float:
    """A replay speed: a finite number > 0 (10 = ten times faster than the incident)."""
    try:
        v = float(speed)
    except (TypeError, ValueError):
        raise ConfigError(f"--speed {speed!r}: not a number; use e.g. 10") from None
    if not math.isfinite(v) or v <= 0:
        raise ConfigError(f"--speed {speed}: must be > 0 (1 = real time, 10 = ten times faster)")
    return v


def obj_key(kind: str, namespace: str | None, name: str) -> str:
    """`Kind ns/name` or `Kind name`: one spelling for every message and index."""
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def snapshot_keys(snap: Snapshot) -> set[str]:
    keys = set()
    for section, obj in snap.all_objects():
        m = obj.get("metadata") or {}
        keys.add(obj_key(SECTIONS[section][1], m.get("namespace"), str(m.get("name"))))
    return keys


@dataclass
class Change:
    """One change of one object at `t` seconds into the window."""

    t: float
    verb: str
    kind: str
    name: str
    namespace: str | None = None
    object: dict[str, Any] | None = None
    patch: dict[str, Any] | None = None
    line: int = 0  # in the file (for messages); 0 when built in memory

    @property
    def key(self) -> str:
        return obj_key(self.kind, self.namespace, self.name)

    def to_doc(self) -> dict[str, Any]:
        d: dict[str, Any] = {"t": round(self.t, 3), "verb": self.verb, "kind": self.kind}
        if self.namespace:
            d["namespace"] = self.namespace
        d["name"] = self.name
        if self.object is not None:
            d["object"] = self.object
        if self.patch is not None:
            d["patch"] = self.patch
        return d

    @classmethod
    def from_doc(cls, doc: dict[str, Any], line: int, source: str) -> Change:
        where = f"{source} line {line}"
        t = doc.get("t")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise ConfigError(f"{where}: t {t!r} is not a number of seconds into the window")
        verb, kind, name = doc.get("verb"), doc.get("kind"), doc.get("name")
        if verb not in VERBS:
            raise ConfigError(f"{where}: verb {verb!r}; use one of {', '.join(VERBS)}")
        if kind in FORBIDDEN_KINDS:
            raise ConfigError(f"{where}: a {kind} never belongs in a timeline; remove the line")
        if kind not in KIND_SECTION:
            raise ConfigError(f"{where}: kind {kind!r}; a timeline holds {sorted(KIND_SECTION)}")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: no name")
        ns = doc.get("namespace")
        if SECTIONS[KIND_SECTION[kind]][2] and not ns:
            raise ConfigError(f"{where}: {kind} {name} has no namespace")
        obj, patch = doc.get("object"), doc.get("patch")
        if verb in ("create", "update") and not isinstance(obj, dict):
            raise ConfigError(f"{where}: {verb} {kind} {name} carries no object")
        if verb == "patch" and not isinstance(patch, dict):
            raise ConfigError(f"{where}: patch {kind} {name} carries no patch (a JSON object)")
        if isinstance(obj, dict) and obj.get("kind", kind) != kind:
            raise ConfigError(f"{where}: the object's kind {obj.get('kind')!r} is not {kind}")
        return cls(float(t), verb, kind, name, ns, obj, patch, line)


@dataclass
class Timeline:
    """A window: header, the snapshot at its start, and the changes in order."""

    header: dict[str, Any]
    snapshot: Snapshot
    changes: list[Change] = field(default_factory=list)

    @property
    def window_s(self) -> float:
        return float(self.header.get("windowSeconds") or 0)

    @property
    def window_start(self) -> dt.datetime:
        t = utc(self.header.get("windowStart"))
        if t is None:
            raise ConfigError("timeline header has no windowStart")
        return t

    # -- file ----------------------------------------------------------------------------
    def dump(self) -> str:
        head = {"apiVersion": API_VERSION, "kind": KIND, "version": VERSION, **self.header}
        lines = [json.dumps(head, separators=(",", ":"))]
        lines.append(json.dumps({"snapshot": self.snapshot.to_doc()}, separators=(",", ":")))
        lines += [json.dumps(c.to_doc(), separators=(",", ":")) for c in self.changes]
        return "\n".join(lines) + "\n"

    def write(self, path: str | Path) -> Path:
        """0600 and whole or not at all, like a snapshot (it describes a cluster)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(self.dump())
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)
        return path

    @classmethod
    def parse(cls, text: str, source: str = "<timeline>") -> Timeline:
        docs = list(json_lines(text, source))
        if len(docs) < 2:
            raise ConfigError(
                f"{source}: not a timeline (a header line and a snapshot line expected); "
                "record one with `desched record`"
            )
        (_, head), (_, snapdoc) = docs[0], docs[1]
        if head.get("kind") != KIND or head.get("apiVersion") != API_VERSION:
            raise ConfigError(
                f"{source}: first line is {head.get('apiVersion')}/{head.get('kind')}, "
                f"not {API_VERSION}/{KIND}; record one with `desched record`"
            )
        if head.get("version") != VERSION:
            raise ConfigError(
                f"{source}: timeline version {head.get('version')!r}; this desched reads "
                f"version {VERSION}"
            )
        if not isinstance(snapdoc.get("snapshot"), dict):
            raise ConfigError(f"{source} line 2: the window's start snapshot is missing")
        snap = Snapshot.from_doc(snapdoc["snapshot"], f"{source} (start snapshot)")
        header = {k: v for k, v in head.items() if k not in ("apiVersion", "kind", "version")}
        changes = [Change.from_doc(d, i, source) for i, d in docs[2:]]
        removed: Counter[str] = Counter()  # credentials in the changes too: never restored
        for c in changes:
            for body in (c.object, c.patch):
                if isinstance(body, dict):
                    removed += scrub_credentials({KIND_SECTION[c.kind]: [body]})
        if removed:
            snap.load_notes.append(f"timeline changes: {note(removed)}")
        tl = cls(header, snap, changes)
        tl.validate(source)
        return tl

    @classmethod
    def load(cls, path: str | Path) -> Timeline:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"timeline {path}: no such file; record one with `desched record`")
        return cls.parse(read_text(path, kind="bulk", what="timeline"), str(path))

    # -- validation ----------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Everything a replay would trip on, one line each, with the numbers."""
        out: list[str] = []
        w = self.header.get("windowSeconds")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            out.append(f"header windowSeconds {w!r}: a number of seconds > 0")
            w = None
        elif w > MAX_WINDOW_S:
            out.append(
                f"window of {w:.0f} s ({w / 3600:.1f} h) is longer than the 24 h "
                f"({MAX_WINDOW_S} s) a replay takes; record or cut a shorter window"
            )
        try:
            self.window_start  # noqa: B018
        except (ConfigError, TypeError, ValueError) as exc:
            out.append(f"header windowStart: {exc}")
        known = snapshot_keys(self.snapshot)
        out_of_order: list[str] = []
        outside: list[str] = []
        beyond: list[str] = []
        last = 0.0
        for i, c in enumerate(self.changes, 1):
            at = f"change {i} (line {c.line})" if c.line else f"change {i}"
            if c.t < 0:
                out_of_order.append(f"{at} at t={c.t} s is before the window's start")
            elif c.t < last:
                out_of_order.append(f"{at} at t={c.t} s comes after one at t={last} s")
            last = max(last, c.t)
            if w is not None and c.t > w:
                beyond.append(f"{at} at t={c.t} s")
            if c.verb == "create":
                known.add(c.key)
            elif c.key not in known:
                outside.append(
                    f"{at}: {c.verb} {c.key} names an object neither in the start snapshot "
                    "nor created earlier in the timeline"
                )
            elif c.verb == "delete":
                known.discard(c.key)
        if out_of_order:
            out.append(f"{len(out_of_order)} changes out of order, e.g. {out_of_order[0]}")
        if outside:
            out.append(f"{len(outside)} changes outside the snapshot, e.g. {outside[0]}")
        if beyond:
            out.append(f"{len(beyond)} changes after the window's end ({w} s), e.g. {beyond[0]}")
        return out

    def validate(self, source: str = "<timeline>") -> Timeline:
        problems = self.problems()
        if problems:
            raise ConfigError(f"timeline {source} cannot be replayed: " + "; ".join(problems))
        return self


def make_header(start: dt.datetime, window_s: float, source: str, **facts: Any) -> dict[str, Any]:
    """The header every recorder writes (watch or audit log); `facts` add to it."""
    return {
        "windowStart": rfc3339(start),
        "windowSeconds": round(window_s, 3),
        "source": source,
        "offsets": "t: seconds from windowStart (window time, not wall clock)",
        **facts,
    }


def sorted_changes(changes: Iterable[Change]) -> list[Change]:
    """Stable by time: changes at the same instant keep the order they were seen in."""
    return sorted(changes, key=lambda c: c.t)
