"""Each owner's available replicas over a round's rebuild window, from the pod watch's events.

The runbook's incident: every eviction *succeeded*, and serving capacity still dropped while
the replacements started. `pods_evicted_total` proves only that evictions happened; what the
owner had meanwhile is a series over time. The round's pod watch (lab/recorder.py) sees each
pod's transitions as they happen, so replaying them in order gives, for each owner (the lab
workload its pods carry), how many of its pods were available at every instant:

* available: Ready, Running and not terminating, which is what a Deployment's
  `availableReplicas` counts with `minReadySeconds: 0` (a terminating pod is no longer
  active to its ReplicaSet);
* Pending: phase Pending and not terminating: unscheduled, or bound and still starting
  (image pull, cold start), as `kubectl get pods` shows both;
* Terminating: deleted (a `deletionTimestamp`) and not gone yet: waiting out its grace.
  Its ReplicaSet has already replaced it, so it does not lengthen the dip by itself; it
  still holds its node's requests, and a volume only one pod may use, until it goes.

Figures per owner (`OwnerWindow`): the minimum available against desired, how long it was
below desired, most pods Pending at once and at the end, the replacements the window saw and
the slowest one's Ready latency, and how long its evicted pods stayed Terminating. Pure: events in, figures out; the runner reads desired
replicas from each owner's spec and gives the window's bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

SERIES_MAX = 200  # change points kept per owner in the evidence (the figures use every one)


@dataclass(frozen=True)
class OwnerWindow:
    """One owner's capacity over one round's window (seconds from the window's start)."""

    owner: str
    desired: int
    available_before: int  # at the window's start
    min_available: int
    min_at_s: float | None  # when the minimum was first reached (None: never below before)
    below_desired_s: float  # total time with fewer available than desired
    recovered: bool  # available back to desired by the window's end
    recovered_at_s: float | None  # when it last came back to desired (None: never left/back)
    pending_max: int  # most of its pods Pending at once
    pending_after: int  # Pending at the window's end
    replacements: int  # its pods first seen during the window
    ready_latency_s: float | None  # slowest replacement Ready: first seen -> Ready
    window_s: float
    # (t_s, available, pending) at each change, the first at 0.0: the dip as it happened.
    series: list[tuple[float, int, int]] = field(default_factory=list)
    # Terminating pods (deleted, waiting out their grace): most at once, the time at least
    # one was, the longest one pod was (from its deletion seen to gone or the window's
    # end), and how many still were at the window's end.
    terminating_max: int = 0
    terminating_s: float = 0.0
    terminating_longest_s: float | None = None
    terminating_after: int = 0

    @property
    def dipped(self) -> bool:
        return self.min_available < self.desired

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["series"] = [list(p) for p in self.series[:SERIES_MAX]]
        d["series_truncated"] = len(self.series) > SERIES_MAX
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OwnerWindow:
        names = set(cls.__dataclass_fields__)
        kept = {k: v for k, v in d.items() if k in names}
        kept["series"] = [tuple(p) for p in d.get("series") or []]
        return cls(**kept)

    def line(self) -> str:
        """`web: min 3/6 available, 15.2 s below desired, Pending max 3 (0 after)`."""
        back = "" if self.recovered else ", NOT back to desired"
        lat = (
            f", slowest replacement Ready {self.ready_latency_s:.1f} s"
            if self.ready_latency_s
            else ""
        )
        term = (
            f", Terminating max {self.terminating_max} for {self.terminating_s:.1f} s "
            f"(longest pod {self.terminating_longest_s or 0:.1f} s, {self.terminating_after} after)"
            if self.terminating_max
            else ""
        )
        return (
            f"{self.owner}: min {self.min_available}/{self.desired} available, "
            f"{self.below_desired_s:.1f} s below desired, Pending max {self.pending_max} "
            f"({self.pending_after} after){lat}{term}{back}"
        )


@dataclass
class _Pod:
    owner: str
    available: bool = False
    pending: bool = False
    first_seen: float = 0.0
    ready_at: float | None = None
    terminating: bool = False
    terminating_since: float | None = None  # its deletion first seen
    terminated_at: float | None = None  # gone (a DELETED event)


def _state(e: Mapping[str, Any]) -> tuple[bool, bool]:
    """(available, pending) of a pod as one event shows it."""
    if e.get("type") == "DELETED" or e.get("deleting"):
        return False, False
    phase = e.get("phase")
    return bool(e.get("ready")) and phase == "Running", phase == "Pending"


def _terminating(e: Mapping[str, Any]) -> bool:
    """Deleted and not gone yet, as one event shows it."""
    return bool(e.get("deleting")) and e.get("type") != "DELETED"


def _apply(p: _Pod, e: Mapping[str, Any], t: float) -> None:
    """A pod's state after one event at `t`."""
    p.available, p.pending = _state(e)
    p.terminating = _terminating(e)
    if p.terminating and p.terminating_since is None:
        p.terminating_since = t
    if e.get("type") == "DELETED" and p.terminated_at is None:
        p.terminated_at = t


def unseen_deletions(
    events: Iterable[Mapping[str, Any]], initial: Iterable[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """DELETED events for pods a watch's re-listing shows gone without a DELETED event.

    The round's watch (lab/recorder.py) re-opens its stream every second without a
    resourceVersion, so each stream starts by listing every pod of its namespace as ADDED
    and nothing is delivered between streams: a pod evicted and removed in that gap (kwok
    removes it at once) is never seen going. Each event carries its stream's number
    (`stream`); a stream's listing is its ADDED events before its first other event. Once a
    listing is complete (its stream delivered another event, or a later stream began), each
    pod alive before it and absent from it is gone, at the listing's last event. Events
    without a stream number are taken as they are.
    """
    alive: dict[str, dict[str, Mapping[str, Any]]] = {}  # namespace -> uid -> last event
    for e in initial:
        alive.setdefault(str(e.get("namespace", "")), {})[e["uid"]] = e
    # namespace -> (stream, uids listed, alive before the listing, last t), while listing
    listing: dict[str, tuple[Any, set[str], set[str], float]] = {}
    done: set[tuple[str, Any]] = set()  # (namespace, stream) whose listing ended
    out: list[dict[str, Any]] = []

    def close(ns: str) -> None:
        stream, listed, before, t = listing.pop(ns)
        done.add((ns, stream))
        for uid in sorted((before & set(alive.get(ns, {}))) - listed):
            gone = alive[ns].pop(uid)
            out.append({**gone, "t": t, "type": "DELETED", "deleting": True, "unseen": True})

    for e in sorted(events, key=lambda e: e["t"]):
        ns, uid, stream = str(e.get("namespace", "")), e["uid"], e.get("stream")
        if stream is not None and (ns, stream) not in done:
            now = listing.get(ns)
            if now is not None and now[0] != stream:
                close(ns)  # a later stream began: the earlier listing was whole
                now = None
            if e.get("type") == "ADDED":
                if now is None:
                    now = (stream, set(), set(alive.get(ns, {})), e["t"])
                now[1].add(uid)
                listing[ns] = (now[0], now[1], now[2], e["t"])
            elif now is not None:
                close(ns)
            else:
                done.add((ns, stream))  # a stream whose listing was empty: nothing to tell
        if e.get("type") == "DELETED":
            alive.get(ns, {}).pop(uid, None)
        else:
            alive.setdefault(ns, {})[uid] = e
    # A listing still open at the end may be one the copy caught halfway: not closed.
    return out


def owner_windows(
    events: Iterable[Mapping[str, Any]],
    desired: Mapping[str, int],
    start: float,
    end: float,
    initial: Iterable[Mapping[str, Any]] = (),
) -> dict[str, OwnerWindow]:
    """Each owner of `desired` over [start, end], from pod watch events (`t`, `type`, `uid`,
    `workload`, `phase`, `ready`, `deleting`; lab/recorder.py's form), in time order.

    `initial`: the pods as a snapshot taken before the window listed them (same keys, no
    `t`). The watch's own first events re-list every existing pod, and may arrive after the
    window opened: a pod of `initial`, or one an event showed before `start`, is never a
    replacement. A pod first seen after `start` is one.
    """
    if end < start:
        raise ValueError(f"window ends ({end}) before it starts ({start})")
    events, initial = list(events), list(initial)
    evs = sorted(
        (e for e in [*events, *unseen_deletions(events, initial)] if e.get("workload") in desired),
        key=lambda e: (e["t"], e.get("type") != "DELETED"),  # a re-listing's gone pod first
    )
    pods: dict[str, _Pod] = {}
    for e in initial:
        if e.get("workload") in desired:
            snap = pods[e["uid"]] = _Pod(str(e["workload"]), first_seen=start)
            _apply(snap, e, start)
    counts = {o: (0, 0) for o in desired}

    def count(owner: str) -> tuple[int, int]:
        mine = [p for p in pods.values() if p.owner == owner]
        return sum(p.available for p in mine), sum(p.pending for p in mine)

    def terminating(owner: str) -> int:
        return sum(p.terminating for p in pods.values() if p.owner == owner)

    i = 0
    while i < len(evs) and evs[i]["t"] <= start:  # the state the window opens with
        e = evs[i]
        known = pods.setdefault(e["uid"], _Pod(str(e["workload"]), first_seen=e["t"]))
        _apply(known, e, max(float(e["t"]), start))
        i += 1
    for o in desired:
        counts[o] = count(o)
    terms = {o: terminating(o) for o in desired}
    term_max = dict(terms)
    term_s = dict.fromkeys(desired, 0.0)
    before = dict(counts)
    series: dict[str, list[tuple[float, int, int]]] = {o: [(0.0, *counts[o])] for o in desired}
    lows = {o: (counts[o][0], 0.0 if counts[o][0] < desired[o] else None) for o in desired}
    below = dict.fromkeys(desired, 0.0)
    back_at: dict[str, float | None] = dict.fromkeys(desired)
    pend_max = {o: counts[o][1] for o in desired}
    last_t = dict.fromkeys(desired, start)
    fresh: set[str] = set()
    for e in evs[i:]:
        t = min(float(e["t"]), end)
        uid, owner = e["uid"], str(e["workload"])
        p = pods.get(uid)
        if p is None:
            p = pods[uid] = _Pod(owner, first_seen=t)
            fresh.add(uid)
        _apply(p, e, t)
        if p.available and p.ready_at is None:
            p.ready_at = t
        was = counts[owner]
        if was[0] < desired[owner]:
            below[owner] += t - last_t[owner]
        if terms[owner]:
            term_s[owner] += t - last_t[owner]
        last_t[owner] = t
        terms[owner] = terminating(owner)
        term_max[owner] = max(term_max[owner], terms[owner])
        now = counts[owner] = count(owner)
        if now == was:
            continue
        series[owner].append((round(t - start, 3), *now))
        if now[0] < lows[owner][0]:
            lows[owner] = (now[0], round(t - start, 3))
        if was[0] < desired[owner] <= now[0]:
            back_at[owner] = round(t - start, 3)
        pend_max[owner] = max(pend_max[owner], now[1])
    out: dict[str, OwnerWindow] = {}
    for o, want in desired.items():
        avail, pending = counts[o]
        if avail < want:
            below[o] += end - last_t[o]
        if terms[o]:
            term_s[o] += end - last_t[o]
        new = [p for u, p in pods.items() if u in fresh and p.owner == o]
        latencies = [p.ready_at - p.first_seen for p in new if p.ready_at is not None]
        held = [
            (end if p.terminated_at is None else p.terminated_at) - p.terminating_since
            for p in pods.values()
            if p.owner == o and p.terminating_since is not None
        ]
        out[o] = OwnerWindow(
            owner=o,
            desired=int(want),
            available_before=before[o][0],
            min_available=lows[o][0],
            min_at_s=lows[o][1],
            below_desired_s=round(below[o], 3),
            recovered=avail >= want,
            recovered_at_s=back_at[o],
            pending_max=pend_max[o],
            pending_after=pending,
            replacements=len(new),
            ready_latency_s=round(max(latencies), 3) if latencies else None,
            window_s=round(end - start, 3),
            series=series[o],
            terminating_max=term_max[o],
            terminating_s=round(term_s[o], 3),
            terminating_longest_s=round(max(held), 3) if held else None,
            terminating_after=terms[o],
        )
    return out


def windows_to_dict(windows: Mapping[str, OwnerWindow]) -> dict[str, dict[str, Any]]:
    """The record's and round figures' JSON form: owner -> figures."""
    return {o: w.to_dict() for o, w in sorted(windows.items())}


__all__ = ["SERIES_MAX", "OwnerWindow", "owner_windows", "unseen_deletions", "windows_to_dict"]
