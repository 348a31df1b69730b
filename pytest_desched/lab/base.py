"""What every `Lab` step stands on: the lab's state, its namespaces, its PDB and what it observes.

The steps themselves live in mixins beside it (`nodes`, `objects`, `teardown`); `lab.Lab`
puts them together and turns an API error leaving a public step into a `LabApiError`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import watch_until
from pytest_desched.lab.inputs import (
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
    POOL_VALUE,
    check_namespace,
)
from pytest_desched.lab.recorder import Recorder, record_lab
from pytest_desched.lab.snapshot import PodInfo, Snapshot
from pytest_desched.lab.values import DEFAULT_IMAGE, check_labels

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pytest_desched.providers.base import Cluster


LAB_LABEL = "desched.pytest.io/lab"  # on cluster-scoped objects: the lab namespace that made them
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # the node controller's, for a cordon
# Controllers deleted before the namespace, so none of them recreates a pod while it goes.
CONTROLLERS = (
    ("apps", "delete_collection_namespaced_deployment"),
    ("apps", "delete_collection_namespaced_stateful_set"),
    ("apps", "delete_collection_namespaced_daemon_set"),
    ("apps", "delete_collection_namespaced_replica_set"),
    ("core", "delete_collection_namespaced_replication_controller"),
    ("batch", "delete_collection_namespaced_job"),
)


def api_message(exc: ApiException) -> tuple[str, str]:
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


def ignore_404(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), or None when the object is already gone (404)."""
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def owner_kind(pod: Any) -> str | None:
    """The kind of a pod's first owner (None for a bare pod), named in teardown's messages."""
    owners = pod.metadata.owner_references or []
    return owners[0].kind if owners else None


def pods_seen(s: Snapshot) -> str:
    """A snapshot's pods in one line, for a wait's timeout message."""
    return str([(p.name, p.node, p.phase, p.ready, p.deleting) for p in s.pods])


def taint_dicts(node: Any) -> list[dict[str, Any]]:
    """A node's taints as the API's dicts (empty fields left out), ready to patch back."""
    return [
        {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v}
        for t in (node.spec.taints or [])
    ]


class LabBase:
    """The lab's state and the steps every other one uses (namespaces, PDB, observation)."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str = "descheduler-lab",
        app: str = "spread-demo",
        replicas: int = 3,
        image: str = DEFAULT_IMAGE,
        timeout: float = 60,
        pool: str = POOL_VALUE,
    ) -> None:
        self.cluster = cluster
        # The pool label's value this lab's pods require: labs running side by side (lanes)
        # each have their own, so no replacement can land on another lab's nodes.
        self.pool = pool
        self.namespace = namespace
        self.app = app
        self.replicas = replicas
        self.image = image
        self.timeout = timeout
        self._labelled: dict[str, str | None] = {}  # node -> original value of POOL_LABEL
        self._node_labels: dict[str, dict[str, str | None]] = {}  # node -> key -> original
        self._node_specs: dict[str, dict[str, Any]] = {}  # node -> original taints/cordon
        self._objects: list[tuple[str, str | None, str]] = []  # (kind, namespace, name)
        self._extra_namespaces: list[str] = []  # created by `apply` for objects elsewhere
        self.created_namespace = False
        # How long teardown waits for pods to go before deleting a namespace that still has
        # some (an owner kind it does not know may be recreating them; see delete_namespace).
        self.pod_settle_s = 5.0
        check_namespace(namespace)  # a bad name fails here, before any cluster change
        check_labels("Lab(pool=...)", {POOL_LABEL: pool})

    @property
    def namespaces(self) -> list[str]:
        """Every namespace this lab owns: its own first."""
        return [self.namespace, *self._extra_namespaces]

    # -- namespace ---------------------------------------------------------
    def create_namespace(self, name: str | None = None) -> None:
        ns = name or self.namespace
        body = {"metadata": {"name": ns, "labels": {MANAGED_BY: MANAGER}}}
        reaper = getattr(self.cluster, "namespace_reaper", None)  # a unit test's double: none
        if reaper is not None and reaper.is_pending(
            ns
        ):  # an earlier lab's, deleted in the background: let it go
            reaper.wait_gone([ns], self.timeout)
        try:
            self.cluster.core.create_namespace(body)
        except ApiException as exc:
            if exc.status == 409:
                raise RuntimeError(
                    f"namespace {ns} already exists; pytest-desched only uses namespaces it "
                    f"creates. Delete it or pick another with --desched-namespace"
                ) from None
            raise
        if ns == self.namespace:
            self.created_namespace = True
        else:
            self._extra_namespaces.append(ns)

    def _ensure_namespace(self, ns: str) -> None:
        if ns == self.namespace and not self.created_namespace:
            self.create_namespace()
        elif ns != self.namespace and ns not in self._extra_namespaces:
            self.create_namespace(ns)

    # -- PDB ---------------------------------------------------------------
    def create_pdb(self, min_available: int = 2) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": self.app},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": self.app}}},
        }
        self.cluster.policy.create_namespaced_pod_disruption_budget(self.namespace, body)
        self._objects.append(("PodDisruptionBudget", self.namespace, self.app))

    def patch_pdb(self, min_available: int) -> None:
        self.cluster.policy.patch_namespaced_pod_disruption_budget(
            self.app, self.namespace, {"spec": {"minAvailable": min_available}}
        )

    @staticmethod
    def _pdb_dict(p: Any) -> dict[str, Any]:
        s, sel = p.status, p.spec.selector
        return {
            "name": p.metadata.name,
            "namespace": p.metadata.namespace,
            # which pods it selects, in the API's own form (None: it selects none)
            "selector": (
                {
                    "matchLabels": dict(sel.match_labels or {}),
                    "matchExpressions": [
                        {"key": e.key, "operator": e.operator, "values": list(e.values or [])}
                        for e in sel.match_expressions or []
                    ],
                }
                if sel is not None
                else None
            ),
            "minAvailable": p.spec.min_available,
            "disruptionsAllowed": s.disruptions_allowed if s else None,
            "currentHealthy": s.current_healthy if s else None,
            "desiredHealthy": s.desired_healthy if s else None,
            "expectedPods": s.expected_pods if s else None,
            "observedGeneration": s.observed_generation if s else None,
            "generation": p.metadata.generation,
        }

    def pdb_status(self) -> dict[str, Any] | None:
        try:
            p = self.cluster.policy.read_namespaced_pod_disruption_budget(self.app, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self._pdb_dict(p)

    def wait_pdb(self, disruptions_allowed: int, timeout: float | None = None) -> dict[str, Any]:
        """Wait until the disruption controller has observed the PDB and reports this value."""

        def status(budgets: list[Any]) -> dict[str, Any] | None:
            return self._pdb_dict(budgets[0]) if budgets else None

        def ok(s: dict[str, Any] | None) -> bool:
            return (
                s is not None
                and s["observedGeneration"] == s["generation"]
                and s["disruptionsAllowed"] == disruptions_allowed
            )

        budgets = watch_until(
            f"PDB {self.namespace}/{self.app} disruptionsAllowed={disruptions_allowed}",
            self.cluster.policy.list_namespaced_pod_disruption_budget,
            lambda budgets: ok(status(budgets)),
            timeout or self.timeout,
            lambda budgets: repr(status(budgets)),
            self.namespace,
            field_selector=f"metadata.name={self.app}",
        )
        return status(budgets)  # type: ignore[return-value]

    # -- observation -------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Every pod of the lab's namespaces; the PDB is the runbook's, else the lab's only one."""
        pods = [
            p for ns in self.namespaces for p in self.cluster.core.list_namespaced_pod(ns).items
        ]
        pdb = self.pdb_status()
        if pdb is None and self.created_namespace:
            budgets = self.cluster.policy.list_namespaced_pod_disruption_budget(
                self.namespace
            ).items
            pdb = self._pdb_dict(budgets[0]) if len(budgets) == 1 else None
        return Snapshot(
            time.monotonic(),
            sorted((PodInfo.of(p) for p in pods), key=lambda p: (p.namespace, p.name)),
            pdb,
        )

    def events(self) -> list[dict[str, Any]]:
        out = []
        for ns in self.namespaces:
            for e in self.cluster.core.list_namespaced_event(ns).items:
                out.append(
                    {
                        "event": e.metadata.name,
                        "reason": e.reason,
                        "type": e.type,
                        "kind": e.involved_object.kind,
                        "name": e.involved_object.name,
                        "uid": e.involved_object.uid,
                        "count": e.count,
                        "source": (
                            e.reporting_component or (e.source.component if e.source else None)
                        ),
                        "action": e.action,
                        "message": e.message,
                    }
                )
        return out

    def record(self) -> AbstractContextManager[Recorder]:
        """Watch every pod and PDB of the lab in the background for the duration of the block."""
        return record_lab(self.cluster, self.namespaces, self.app)
