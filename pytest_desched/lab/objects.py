"""The runbook's own workload and lab objects as values: created, waited on, given a status."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import wait_for, watch_until
from pytest_desched.lab.base import LAB_LABEL, ignore_404, pods_seen
from pytest_desched.lab.inputs import (
    EVICTABLE_LABEL,
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
    LabConfigError,
    check_namespace,
    pod_names,
    workload_name,
)
from pytest_desched.lab.nodes import NodeSteps
from pytest_desched.lab.snapshot import WORKLOAD_LABEL, PodInfo, Snapshot
from pytest_desched.lab.workloads import (
    DaemonSet,
    Job,
    LabObject,
    LocalVolume,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    StatefulSet,
    Workload,
)

if TYPE_CHECKING:
    pass


class ObjectSteps(NodeSteps):
    """The runbook's spread-demo Deployment and `apply(...)` of lab objects as values."""

    # -- the runbook's workload ---------------------------------------------
    def deployment_manifest(self, affinity: bool = True, preferred: bool = False) -> dict[str, Any]:
        """The runbook's spread-demo: pause pods, opt-in label, required affinity to the pool
        (`preferred`: the same term as preferredDuringScheduling, weight 100, upstream #1707)."""
        labels = {"app": self.app, EVICTABLE_LABEL: "true"}
        spec: dict[str, Any] = {
            "containers": [{"name": "pause", "image": self.image}],
            "terminationGracePeriodSeconds": 30,
        }
        if affinity and preferred:
            term = {"key": POOL_LABEL, "operator": "In", "values": [self.pool]}
            spec["affinity"] = {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [term]}}
                    ]
                }
            }
        elif affinity:
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
            "metadata": {"name": self.app, "labels": {"app": self.app, EVICTABLE_LABEL: "true"}},
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": {"app": self.app}},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        }

    def deploy(self, affinity: bool = True, preferred: bool = False) -> Snapshot:
        self.cluster.apps.create_namespaced_deployment(
            self.namespace, self.deployment_manifest(affinity, preferred)
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
            return wait_for(what, self.snapshot, ok, timeout or self.timeout, describe=pods_seen)

        def snap(pods: list[Any]) -> Snapshot:
            infos = sorted((PodInfo.of(p) for p in pods), key=lambda p: (p.namespace, p.name))
            return Snapshot(time.monotonic(), infos, None)

        pods = watch_until(
            what,
            self.cluster.core.list_namespaced_pod,
            lambda pods: ok(snap(pods)),
            timeout or self.timeout,
            lambda pods: pods_seen(snap(pods)),
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
                        ignore_404(
                            client.SchedulingV1Api(self.cluster.api_client).read_priority_class, pc
                        )
                        is None
                    ):
                        raise LabConfigError(
                            f"{o.kind} {o.name!r}: PriorityClass {pc!r} does not exist; apply "
                            f"PriorityClass({pc!r}, value=...) in the same call"
                        )
            if isinstance(o, LocalVolume) and o.node not in self.cluster.workers:
                raise LabConfigError(
                    f"LocalVolume {o.name!r}: node {o.node!r} is not a worker; use one of "
                    f"{list(self.cluster.workers)}"
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
        if isinstance(o, LocalVolume):
            self._create_local_volume(o, ns)
            return
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

    def _create_local_volume(self, o: LocalVolume, ns: str) -> None:
        """The lab's local StorageClass (once), the PV on its node, then the claim."""
        from kubernetes import client

        c = self.cluster
        managed = {MANAGED_BY: MANAGER, LAB_LABEL: self.namespace}
        sc = o.storage_class(self.namespace, managed)
        name = sc["metadata"]["name"]
        if ("StorageClass", None, name) not in self._objects:
            client.StorageV1Api(c.api_client).create_storage_class(sc)
            self._objects.append(("StorageClass", None, name))
        pv = o.persistent_volume(ns, self.namespace, managed)
        c.core.create_persistent_volume(pv)
        self._objects.append(("PersistentVolume", None, pv["metadata"]["name"]))
        c.core.create_namespaced_persistent_volume_claim(ns, o.claim(ns, self.namespace))
        self._objects.append((o.kind, ns, o.name))

    def _unsettled(self, o: LabObject, snap: Snapshot) -> str | None:
        """Why `o` has not settled yet, or None once it has."""
        c = self.cluster
        if isinstance(o, PriorityClass):
            return None
        if isinstance(o, LocalVolume):  # bound by the PV controller or the first consumer
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

        Order: PriorityClasses and LocalVolumes, then workloads (StatefulSet PVs first), then PDBs. With
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
        rank = {PriorityClass: 0, LocalVolume: 0, PodDisruptionBudget: 2}
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
        return self.snapshot().of(workload_name(workload, "Lab.pods"))

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
        """Make a running pod Failed, as a kubelet reports a container that exited non-zero.

        Where a real kubelet owns the pod's status (kind, an existing cluster) a written
        status would be overwritten: the failure is made real instead, its kubelet told to
        stop the pod (`activeDeadlineSeconds`, mutable on a running pod: phase Failed,
        reason DeadlineExceeded)."""
        if not self._simulated():
            return self._fail_by_deadline(name, namespace)
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

    def _simulated(self) -> bool:
        """The lab's pods are on kwok's simulated nodes (`Capabilities.simulated_pods`)."""
        caps = getattr(self.cluster, "capabilities", None)
        return caps is None or caps.simulated_pods

    def _fail_by_deadline(self, name: str, namespace: str | None) -> PodInfo:
        ns = namespace or self.namespace
        self.cluster.core.patch_namespaced_pod(name, ns, {"spec": {"activeDeadlineSeconds": 1}})
        pod = wait_for(
            f"pod {ns}/{name} Failed by its kubelet (activeDeadlineSeconds 1)",
            lambda: self._pod(name, ns),
            lambda p: p.status.phase == "Failed",
            self.timeout,
            describe=lambda p: f"phase {p.status.phase}" if p is not None else "nothing read",
        )
        return PodInfo.of(pod)

    def set_restarts(self, name: str, restarts: int, *, namespace: str | None = None) -> PodInfo:
        """Give a running pod's first container `restarts` restarts (it ends Ready).

        On kwok's simulated nodes the count is written into the pod's status. A real kubelet
        overwrites a count it did not make, so where the provider can reach the node
        (`Capabilities.restarts_containers`: kind) the container is stopped until its kubelet
        has restarted it that often, through its real CrashLoopBackOff (10 s, 20 s, 40 s ...);
        elsewhere LabConfigError naming the provider (`Experiment.needs_restarts` declares it).
        """
        if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 0:
            raise LabConfigError(
                f"Lab.set_restarts({name!r}): restarts must be an int >= 0, got {restarts!r}"
            )
        if not self._simulated():
            caps = self.cluster.capabilities
            stop = self.cluster.restart_container
            if stop is None or not caps.restarts_containers:
                why = caps.restarts_refusal(f"Lab.set_restarts({name!r})")
                raise LabConfigError(why or f"Lab.set_restarts({name!r}): no way to the node")
            return self._restart_for_real(name, namespace, restarts, stop)

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

    def _restart_for_real(
        self, name: str, namespace: str | None, restarts: int, stop: Callable[[str, str], None]
    ) -> PodInfo:
        """Stop the pod's first container and wait for its kubelet to restart it and report it
        Ready, until its restart count is `restarts` (a real count only grows)."""
        ns = namespace or self.namespace

        def first(pod: Any) -> Any:
            statuses = (pod.status.container_statuses or []) if pod.status else []
            return statuses[0] if statuses else None

        def seen(c: Any) -> str:
            if c is None:
                return "no container status"
            st = c.state
            now = (
                "running"
                if st is not None and st.running
                else f"waiting ({st.waiting.reason})"
                if st is not None and st.waiting
                else "terminated"
            )
            return f"restarts {c.restart_count}, {now}, ready {c.ready}"

        pod = self._pod(name, ns)
        have = int(getattr(first(pod), "restart_count", 0) or 0)
        if restarts < have:
            raise LabConfigError(
                f"Lab.set_restarts({name!r}, {restarts}): its container has restarted {have} "
                "times already and a kubelet's count only grows; ask for a count >= it"
            )
        for n in range(have + 1, restarts + 1):
            cs = first(pod)
            if cs is None or not cs.container_id or not pod.spec.node_name:
                raise LabConfigError(
                    f"Lab.set_restarts({name!r}): pod {ns}/{name} has no running container "
                    "on a node yet; apply it and wait until it is Ready first"
                )
            stop(pod.spec.node_name, cs.container_id)

            def restarted(p: Any, n: int = n) -> bool:
                c = first(p)
                return bool(
                    c is not None
                    and int(c.restart_count or 0) >= n
                    and c.ready
                    and c.state is not None
                    and c.state.running is not None
                )

            pod = wait_for(
                f"pod {ns}/{name}'s container restarted by its kubelet ({n} of {restarts})",
                lambda: self._pod(name, ns),
                restarted,
                # the kubelet's back-off doubles from 10 s up to its 300 s maximum
                self.timeout + min(10 * 2 ** (n - 1), 300),
                describe=lambda p: seen(first(p)),
                max_interval=0.5,
            )
        return PodInfo.of(pod)

    def wait_older_than(
        self,
        seconds: float,
        workload: str | Workload | None = None,
        names: Iterable[str | Pod] | None = None,
    ) -> Snapshot:
        """Wait until every live pod (of `workload`, or named) was created over `seconds` ago.

        For strategies that only take pods past an age (PodLifeTime, RemoveFailedPods'
        minPodLifetimeSeconds); the API server's creationTimestamp against this host's clock,
        which is the API server's own on the embedded cluster.
        """
        workload = workload_name(workload, "Lab.wait_older_than")
        names = pod_names(names, "Lab.wait_older_than")
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
