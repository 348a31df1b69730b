"""The `Lab` class: one namespace, its node labels, the spread-demo workload and its PDB.

A small public API so users write their own experiments the way the built-in ones are
written: every method does one runbook step and waits on the API for its effect, and an
API error leaving a step is re-raised as a short `LabApiError`. Input checks, snapshots and
the watch recorder are their own modules; `Lab` ties them to one cluster and namespace.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.errors import LabApiError
from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.lab.inputs import (
    MANAGED_BY,
    MANAGER,
    OPT_IN_LABEL,
    POOL_LABEL,
    POOL_VALUE,
    check_namespace,
)
from pytest_desched.lab.recorder import Recorder, record_lab
from pytest_desched.lab.snapshot import PodInfo, Snapshot

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pytest_desched.providers.base import Cluster


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

    def record(self) -> AbstractContextManager[Recorder]:
        """Watch pods and the PDB in the background for the duration of the block."""
        return record_lab(self.cluster, self.namespace, self.app)

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
