"""Watching the lab during a round: pod and PDB events as a reviewer would see with `-w`.

Every pod of the lab's namespaces is watched (not one label), and every PDB's status is
kept, per PDB and as one series; the runbook's single PDB makes both the same.

`Recorder` holds what was observed (pod transitions, every PDB status, watch gaps) and
answers the questions an assessment asks of it (lowest disruptionsAllowed, PDB breaches,
when a pod first went Ready or terminating); `record_lab` fills one from background watches
for the duration of a block. Kept apart from `Lab` because it is the only part that runs
threads; `Lab.record()` is the usual way to start it.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_desched import interrupts
from pytest_desched.kube import LIVE_WATCHES
from pytest_desched.lab.snapshot import PodInfo

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pytest_desched.providers.base import Cluster


@dataclass
class Recorder:
    """Watches the lab's pods and PDB during a round: what a reviewer would see with `-w`."""

    pod_events: list[dict[str, Any]] = field(default_factory=list)
    pdb_allowed: list[tuple[float, int]] = field(default_factory=list)
    # Every observed PDB status: (t, currentHealthy, desiredHealthy, disruptionsAllowed).
    pdb_statuses: list[tuple[float, int, int, int]] = field(default_factory=list)
    watch_errors: list[str] = field(default_factory=list)  # a gap in what was observed
    # Watch opens the API server refused for a while (429, 5xx) and that provably hid nothing:
    # every object was still at the resourceVersion last seen (see `refused_open`).
    watch_notes: list[str] = field(default_factory=list)
    # The same statuses per PDB ("namespace/name"), for labs with more than one budget.
    pdb_by_name: dict[str, list[tuple[float, int, int, int]]] = field(default_factory=dict)
    # The live watches by kind ("pods", "pdb"): what `disconnect` cuts (fault injection).
    watches: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def disconnect(self, kind: str) -> bool:
        """Cut the `kind` watch's open HTTP stream, as a dropped connection would.

        The watch notices (its read fails), records the gap in `watch_errors` and resumes;
        False when no stream was open at that moment.
        """
        import socket

        resp = getattr(self.watches.get(kind), "_resp", None)
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is None:
            return False
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
        return True

    def min_disruptions_allowed(self) -> int | None:
        return min((v for _, v in self.pdb_allowed), default=None)

    def pdb_breaches(self) -> list[tuple[float, int, int]]:
        """Observed statuses with fewer healthy pods than the budget wants: (t, current, desired)."""
        return [(t, cur, want) for t, cur, want, _ in self.pdb_statuses if cur < want]

    def first_ready(self, uid: str) -> float | None:
        return next((e["t"] for e in self.pod_events if e["uid"] == uid and e["ready"]), None)

    def first_deleting(self, uid: str) -> float | None:
        return next(
            (
                e["t"]
                for e in self.pod_events
                if e["uid"] == uid and (e["deleting"] or e["type"] == "DELETED")
            ),
            None,
        )


# The statuses the API conventions call retriable: throttled (429, APF), or the server
# briefly unable to serve (500, 502, 503, 504), as a loaded control plane answers.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
GONE = 410  # a watch's resourceVersion older than the API server's watch cache holds


class _Expired(Exception):
    """A watch stream's ERROR event saying its resume point expired (410 Gone)."""


def _transient(exc: Exception) -> bool:
    return getattr(exc, "status", None) in TRANSIENT_STATUS


def _said(exc: Exception) -> str:
    """An exception as its words: an ApiException's repr is only `ApiException()`."""
    status = getattr(exc, "status", None)
    if status is None:
        return repr(exc)
    return f"HTTP {status} {getattr(exc, 'reason', '') or ''}".strip()


@contextmanager
def record_lab(
    cluster: Cluster, namespace: str | Sequence[str], app: str | None = None
) -> Iterator[Recorder]:
    """Watch every pod and PDB of the lab's namespace(s) in the background while the block runs.

    `app` is kept for callers of the one-workload lab; every pod is watched either way.
    """
    from kubernetes import watch

    rec = Recorder()
    stop = threading.Event()
    watches: list[watch.Watch] = []

    def broke(kind: str, fn: str, exc: Exception) -> None:
        """A gap: the watch's kind first (what the gap hides), then its words."""
        rec.watch_errors.append(f"{kind} watch broke ({fn}): {_said(exc)}"[:300])

    def refused_open(
        kind: str, fn: str, first: Exception, list_fn: Any, ns: str, last: dict[str, str]
    ) -> bool:
        """A watch open refused with a transient status, before it delivered anything.

        No stream was open, so nothing was cut: the question is only whether something changed
        while none was. A LIST (retried while refused the same way) answers it: every object at
        the resourceVersion the last event left, none gone and none new, proves the window hid
        nothing (a note); otherwise the objects that changed unseen are a gap. False when stop
        came first (the round is over).
        """
        t0, refusals = time.monotonic(), [_said(first)]
        while not stop.wait(0.2):
            try:
                items = list_fn(ns).items
            except Exception as exc:
                if not _transient(exc):
                    broke(kind, fn, exc)
                    return True
                refusals.append(_said(exc))
                continue
            now = {o.metadata.name: o.metadata.resource_version for o in items}
            unseen = sorted(n for n in now.keys() | last.keys() if now.get(n) != last.get(n))
            window = f"{time.monotonic() - t0:.2f}s"
            said = f"{kind} watch open refused {len(refusals)}x ({fn}): {refusals[0]}"
            if unseen:
                rec.watch_errors.append(
                    f"{said}; in the {window} without a watch, changed unseen: "
                    f"{', '.join(unseen[:5])}"[:300]
                )
            else:
                rec.watch_notes.append(
                    f"{said}; listed after {window}: every object at the resourceVersion last "
                    "seen, nothing missed"[:300]
                )
            return True
        return False

    def follow(kind: str, list_fn: Any, on_event: Any, ns: str, **kw: Any) -> Any:
        """List, then watch from the list's resourceVersion until stop, as client-go's
        reflector does: list_fn's objects and events in `ns` handed to on_event.

        Each stream ends after 1 s (so `stop` is seen) and the next resumes from the last
        watched event's resourceVersion, so the API server replays what happened between two
        streams: a pod evicted and removed there (kwok removes it at once) is still seen going
        (issue 54, flake e2e-02: a positive round's replacement had no Ready latency). The
        resume point is the list's resourceVersion or a watched event's, never a listed
        object's own (when that object last changed: resuming there replayed history from
        before the round into it). A listing (the first, and after a break, a refusal or an
        expired resume point) hands every object over as ADDED with its listing's number
        (`unseen_deletions` reads them).
        """

        def loop() -> None:
            w = watch.Watch()
            watches.append(w)
            rec.watches[kind] = w
            last: dict[str, str] = {}  # name -> resourceVersion, as the last event left it
            fn = getattr(list_fn, "__name__", "watch")
            streams = 0  # listings so far
            resume: str | None = None  # where the next stream starts; None: list first
            noted_expiry = False

            def seen(ev: dict[str, Any]) -> None:
                meta = ev["object"].metadata
                if ev["type"] == "DELETED":
                    last.pop(meta.name, None)
                else:
                    last[meta.name] = meta.resource_version
                on_event(ev)

            while not stop.is_set():
                delivered = False
                try:
                    if resume is None:
                        listed = list_fn(ns, **kw)
                        streams += 1
                        for obj in listed.items:
                            seen({"type": "ADDED", "object": obj, "stream": streams})
                        resume = listed.metadata.resource_version
                        if stop.is_set():
                            break
                    for ev in w.stream(
                        list_fn, ns, timeout_seconds=1, resource_version=resume, **kw
                    ):
                        if ev["type"] == "ERROR":  # e.g. 410: the resume point expired
                            code = (ev.get("raw_object") or {}).get("code")
                            raise (
                                _Expired(str(code))
                                if code == GONE
                                else RuntimeError(f"watch error event: {ev.get('raw_object')}")
                            )
                        delivered = True
                        ev["stream"] = None  # watched, not listed
                        if ev["object"].metadata.resource_version:
                            resume = ev["object"].metadata.resource_version
                        seen(ev)
                        if stop.is_set():
                            break
                except Exception as exc:  # resumed until stop, but never unseen
                    resume = None  # the next pass lists again
                    if stop.is_set():
                        break
                    if isinstance(exc, _Expired) or getattr(exc, "status", None) == GONE:
                        # the resume point left the API server's watch cache: list again,
                        # and a pod gone meanwhile is missing from that listing
                        if not noted_expiry:
                            noted_expiry = True
                            rec.watch_notes.append(
                                f"{kind} watch resumed by listing ({fn}): HTTP {GONE}"[:300]
                            )
                        continue
                    if not delivered and _transient(exc):
                        if refused_open(kind, fn, exc, list_fn, ns, last):
                            continue
                    else:
                        broke(kind, fn, exc)
                    if stop.wait(0.2):
                        break

        return loop

    def on_pod(ev: dict[str, Any]) -> None:
        info = PodInfo.of(ev["object"])
        rec.pod_events.append(
            {"t": time.monotonic(), "type": ev["type"], "stream": ev.get("stream"), **info.__dict__}
        )

    def on_pdb(ev: dict[str, Any]) -> None:
        s = ev["object"].status
        if s is None or s.disruptions_allowed is None:
            return
        t = time.monotonic()
        status = (t, s.current_healthy or 0, s.desired_healthy or 0, s.disruptions_allowed)
        meta = ev["object"].metadata
        rec.pdb_allowed.append((t, s.disruptions_allowed))
        rec.pdb_statuses.append(status)
        rec.pdb_by_name.setdefault(f"{meta.namespace}/{meta.name}", []).append(status)

    namespaces = [namespace] if isinstance(namespace, str) else list(namespace)
    loops = []
    for i, ns in enumerate(namespaces):
        at = "" if i == 0 else f"@{ns}"  # the lab's main namespace keeps the plain kind
        loops.append(follow(f"pods{at}", cluster.core.list_namespaced_pod, on_pod, ns))
        pdb_list = cluster.policy.list_namespaced_pod_disruption_budget
        loops.append(follow(f"pdb{at}", pdb_list, on_pdb, ns))
    threads = [threading.Thread(target=f, daemon=True) for f in loops]
    for t in threads:
        t.start()
    entry = (namespaces[0], rec)
    LIVE_WATCHES.append(entry)  # a fault injector reaches it there (kube.live_watches)
    try:
        yield rec
    finally:
        LIVE_WATCHES.remove(entry)
        stop.set()
        for w in watches:
            w.stop()
        # A stream blocks until its next event or its 1 s timeoutSeconds: each open one is
        # cut, so its thread sees `stop` now instead of up to a second later (a fidelity
        # twin's round pays this before its real round). After a signal (the API server may
        # be dead) the daemon threads get a short shared budget: nothing reads them any more.
        for kind in list(rec.watches):
            rec.disconnect(kind)

        deadline = time.monotonic() + (0.2 if interrupts.interrupted() else 2.0 * len(threads))
        for t in threads:
            t.join(timeout=max(0.0, min(2.0, deadline - time.monotonic())))
