"""Watching the lab during a round: pod and PDB events as a reviewer would see with `-w`.

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

from pytest_desched.lab.snapshot import PodInfo

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pytest_desched.providers.base import Cluster


@dataclass
class Recorder:
    """Watches the lab's pods and PDB during a round: what a reviewer would see with `-w`."""

    pod_events: list[dict[str, Any]] = field(default_factory=list)
    pdb_allowed: list[tuple[float, int]] = field(default_factory=list)
    # Every observed PDB status: (t, currentHealthy, desiredHealthy, disruptionsAllowed).
    pdb_statuses: list[tuple[float, int, int, int]] = field(default_factory=list)
    watch_errors: list[str] = field(default_factory=list)  # a gap in what was observed

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


@contextmanager
def record_lab(cluster: Cluster, namespace: str, app: str) -> Iterator[Recorder]:
    """Watch `app`'s pods and PDB in `namespace` in the background while the block runs."""
    from kubernetes import watch

    rec = Recorder()
    stop = threading.Event()
    watches: list[watch.Watch] = []

    def follow(list_fn: Any, on_event: Any, **kw: Any) -> Any:
        """A watch resumed until stop: list_fn's events handed to on_event."""

        def loop() -> None:
            w = watch.Watch()
            watches.append(w)
            while not stop.is_set():
                try:
                    for ev in w.stream(list_fn, namespace, timeout_seconds=1, **kw):
                        on_event(ev)
                        if stop.is_set():
                            break
                except Exception as exc:  # resumed until stop, but never unseen
                    if stop.is_set():
                        break
                    rec.watch_errors.append(
                        f"{getattr(list_fn, '__name__', 'watch')}: {exc!r}"[:300]
                    )
                    if stop.wait(0.2):
                        break

        return loop

    def on_pod(ev: dict[str, Any]) -> None:
        info = PodInfo.of(ev["object"])
        rec.pod_events.append({"t": time.monotonic(), "type": ev["type"], **info.__dict__})

    def on_pdb(ev: dict[str, Any]) -> None:
        s = ev["object"].status
        if s is None or s.disruptions_allowed is None or ev["object"].metadata.name != app:
            return
        t = time.monotonic()
        rec.pdb_allowed.append((t, s.disruptions_allowed))
        rec.pdb_statuses.append(
            (t, s.current_healthy or 0, s.desired_healthy or 0, s.disruptions_allowed)
        )

    pods = follow(cluster.core.list_namespaced_pod, on_pod, label_selector=f"app={app}")
    pdbs = follow(cluster.policy.list_namespaced_pod_disruption_budget, on_pdb)
    threads = [threading.Thread(target=f, daemon=True) for f in (pods, pdbs)]
    for t in threads:
        t.start()
    try:
        yield rec
    finally:
        stop.set()
        for w in watches:
            w.stop()
        for t in threads:
            t.join(timeout=2)
