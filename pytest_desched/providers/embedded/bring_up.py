"""Bring-up pieces: kwokctl's create command line, and work run beside it in a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from pytest_desched.tools.resources import manifest_path

T = TypeVar("T")
# The API clients a session uses right after bring-up (Cluster.core, apps, batch, policy).
API_CLASSES = ("CoreV1Api", "AppsV1Api", "BatchV1Api", "PolicyV1Api")


class Stop(threading.Event):
    """Set when the caller is done; `unless_set` runs a step only while it is not, atomically."""

    def __init__(self) -> None:
        super().__init__()
        self._gate = threading.Lock()

    def unless_set(self, step: Callable[[], T]) -> T | None:
        """`step()` unless the caller is done; once `close()` returned, no step starts."""
        with self._gate:
            return None if self.is_set() else step()

    def close(self) -> None:
        """Set, after any step in flight (`unless_set`) ended."""
        with self._gate:
            self.set()


class Beside(Generic[T]):
    """Runs `work(stop)` in a daemon thread at once; `stop` is set when the caller is done.

    The caller's own work stays in the calling thread, so a Ctrl-C there interrupts it as
    before (a subprocess it waits on is killed); `join` then hands back the side's result, or
    raises the side's exception in the caller. `abandon` (the caller failed or was
    interrupted) does not wait for the side's own slow work (imports): it only makes sure
    no step the side gates with `stop.unless_set` (a process start) begins after it.
    """

    def __init__(self, work: Callable[[Stop], T], name: str) -> None:
        self.stop = Stop()
        self._result: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[Stop], T]) -> None:
        try:
            self._result = work(self.stop)
        except BaseException as exc:  # handed to the caller at join
            self._error = exc

    def join(self) -> T | None:
        """Tell the side the caller is done, wait for it, and return (or raise) its outcome."""
        self.stop.close()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def abandon(self) -> None:
        """The caller gives up: no gated step starts from now on; the thread is not waited for."""
        self.stop.close()


def preload_api_client() -> None:
    """Import the kubernetes client and build the API classes a session uses first."""
    from kubernetes import client

    import pytest_desched.kube  # heavy: the kubernetes client, preloaded off the main thread  # noqa: F401

    for api in API_CLASSES:  # kubernetes 37 builds each API's models on first use (seconds)
        getattr(client, api)


def kubeconfig_written(path: Path) -> bool:
    """kwokctl has written the cluster's kubeconfig whole (the kubelet then can load it)."""
    import yaml

    try:
        return bool((yaml.safe_load(path.read_text()) or {}).get("current-context"))
    except (OSError, yaml.YAMLError, AttributeError):
        return False


def kwokctl_create_args(
    name: str, bins: Mapping[str, Path], wait_s: int, annotation: str, ports: Path
) -> list[str]:
    """`kwokctl create cluster` as the embedded provider runs it (binary runtime, our tools);
    `ports`: the KwokctlConfiguration holding the ports chosen for it (ports.py)."""
    return [
        "create",
        "cluster",
        "--name",
        name,
        "--runtime",
        "binary",
        "--kubeconfig",
        "",
        "-c",
        str(manifest_path("kwok-stages.yaml")),
        "-c",
        str(ports),
        "--kube-apiserver-binary",
        str(bins["kube-apiserver"]),
        "--kube-controller-manager-binary",
        str(bins["kube-controller-manager"]),
        "--kube-scheduler-binary",
        str(bins["kube-scheduler"]),
        "--kwok-controller-binary",
        str(bins["kwok"]),
        "--etcd-binary",
        str(bins["etcd"]),
        # kube-controller-manager at its default 20 QPS needs ~5 s to empty a namespace
        "--disable-qps-limits",
        # kwok's Logs objects let `kubectl logs` read a finished round pod's output
        "--enable-crds=Logs",
        # the API server's own record of every eviction request (pytest_desched.providers.audit_log);
        # kwokctl writes it to <cluster>/logs/audit.log
        "--kube-audit-policy",
        str(manifest_path("audit-policy.yaml")),
        # kwok manages only nodes carrying KWOK_NODE_ANNOTATION (every node made here
        # does), not all nodes: taking the annotation off stops that node's heartbeat,
        # so a fault can hold it NotReady (kwok's node-initialize Stage would re-ready a
        # node it manages at once). See providers/embedded/faults.py.
        "--extra-args",
        "kwok-controller=manage-all-nodes=false",
        "--extra-args",
        f"kwok-controller=manage-nodes-with-annotation-selector={annotation}=fake",
        "--wait",
        f"{wait_s}s",
    ]
