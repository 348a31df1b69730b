"""The lab: namespace, node labels, the spread-demo workload, its PDB, snapshots and a recorder.

A small public API so users write their own experiments the way the built-in ones are
written: every method does one runbook step and waits on the API for its effect.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.errors import (
    LabApiError,
    LabInputError,
)
from pytest_desched.kube import WaitTimeout, pod_ready, wait_for

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pytest_desched.providers.base import Cluster

POOL_LABEL = "descheduler.example.com/pool"
POOL_VALUE = "rebalance-lab"
OPT_IN_LABEL = "descheduler.example.com/enabled"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "pytest-desched"
# Namespaces a lab must never be: the cluster's own, and `kube-` is reserved for Kubernetes.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def check_namespace(name: Any, release_namespace: str | None = None) -> str:
    """The lab namespace if it is one a lab may create; LabInputError naming the fix if not."""
    fix = "pick another with --desched-namespace (or namespace=...)"
    if not isinstance(name, str) or not name:
        raise LabInputError(f"lab namespace {name!r} must be a non-empty string; {fix}")
    reserved = {*RESERVED_NAMESPACES, *([release_namespace] if release_namespace else [])}
    if name in reserved or name.startswith("kube-"):
        raise LabInputError(
            f"lab namespace {name!r} is reserved ({', '.join(sorted(reserved))}, kube-*; the "
            f"release lives in {release_namespace or 'kube-system'}) and a lab deletes its "
            f"namespace afterwards; {fix}"
        )
    if len(name) > 63:
        raise LabInputError(
            f"lab namespace {name[:20]!r}... is {len(name)} characters; a namespace name has at "
            f"most 63 (RFC 1123 label); {fix}"
        )
    if not _DNS1123_LABEL.fullmatch(name):
        raise LabInputError(
            f"lab namespace {name!r} is not a valid RFC 1123 label (lower-case letters, digits "
            f"and '-', starting and ending with a letter or digit); {fix}"
        )
    return name


def check_lab_inputs(
    workers: Sequence[str],
    *,
    namespace: Any,
    source: Any,
    target: Any,
    replicas: Any,
    release_namespace: str | None = None,
) -> tuple[str, str, str, int]:
    """Every input of an experiment's lab checked at once, before any cluster change.

    Returns (namespace, source, target, replicas); LabInputError names the input and the fix.
    """
    ns = check_namespace(namespace, release_namespace)
    for what, node in (("source", source), ("target", target)):
        if node not in workers:
            raise LabInputError(
                f"{what} node {node!r} is not a lab worker of this cluster; use one of "
                f"{list(workers)}"
            )
    if source == target:
        raise LabInputError(f"source and target nodes must differ (both {source!r})")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise LabInputError(f"replicas must be an integer >= 1, got {replicas!r}")
    return ns, source, target, replicas


def _api_message(exc: ApiException) -> tuple[str, str]:
    """(kind/name, message) from the API server's Status body; never the HTTP headers."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    if not isinstance(body, dict):
        return "", ""
    details = body.get("details") or {}
    obj = "/".join(str(details[k]) for k in ("kind", "name") if details.get(k))
    return obj, str(body.get("message") or "")[:300]


@dataclass(frozen=True)
class PodInfo:
    name: str
    uid: str
    node: str | None
    phase: str
    ready: bool
    owner: str | None  # ReplicaSet name: a changed owner means a rollout happened
    deleting: bool
    start_time: str | None

    @classmethod
    def of(cls, p: Any) -> PodInfo:
        owners = p.metadata.owner_references or []
        return cls(
            name=p.metadata.name,
            uid=p.metadata.uid,
            node=p.spec.node_name,
            phase=p.status.phase if p.status else "Unknown",
            ready=pod_ready(p),
            owner=owners[0].name if owners else None,
            deleting=p.metadata.deletion_timestamp is not None,
            start_time=p.status.start_time.isoformat()
            if p.status and p.status.start_time
            else None,
        )


@dataclass
class Snapshot:
    """Pods (UID, node, Ready, owner) and PDB status at one instant."""

    at: float
    pods: list[PodInfo]
    pdb: dict[str, Any] | None = None

    @property
    def uids(self) -> set[str]:
        return {p.uid for p in self.pods}

    @property
    def live(self) -> list[PodInfo]:
        return [p for p in self.pods if not p.deleting]

    def by_node(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.live:
            out[p.node or "<unscheduled>"] = out.get(p.node or "<unscheduled>", 0) + 1
        return out

    def pending(self) -> list[PodInfo]:
        return [p for p in self.live if p.phase == "Pending" or p.node is None]

    def ready(self) -> list[PodInfo]:
        return [p for p in self.live if p.ready]

    def owners(self) -> set[str | None]:
        return {p.owner for p in self.live}

    def to_dict(self) -> dict[str, Any]:
        return {
            "pods": [p.__dict__ for p in self.pods],
            "pdb": self.pdb,
            "by_node": self.by_node(),
        }


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


class Lab:
    """One lab namespace and the node labels it set; `teardown` undoes exactly those."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str = "descheduler-lab",
        app: str = "spread-demo",
        replicas: int = 3,
        image: str = "registry.k8s.io/pause:3.10",
        timeout: float = 60,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.app = app
        self.replicas = replicas
        self.image = image
        self.timeout = timeout
        self._labelled: dict[str, str | None] = {}  # node -> original value of POOL_LABEL
        self.created_namespace = False
        check_namespace(namespace)  # a bad name fails here, before any cluster change

    # -- namespace ---------------------------------------------------------
    def create_namespace(self) -> None:
        body = {"metadata": {"name": self.namespace, "labels": {MANAGED_BY: MANAGER}}}
        try:
            self.cluster.core.create_namespace(body)
        except ApiException as exc:
            if exc.status == 409:
                raise RuntimeError(
                    f"namespace {self.namespace} already exists; pytest-desched only uses namespaces it "
                    f"creates. Delete it or pick another with --desched-namespace"
                ) from None
            raise
        self.created_namespace = True

    # -- node labels -------------------------------------------------------
    def _node_label(self, node: str) -> str | None:
        return (self.cluster.core.read_node(node).metadata.labels or {}).get(POOL_LABEL)

    def label_node(self, node: str, value: str = POOL_VALUE) -> None:
        self._labelled.setdefault(node, self._node_label(node))
        self.cluster.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: value}}})

    def unlabel_node(self, node: str) -> None:
        self._labelled.setdefault(node, self._node_label(node))
        self.cluster.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: None}}})

    def labelled_nodes(self) -> list[str]:
        return sorted(
            n.metadata.name
            for n in self.cluster.core.list_node(label_selector=f"{POOL_LABEL}={POOL_VALUE}").items
        )

    # -- workload ----------------------------------------------------------
    def deployment_manifest(self, affinity: bool = True) -> dict[str, Any]:
        """The runbook's spread-demo: pause pods, opt-in label, required affinity to the pool."""
        labels = {"app": self.app, OPT_IN_LABEL: "true"}
        spec: dict[str, Any] = {
            "containers": [{"name": "pause", "image": self.image}],
            "terminationGracePeriodSeconds": 30,
        }
        if affinity:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": POOL_LABEL, "operator": "In", "values": [POOL_VALUE]}
                                ]
                            }
                        ]
                    }
                }
            }
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.app, "labels": {"app": self.app, OPT_IN_LABEL: "true"}},
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": {"app": self.app}},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        }

    def deploy(self, affinity: bool = True) -> Snapshot:
        self.cluster.apps.create_namespaced_deployment(
            self.namespace, self.deployment_manifest(affinity)
        )
        return self.wait_ready(self.replicas)

    def wait_ready(
        self, n: int, timeout: float | None = None, exclude: set[str] | None = None
    ) -> Snapshot:
        """Wait until exactly n live pods are Ready and none is Pending or terminating."""
        exclude = exclude or set()

        def ok(s: Snapshot) -> bool:
            live = [p for p in s.live if p.uid not in exclude]
            return len(s.ready()) == n and len(live) == n and not s.pending() and len(s.pods) == n

        return wait_for(
            f"{n} Ready {self.app} pods in {self.namespace}",
            self.snapshot,
            ok,
            timeout or self.timeout,
            describe=lambda s: str(
                [(p.name, p.node, p.phase, p.ready, p.deleting) for p in s.pods]
            ),
        )

    def replica_set_generation(self) -> tuple[int, int]:
        d = self.cluster.apps.read_namespaced_deployment(self.app, self.namespace)
        return d.metadata.generation, d.status.observed_generation or 0

    # -- PDB ---------------------------------------------------------------
    def create_pdb(self, min_available: int = 2) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": self.app},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": self.app}}},
        }
        self.cluster.policy.create_namespaced_pod_disruption_budget(self.namespace, body)

    def patch_pdb(self, min_available: int) -> None:
        self.cluster.policy.patch_namespaced_pod_disruption_budget(
            self.app, self.namespace, {"spec": {"minAvailable": min_available}}
        )

    def pdb_status(self) -> dict[str, Any] | None:
        try:
            p = self.cluster.policy.read_namespaced_pod_disruption_budget(self.app, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        s = p.status
        return {
            "minAvailable": p.spec.min_available,
            "disruptionsAllowed": s.disruptions_allowed if s else None,
            "currentHealthy": s.current_healthy if s else None,
            "desiredHealthy": s.desired_healthy if s else None,
            "expectedPods": s.expected_pods if s else None,
            "observedGeneration": s.observed_generation if s else None,
            "generation": p.metadata.generation,
        }

    def wait_pdb(self, disruptions_allowed: int, timeout: float | None = None) -> dict[str, Any]:
        """Wait until the disruption controller has observed the PDB and reports this value."""
        return wait_for(
            f"PDB {self.namespace}/{self.app} disruptionsAllowed={disruptions_allowed}",
            self.pdb_status,
            lambda s: (
                s is not None
                and s["observedGeneration"] == s["generation"]
                and s["disruptionsAllowed"] == disruptions_allowed
            ),
            timeout or self.timeout,
        )

    # -- observation -------------------------------------------------------
    def snapshot(self) -> Snapshot:
        pods = self.cluster.core.list_namespaced_pod(
            self.namespace, label_selector=f"app={self.app}"
        ).items
        return Snapshot(
            time.monotonic(),
            sorted((PodInfo.of(p) for p in pods), key=lambda p: p.name),
            self.pdb_status(),
        )

    def events(self) -> list[dict[str, Any]]:
        out = []
        for e in self.cluster.core.list_namespaced_event(self.namespace).items:
            out.append(
                {
                    "reason": e.reason,
                    "type": e.type,
                    "kind": e.involved_object.kind,
                    "name": e.involved_object.name,
                    "uid": e.involved_object.uid,
                    "count": e.count,
                    "source": (e.reporting_component or (e.source.component if e.source else None)),
                    "action": e.action,
                    "message": e.message,
                }
            )
        return out

    @contextmanager
    def record(self) -> Iterator[Recorder]:
        """Watch pods and the PDB in the background for the duration of the block."""
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
                        for ev in w.stream(list_fn, self.namespace, timeout_seconds=1, **kw):
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
            if s is None or s.disruptions_allowed is None or ev["object"].metadata.name != self.app:
                return
            t = time.monotonic()
            rec.pdb_allowed.append((t, s.disruptions_allowed))
            rec.pdb_statuses.append(
                (t, s.current_healthy or 0, s.desired_healthy or 0, s.disruptions_allowed)
            )

        pods = follow(
            self.cluster.core.list_namespaced_pod, on_pod, label_selector=f"app={self.app}"
        )
        pdbs = follow(self.cluster.policy.list_namespaced_pod_disruption_budget, on_pdb)
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

    # -- teardown ----------------------------------------------------------
    def restore_labels(self) -> list[str]:
        restored = []
        for node, original in self._labelled.items():
            try:
                self.cluster.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: original}}})
                restored.append(node)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self._labelled.clear()
        return restored

    def delete_namespace(self, timeout: float = 60) -> None:
        if not self.created_namespace:
            return
        # Remove the workload first, pods without grace: the namespace controller otherwise
        # waits out the pods' 30 s grace period before it finalizes the namespace.
        try:
            self.cluster.apps.delete_collection_namespaced_deployment(self.namespace)
            self.cluster.core.delete_collection_namespaced_pod(
                self.namespace, grace_period_seconds=0
            )
            wait_for(
                f"pods in {self.namespace} gone",
                lambda: self.cluster.core.list_namespaced_pod(self.namespace).items,
                lambda items: not items,
                timeout,
                describe=lambda items: str([p.metadata.name for p in items]),
            )
            self.cluster.core.delete_namespace(self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

        def gone() -> bool:
            try:
                self.cluster.core.read_namespace(self.namespace)
                return False
            except ApiException as exc:
                return exc.status == 404

        try:
            wait_for(f"namespace {self.namespace} deleted", gone, bool, timeout)
        except WaitTimeout:
            raise
        self.created_namespace = False

    def teardown(self) -> None:
        """Reverse ownership order: the namespace (waited for), then the node labels."""
        try:
            self.delete_namespace()
        finally:
            self.restore_labels()


def _short_api_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Re-raise an ApiException leaving a Lab step as a LabApiError (object, status, reason)."""

    @functools.wraps(method)
    def wrapper(self: Lab, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ApiException as exc:
            obj, message = _api_message(exc)
            where = obj or f"namespace {self.namespace}"
            raise LabApiError(
                f"Lab.{method.__name__}", where, exc.status, str(exc.reason or ""), message
            ) from None

    return wrapper


# Every public step, but not `record` (a context manager: its body is the caller's code).
for _name, _fn in list(vars(Lab).items()):
    if callable(_fn) and not _name.startswith("_") and _name != "record":
        setattr(Lab, _name, _short_api_errors(_fn))
del _name, _fn
