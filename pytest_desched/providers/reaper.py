"""Lab namespaces deleted off the critical path, and the final scan that waits for them.

kube-controller-manager's namespace controller waits 5 s (namespaceDeletionGracePeriod, not
configurable) before it empties a deleted namespace, so an experiment that waited for its
namespace spent most of its teardown there. A lab in background mode makes its namespace
Terminating (from then on the API server refuses new objects in it, so no controller can
bring a pod back), force-deletes its pods, and hands the namespace to its cluster's reaper.
The session's final scan (`wait_all`) waits for every namespace handed over to be gone and
fails, naming each one left and what it still holds, if one is not. It runs on clusters
that stay (kept, kind, existing); a discarded embedded cluster's checked deletion is the
proof instead (session._close).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pytest_desched.errors import WaitTimeout
from pytest_desched.kube import watch_until

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster


class NamespacesLeft(RuntimeError):
    """The final scan found lab namespaces that were deleted but never went away."""


class NamespaceReaper:
    """The namespaces a cluster's labs deleted without waiting; thread-safe."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._pending: dict[str, float] = {}  # namespace -> time.monotonic() of its deletion
        self._lock = threading.Lock()
        self.gone: list[str] = []  # confirmed gone by a scan, in the order handed over
        # The final scan's limit: the namespace controller's 5 s delay plus its work, with room.
        self.timeout = 60.0

    def hand_over(self, namespaces: Iterable[str]) -> None:
        with self._lock:
            for ns in namespaces:
                self._pending.setdefault(ns, time.monotonic())

    @property
    def pending(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def is_pending(self, namespace: str) -> bool:
        with self._lock:
            return namespace in self._pending

    def wait_gone(self, namespaces: Iterable[str], timeout: float | None = None) -> None:
        """Watch until none of `namespaces` exists; NamespacesLeft names the rest on timeout."""
        wanted = set(namespaces)
        if not wanted:
            return
        timeout = self.timeout if timeout is None else timeout

        def left(items: list[Any]) -> list[str]:
            return sorted(n.metadata.name for n in items if n.metadata.name in wanted)

        try:
            watch_until(
                f"namespaces {sorted(wanted)} deleted",
                self.cluster.core.list_namespace,
                lambda items: not left(items),
                timeout,
                describe=lambda items: f"still there: {left(items)}",
            )
        except WaitTimeout as exc:
            raise NamespacesLeft(f"{exc}; {self._contents(wanted)}") from None
        with self._lock:
            for ns in sorted(wanted, key=lambda n: self._pending.get(n, 0.0)):
                if self._pending.pop(ns, None) is not None:
                    self.gone.append(ns)

    def wait_all(self, timeout: float | None = None) -> list[str]:
        """The final leftover scan: every namespace handed over is gone, or NamespacesLeft."""
        self.wait_gone(self.pending, timeout)
        return list(self.gone)

    def _contents(self, namespaces: Iterable[str]) -> str:
        """What each namespace still holds (pods and its phase), for the error."""
        parts = []
        for ns in sorted(namespaces):
            try:
                phase = self.cluster.core.read_namespace(ns).status.phase
                pods = [p.metadata.name for p in self.cluster.core.list_namespaced_pod(ns).items]
                parts.append(f"{ns} ({phase}, pods {pods or 'none'})")
            except Exception as exc:  # gone meanwhile, or the API server is the problem
                parts.append(f"{ns} (not readable: {type(exc).__name__})")
        return (
            "left behind: "
            + "; ".join(parts)
            + ". kube-controller-manager's namespace controller empties a deleted namespace; "
            "see its log, or `kubectl get ns -o yaml` for the conditions holding it"
        )
