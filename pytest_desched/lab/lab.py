"""The `Lab` class: namespaces, node changes and workloads one experiment makes, and undoes.

A small public API so users write their own experiments the way the built-in ones are
written: every method does one step and waits on the API for its effect, and an API error
leaving a step is re-raised as a short `LabApiError`. Two levels:

* the runbook's own steps (`deploy`, `label_node`, `create_pdb`, ...) for the one
  `spread-demo` Deployment the runbook experiments move;
* lab objects as values (`apply(Deployment(...), PodDisruptionBudget(...), ...)`, see
  `workloads.py`), node operations (labels, taints, cordon) the lab restores on teardown,
  and status changes a kwok cluster cannot make by itself (a failed pod, restarts).

Snapshots and the round recorder cover every pod of the lab's namespaces. `teardown`
deletes whatever the lab created in dependency order (controllers, namespaces with any
pods force-deleted until the namespace is gone, then PVs and PriorityClasses, then node
changes), so an owner kind it does not know cannot keep it waiting.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.errors import LabApiError
from pytest_desched.kube import WaitTimeout, wait_for, watch_until
from pytest_desched.lab.inputs import (
    MANAGED_BY,
    MANAGER,
    OPT_IN_LABEL,
    POOL_LABEL,
    POOL_VALUE,
    LabConfigError,
    check_namespace,
)
from pytest_desched.lab.recorder import Recorder, record_lab
from pytest_desched.lab.snapshot import WORKLOAD_LABEL, PodInfo, Snapshot
from pytest_desched.lab.workloads import (
    DEFAULT_IMAGE,
    ZONE_KEY,
    DaemonSet,
    Job,
    LabObject,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    StatefulSet,
    Taint,
    Workload,
    _labels,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pytest_desched.providers.base import Cluster

LAB_LABEL = "desched.pytest.io/lab"  # on cluster-scoped objects: the lab namespace that made them
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # the node controller's, for a cordon
# Controllers deleted before the namespace, so none of them recreates a pod while it goes.
_CONTROLLERS = (
    ("apps", "delete_collection_namespaced_deployment"),
    ("apps", "delete_collection_namespaced_stateful_set"),
    ("apps", "delete_collection_namespaced_daemon_set"),
    ("apps", "delete_collection_namespaced_replica_set"),
    ("core", "delete_collection_namespaced_replication_controller"),
    ("batch", "delete_collection_namespaced_job"),
)


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


def _ignore_404(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def _owner_kind(pod: Any) -> str | None:
    owners = pod.metadata.owner_references or []
    return owners[0].kind if owners else None


def _pods_seen(s: Snapshot) -> str:
    return str([(p.name, p.node, p.phase, p.ready, p.deleting) for p in s.pods])


def _taint_dicts(node: Any) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v}
        for t in (node.spec.taints or [])
    ]


class Lab:
    """One lab namespace (and any extra ones), the objects and node changes it made."""

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
        _labels("Lab(pool=...)", {POOL_LABEL: pool})

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

    # -- node changes, each remembered once and restored on teardown --------
    def _node_label(self, node: str) -> str | None:
        return (self.cluster.core.read_node(node).metadata.labels or {}).get(POOL_LABEL)

    def label_node(self, node: str, value: str | None = None) -> None:
        """The runbook's step: put the pool label (this lab's pool by default) on `node`."""
        self._labelled.setdefault(node, self._node_label(node))
        self.cluster.core.patch_node(
            node, {"metadata": {"labels": {POOL_LABEL: value or self.pool}}}
        )

    def unlabel_node(self, node: str) -> None:
        self._labelled.setdefault(node, self._node_label(node))
        self.cluster.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: None}}})

    def labelled_nodes(self) -> list[str]:
        return sorted(
            n.metadata.name
            for n in self.cluster.core.list_node(label_selector=f"{POOL_LABEL}={self.pool}").items
        )

    def set_node_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        """Set (a value) or remove (None) node labels; the originals come back on teardown."""
        what = f"Lab.set_node_labels({node!r})"
        _labels(what, {k: v for k, v in labels.items() if v is not None})
        _labels(what, dict.fromkeys(labels, "x"))  # the keys of removals too
        current = self.cluster.core.read_node(node).metadata.labels or {}
        kept = self._node_labels.setdefault(node, {})
        for k in labels:
            kept.setdefault(k, current.get(k))
        self.cluster.core.patch_node(node, {"metadata": {"labels": dict(labels)}})

    def _remember_spec(self, node: str) -> Any:
        n = self.cluster.core.read_node(node)
        self._node_specs.setdefault(
            node, {"taints": _taint_dicts(n), "unschedulable": bool(n.spec.unschedulable)}
        )
        return n

    def taint(self, node: str, taint: Taint) -> None:
        """Add (or replace, same key and effect) a taint on `node`."""
        if not isinstance(taint, Taint):
            raise LabConfigError(f"Lab.taint({node!r}): {taint!r} is not a Taint; use Taint(...)")
        n = self._remember_spec(node)
        keep = [
            t
            for t in _taint_dicts(n)
            if not (t["key"] == taint.key and t.get("effect") == taint.effect)
        ]
        self.cluster.core.patch_node(node, {"spec": {"taints": [*keep, taint.manifest()]}})

    def untaint(self, node: str, key: str) -> None:
        n = self._remember_spec(node)
        keep = [t for t in _taint_dicts(n) if t["key"] != key]
        self.cluster.core.patch_node(node, {"spec": {"taints": keep or None}})

    def _cordon_taint(self, node: str) -> bool:
        n = self.cluster.core.read_node(node)
        return any(t.key == UNSCHEDULABLE_TAINT for t in n.spec.taints or [])

    def cordon(self, node: str, wait: bool = True) -> None:
        """`kubectl cordon`; waits until the node controller's taint shows it was seen."""
        self._remember_spec(node)
        self.cluster.core.patch_node(node, {"spec": {"unschedulable": True}})
        if wait:
            wait_for(f"node {node} cordoned", lambda: self._cordon_taint(node), bool, self.timeout)

    def uncordon(self, node: str, wait: bool = True) -> None:
        """`kubectl uncordon`; waits until the unschedulable taint is gone again."""
        self._remember_spec(node)
        self.cluster.core.patch_node(node, {"spec": {"unschedulable": None}})
        if wait:
            wait_for(
                f"node {node} schedulable (taint {UNSCHEDULABLE_TAINT} gone)",
                lambda: not self._cordon_taint(node),
                bool,
                self.timeout,
            )

    @contextlib.contextmanager
    def only_on(self, node: str) -> Iterator[None]:
        """Every other worker cordoned while the block runs (placement without pinning)."""
        workers = list(self.cluster.workers)
        if node not in workers:
            raise LabConfigError(
                f"only_on={node!r} is not a worker of this cluster; use one of {workers}"
            )
        others = [w for w in workers if w != node]
        was = {w: bool(self.cluster.core.read_node(w).spec.unschedulable) for w in others}
        try:
            for w in others:
                if not was[w]:
                    self.cordon(w)
            yield
        finally:
            for w in others:
                if not was[w]:
                    self.uncordon(w)

    def topology(self, key: str = ZONE_KEY) -> dict[str, str]:
        """Each worker's value of a topology label (its domain for skew checks)."""
        out = {}
        for n in self.cluster.core.list_node().items:
            if n.metadata.name in self.cluster.workers:
                out[n.metadata.name] = (n.metadata.labels or {}).get(key, "<none>")
        return out

    # -- the runbook's workload ---------------------------------------------
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
                                    {"key": POOL_LABEL, "operator": "In", "values": [self.pool]}
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
        self._objects.append(("Deployment", self.namespace, self.app))
        return self.wait_ready(self.replicas)

    def wait_ready(
        self, n: int, timeout: float | None = None, exclude: set[str] | None = None
    ) -> Snapshot:
        """Wait until exactly n live pods are Ready and none is Pending or terminating."""
        exclude = exclude or set()

        def ok(s: Snapshot) -> bool:
            live = [p for p in s.live if p.uid not in exclude]
            return len(s.ready()) == n and len(live) == n and not s.pending() and len(s.pods) == n

        what = f"{n} Ready pods ({self.app}) in {self.namespace}"
        if self._extra_namespaces:  # pods of several namespaces: no single watch covers them
            return wait_for(what, self.snapshot, ok, timeout or self.timeout, describe=_pods_seen)

        def snap(pods: list[Any]) -> Snapshot:
            infos = sorted((PodInfo.of(p) for p in pods), key=lambda p: (p.namespace, p.name))
            return Snapshot(time.monotonic(), infos, None)

        pods = watch_until(
            what,
            self.cluster.core.list_namespaced_pod,
            lambda pods: ok(snap(pods)),
            timeout or self.timeout,
            lambda pods: _pods_seen(snap(pods)),
            self.namespace,
        )
        done = snap(pods)
        done.pdb = self.pdb_status()
        return done

    def deployment_generation(self) -> int:
        """The Deployment's spec generation: it moves only when its spec (a rollout) changes.

        Not `status.observedGeneration`, which catches up with it whenever the deployment
        controller gets to it (a race with the pods' Ready: the likely cause of one `no-rollout`
        failure in a `make test` loop with UIDs and owners unchanged; not proven, the check's
        detail did not name the generations then).
        """
        d = self.cluster.apps.read_namespaced_deployment(self.app, self.namespace)
        return int(d.metadata.generation or 0)

    def replicasets(self) -> dict[str, str]:
        """The runbook Deployment's ReplicaSets, name -> pod-template-hash.

        A rollout (any change to the pod template) makes a new one, and the old one stays
        (scaled to 0, within revisionHistoryLimit): comparing this set before the label move
        and after the last round catches a rollout at any moment in between.
        """
        out = {}
        for rs in self.cluster.apps.list_namespaced_replica_set(self.namespace).items:
            owners = rs.metadata.owner_references or []
            if any(o.kind == "Deployment" and o.name == self.app for o in owners):
                out[rs.metadata.name] = (rs.metadata.labels or {}).get("pod-template-hash", "")
        return out

    # -- lab objects as values ------------------------------------------------
    def _check_objects(self, objects: Sequence[Any], only_on: str | None) -> None:
        """Every input of `apply`, checked before the first change (LabConfigError)."""
        seen: set[tuple[str, str | None, str]] = set()
        pcs = {o.name for o in objects if isinstance(o, PriorityClass)}
        for o in objects:
            if not isinstance(o, LabObject):
                raise LabConfigError(
                    f"Lab.apply: {o!r} is not a lab object; use Deployment(...), Pod(...), "
                    "PodDisruptionBudget(...), PriorityClass(...) from pytest_desched.lab"
                )
            ns = None if isinstance(o, PriorityClass) else (o.namespace or self.namespace)
            if ns is not None:
                try:
                    check_namespace(ns)
                except LabConfigError:
                    raise
                except ValueError as exc:  # LabInputError: also a ConfigError from here
                    raise LabConfigError(f"{o.kind} {o.name!r}: {exc}") from None
            key = (o.kind, ns, o.name)
            if key in seen or key in self._objects:
                raise LabConfigError(
                    f"Lab.apply: {o.kind} {o.name!r} twice; give each its own name"
                )
            seen.add(key)
            if isinstance(o, Workload):
                if o.node_name is not None and o.node_name not in self.cluster.workers:
                    raise LabConfigError(
                        f"{o.kind} {o.name!r}: node_name {o.node_name!r} is not a worker; use one of "
                        f"{list(self.cluster.workers)}"
                    )
                pc = o.priority_class
                if pc and pc not in pcs and not pc.startswith("system-"):
                    from kubernetes import client

                    if (
                        _ignore_404(
                            lambda pc=pc: client.SchedulingV1Api(
                                self.cluster.api_client
                            ).read_priority_class(pc)
                        )
                        is None
                    ):
                        raise LabConfigError(
                            f"{o.kind} {o.name!r}: PriorityClass {pc!r} does not exist; apply "
                            f"PriorityClass({pc!r}, value=...) in the same call"
                        )
        if only_on is not None and only_on not in self.cluster.workers:
            raise LabConfigError(
                f"Lab.apply: only_on={only_on!r} is not a worker; use one of {list(self.cluster.workers)}"
            )

    def _create(self, o: LabObject) -> None:
        from kubernetes import client

        c = self.cluster
        if isinstance(o, PriorityClass):
            client.SchedulingV1Api(c.api_client).create_priority_class(
                o.manifest({MANAGED_BY: MANAGER, LAB_LABEL: self.namespace})
            )
            self._objects.append((o.kind, None, o.name))
            return
        ns = o.namespace or self.namespace
        if isinstance(o, PodDisruptionBudget):
            c.policy.create_namespaced_pod_disruption_budget(ns, o.manifest(ns))
        else:
            if isinstance(o, StatefulSet):
                for pv in o.persistent_volumes(
                    ns, {MANAGED_BY: MANAGER, LAB_LABEL: self.namespace}
                ):
                    c.core.create_persistent_volume(pv)
                    self._objects.append(("PersistentVolume", None, pv["metadata"]["name"]))
            body = o.manifest(ns, self.image)
            create = {
                "Deployment": c.apps.create_namespaced_deployment,
                "ReplicaSet": c.apps.create_namespaced_replica_set,
                "StatefulSet": c.apps.create_namespaced_stateful_set,
                "DaemonSet": c.apps.create_namespaced_daemon_set,
                "ReplicationController": c.core.create_namespaced_replication_controller,
                "Job": c.batch.create_namespaced_job,
                "Pod": c.core.create_namespaced_pod,
            }[o.kind]
            create(ns, body)
        self._objects.append((o.kind, ns, o.name))

    def _unsettled(self, o: LabObject, snap: Snapshot) -> str | None:
        """Why `o` has not settled yet, or None once it has."""
        c = self.cluster
        if isinstance(o, PriorityClass):
            return None
        ns = o.namespace or self.namespace
        if isinstance(o, PodDisruptionBudget):
            p = c.policy.read_namespaced_pod_disruption_budget(o.name, ns)
            seen = (p.status.observed_generation if p.status else None) or 0
            return None if seen >= p.metadata.generation else f"PDB {o.name}: not observed yet"
        pods = [p for p in snap.of(o.name) if p.namespace == ns]
        state = [(p.name, p.node, p.phase, p.ready) for p in pods]
        if not isinstance(o, (Job, Pod)):  # a failed pod stays; its controller replaced it
            pods = [p for p in pods if p.phase not in ("Succeeded", "Failed")]
        if isinstance(o, Job):
            j = c.batch.read_namespaced_job(o.name, ns)
            done = (j.status.succeeded or 0) if j.status else 0
            return (
                None
                if done >= o.completions
                else f"Job {o.name}: {done}/{o.completions} succeeded {state}"
            )
        if isinstance(o, DaemonSet):
            d = c.apps.read_namespaced_daemon_set(o.name, ns)
            s = d.status
            want = (s.desired_number_scheduled or 0) if s else 0
            ok = (
                s is not None
                and (s.observed_generation or 0) >= d.metadata.generation
                and want > 0
                and (s.number_ready or 0) == want
                and len(pods) == want
                and all(p.ready for p in pods)
            )
            return None if ok else f"DaemonSet {o.name}: want {want} Ready, saw {state}"
        want = o.expected_pods()
        ok = len(pods) == want and all(p.ready and p.phase == "Running" for p in pods)
        return None if ok else f"{o.kind} {o.name}: want {want} Ready, saw {state}"

    def wait_settled(self, *objects: LabObject, timeout: float | None = None) -> Snapshot:
        """Wait until each object is settled (workload Ready / Job complete / PDB observed)."""
        last: list[Snapshot] = []

        def probe() -> list[str]:
            snap = self.snapshot()
            last[:] = [snap]
            return [why for o in objects if (why := self._unsettled(o, snap))]

        wait_for(
            f"{', '.join(f'{o.kind}/{o.name}' for o in objects)} settled in {self.namespace}",
            probe,
            lambda problems: not problems,
            timeout or self.timeout,
            describe=lambda problems: "; ".join(problems),
        )
        return last[0]

    def apply(
        self,
        *objects: LabObject,
        wait: bool = True,
        only_on: str | None = None,
        timeout: float | None = None,
    ) -> Snapshot:
        """Create lab objects (namespaces as needed) and wait until they settle.

        Order: PriorityClasses, then workloads (StatefulSet PVs first), then PDBs. With
        `only_on=NODE` every other worker is cordoned while the workloads schedule (the
        cordons are undone before returning), and a pod placed elsewhere is an error.
        Every input is checked before the first change.
        """
        self._check_objects(objects, only_on)
        if only_on is not None and not wait:
            raise LabConfigError(
                "Lab.apply: only_on= needs wait=True (the other workers are cordoned until the "
                "pods are placed); drop one of them"
            )
        rank = {PriorityClass: 0, PodDisruptionBudget: 2}
        ordered = sorted(objects, key=lambda o: rank.get(type(o), 1))
        for ns in dict.fromkeys(
            (o.namespace or self.namespace) for o in ordered if not isinstance(o, PriorityClass)
        ):
            self._ensure_namespace(ns)
        placing = contextlib.nullcontext() if only_on is None else self.only_on(only_on)
        with placing:
            for o in ordered:
                self._create(o)
            if not wait:
                return self.snapshot()
            snap = self.wait_settled(*ordered, timeout=timeout)
        if only_on is not None:
            names = {
                o.name for o in ordered if isinstance(o, Workload) and not isinstance(o, DaemonSet)
            }
            astray = [
                (p.name, p.node) for p in snap.live if p.workload in names and p.node != only_on
            ]
            if astray:
                raise LabConfigError(
                    f"Lab.apply(only_on={only_on!r}): pods scheduled elsewhere {astray}; pin them "
                    "with node_name= or node_selector= instead"
                )
        return snap

    def pods(self, workload: str | Workload | None = None) -> list[PodInfo]:
        """The live pods of a workload (or of the whole lab)."""
        name = workload.name if isinstance(workload, Workload) else workload
        return self.snapshot().of(name)

    def _pod(self, name: str, namespace: str | None) -> Any:
        return self.cluster.core.read_namespaced_pod(name, namespace or self.namespace)

    def _replace_status(
        self, name: str, namespace: str | None, change: Callable[[dict], None]
    ) -> Any:
        """Read-modify-write a pod's status (kwok runs no kubelet to do it), retried on 409."""
        ns = namespace or self.namespace
        api = self.cluster.api_client

        def attempt() -> Any:
            body = api.sanitize_for_serialization(self._pod(name, ns))
            change(body.setdefault("status", {}))
            try:
                return self.cluster.core.replace_namespaced_pod_status(name, ns, body)
            except ApiException as exc:
                if exc.status == 409:
                    return None
                raise

        return wait_for(
            f"status of pod {ns}/{name} written", attempt, lambda r: r is not None, self.timeout
        )

    def fail_pod(
        self, name: str, *, reason: str = "Error", exit_code: int = 1, namespace: str | None = None
    ) -> PodInfo:
        """Make a running pod Failed, as a kubelet reports a container that exited non-zero."""
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def change(status: dict[str, Any]) -> None:
            status["phase"] = "Failed"
            for cond in status.get("conditions") or []:
                if cond.get("type") in ("Ready", "ContainersReady"):
                    cond["status"] = "False"
            for cs in status.get("containerStatuses") or []:
                cs["ready"] = False
                cs["started"] = False
                cs["state"] = {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "startedAt": (cs.get("state") or {})
                        .get("running", {})
                        .get("startedAt", now),
                        "finishedAt": now,
                    }
                }

        return PodInfo.of(self._replace_status(name, namespace, change))

    def set_restarts(self, name: str, restarts: int, *, namespace: str | None = None) -> PodInfo:
        """Give a running pod's first container `restarts` restarts (it stays Ready)."""
        if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 0:
            raise LabConfigError(
                f"Lab.set_restarts({name!r}): restarts must be an int >= 0, got {restarts!r}"
            )

        def change(status: dict[str, Any]) -> None:
            statuses = status.get("containerStatuses") or []
            if statuses:
                statuses[0]["restartCount"] = restarts
                if restarts:
                    statuses[0]["lastState"] = {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "finishedAt": statuses[0]
                            .get("state", {})
                            .get("running", {})
                            .get("startedAt"),
                        }
                    }

        return PodInfo.of(self._replace_status(name, namespace, change))

    def wait_older_than(
        self, seconds: float, workload: str | None = None, names: Iterable[str] | None = None
    ) -> Snapshot:
        """Wait until every live pod (of `workload`, or named) was created over `seconds` ago.

        For strategies that only take pods past an age (PodLifeTime, RemoveFailedPods'
        minPodLifetimeSeconds); the API server's creationTimestamp against this host's clock,
        which is the API server's own on the embedded cluster.
        """
        wanted = None if names is None else set(names)

        def youngest() -> float:
            ages = [
                (dt.datetime.now(dt.UTC) - p.metadata.creation_timestamp).total_seconds()
                for ns in self.namespaces
                for p in self.cluster.core.list_namespaced_pod(ns).items
                if p.metadata.deletion_timestamp is None
                and (workload is None or (p.metadata.labels or {}).get(WORKLOAD_LABEL) == workload)
                and (wanted is None or p.metadata.name in wanted)
            ]
            return min(ages, default=0.0)

        wait_for(
            f"pods of {workload or sorted(wanted or []) or 'the lab'} older than {seconds}s",
            youngest,
            lambda age: age > seconds,
            timeout=seconds + self.timeout,
            max_interval=0.2,
            describe=lambda age: f"youngest {age:.2f}s",
        )
        return self.snapshot()

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

    # -- teardown ----------------------------------------------------------
    def restore_labels(self) -> list[str]:
        """Put back every node label this lab changed; returns the nodes touched."""
        restored = []
        for node, original in self._labelled.items():
            self._node_labels.setdefault(node, {}).setdefault(POOL_LABEL, original)
        for node, originals in self._node_labels.items():
            try:
                self.cluster.core.patch_node(node, {"metadata": {"labels": dict(originals)}})
                restored.append(node)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self._labelled.clear()
        self._node_labels.clear()
        return restored

    def restore_nodes(self) -> list[str]:
        """Put back taints and cordons (after the labels); waits until the nodes show it."""
        restored = self.restore_labels()
        specs, self._node_specs = self._node_specs, {}
        for node, spec in specs.items():
            patch = {
                "spec": {
                    "taints": spec["taints"] or None,
                    "unschedulable": spec["unschedulable"] or None,
                }
            }
            if (
                _ignore_404(
                    lambda node=node, patch=patch: self.cluster.core.patch_node(node, patch)
                )
                is None
            ):
                continue
            want = {t["key"] for t in spec["taints"]}
            cordoned = spec["unschedulable"]

            def keys(node: str = node) -> set[str]:
                return {t.key for t in self.cluster.core.read_node(node).spec.taints or []}

            wait_for(
                f"node {node} back to taints {sorted(want)}",
                keys,
                lambda have, want=want, cordoned=cordoned: (
                    have >= want if cordoned else have == want
                ),
                self.timeout,
            )
            restored.append(node)
        return sorted(set(restored))

    def delete_namespace_in_background(self) -> list[str]:
        """Start deleting the lab's namespaces and hand them to the cluster's reaper.

        The namespace goes Terminating first: from then on the API server refuses new objects
        in it, so no controller can bring a pod back. Then its pods are force-deleted (no
        kubelet honours a grace period here), so no lab pod outlives this call; the rest
        (controllers, PDB, events) is the namespace controller's, and the session's final scan
        (NamespaceReaper.wait_all) fails if a namespace never goes.
        """
        mine = ([self.namespace] if self.created_namespace else []) + list(self._extra_namespaces)
        for ns in mine:
            _ignore_404(lambda ns=ns: self.cluster.core.delete_namespace(ns))
        for ns in mine:
            _ignore_404(
                lambda ns=ns: self.cluster.core.delete_collection_namespaced_pod(
                    ns, grace_period_seconds=0
                )
            )
        self.cluster.namespace_reaper.hand_over(mine)
        self.created_namespace = False
        self._extra_namespaces.clear()
        return mine

    def delete_namespace(self, timeout: float = 60) -> None:
        """Delete the lab's namespaces; pods are force-deleted until each namespace is gone.

        Controllers of the known kinds go first so none recreates a pod; anything else
        (an owner kind nobody listed) goes with its namespace, whose controller refuses new
        pods once it terminates, so nothing here waits on a kind it does not know.
        """
        mine = ([self.namespace] if self.created_namespace else []) + list(self._extra_namespaces)
        if not mine:
            return
        for ns in mine:
            for group, method in _CONTROLLERS:
                api = getattr(self.cluster, group)
                _ignore_404(
                    lambda api=api, method=method, ns=ns: getattr(api, method)(
                        ns, propagation_policy="Background"
                    )
                )

        def pods_left() -> list[str]:
            names = []
            for ns in mine:
                pods = self.cluster.core.list_namespaced_pod(ns).items
                if pods:  # without grace: no kubelet honours it, the namespace waits for them
                    self.cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
                names += [f"{ns}/{p.metadata.name} (owner {_owner_kind(p)})" for p in pods]
            return names

        # Pods first: an empty namespace is finalized in one pass of its controller, which
        # otherwise requeues itself for seconds. An owner kind not deleted above may keep
        # making pods; after a short window the namespace goes regardless (see below).
        with contextlib.suppress(WaitTimeout):
            wait_for("lab pods gone", pods_left, lambda names: not names, self.pod_settle_s)
        for ns in mine:
            _ignore_404(lambda ns=ns: self.cluster.core.delete_namespace(ns))

        def left() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for ns in mine:
                if _ignore_404(lambda ns=ns: self.cluster.core.read_namespace(ns)) is None:
                    continue
                pods = self.cluster.core.list_namespaced_pod(ns).items
                if pods:  # without grace: no kubelet honours it, the namespace waits for them
                    self.cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
                out[ns] = [f"{p.metadata.name} (owner {_owner_kind(p)})" for p in pods]
            return out

        wait_for(
            f"namespaces {mine} deleted",
            left,
            lambda remaining: not remaining,
            timeout,
            describe=lambda remaining: f"still there, with pods: {remaining}",
        )
        self.created_namespace = False
        self._extra_namespaces.clear()

    def delete_cluster_objects(self, timeout: float = 60) -> list[str]:
        """PersistentVolumes and PriorityClasses this lab made (after its namespaces)."""
        from kubernetes import client

        gone = []
        sched = client.SchedulingV1Api(self.cluster.api_client)
        pvs = [name for kind, _, name in self._objects if kind == "PersistentVolume"]
        for name in pvs:
            _ignore_404(lambda name=name: self.cluster.core.delete_persistent_volume(name))
        if pvs:
            wait_for(
                f"PersistentVolumes {pvs} deleted",
                lambda: [
                    n
                    for n in pvs
                    if _ignore_404(lambda n=n: self.cluster.core.read_persistent_volume(n))
                ],
                lambda remaining: not remaining,
                timeout,
            )
            gone += [f"PersistentVolume/{n}" for n in pvs]
        for kind, _, name in self._objects:
            if kind == "PriorityClass":
                _ignore_404(lambda name=name: sched.delete_priority_class(name))
                gone.append(f"PriorityClass/{name}")
        self._objects = [o for o in self._objects if o[1] is not None]
        return gone

    def teardown(self, background: bool = False) -> None:
        """Reverse dependency order: namespaces, cluster-scoped objects, nodes.

        `background`: the namespaces are left Terminating with no pod in them and handed to
        the cluster's reaper instead of waited for (see delete_namespace_in_background);
        a lab that made PersistentVolumes still waits, since those go only after their claims.
        Every step runs even when an earlier one failed; the first error is raised after.
        """
        errors: list[BaseException] = []
        has_volumes = any(kind == "PersistentVolume" for kind, _, _ in self._objects)
        delete: Callable[[], Any] = (
            self.delete_namespace_in_background
            if background and not has_volumes
            else self.delete_namespace
        )
        for step in (delete, self.delete_cluster_objects, self.restore_nodes):
            try:
                step()
            except Exception as exc:
                errors.append(exc)
        self._objects.clear()
        if errors:
            raise errors[0]


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


# Every public step, but not `record`/`only_on` (context managers: the body is the caller's).
for _name, _fn in list(vars(Lab).items()):
    if (
        callable(_fn)
        and not isinstance(_fn, type)
        and not _name.startswith("_")
        and _name not in ("record", "only_on")
    ):
        setattr(Lab, _name, _short_api_errors(_fn))
del _name, _fn
