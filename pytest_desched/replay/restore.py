"""Restore a snapshot onto a fresh embedded cluster, so the real controllers, scheduler and
descheduler act on it as they did on the original.

Order and why (the `etcd` method, the default):

1. the provider's own kwok workers go (they would be extra nodes); one *runner* node is
   added for the descheduler's round pods (cordoned, tainted, no hostname or zone label, so
   nodeFit, utilization and topology spreading never count it; kwok manages every node, so
   it is Ready and counts only toward the descheduler's ">= 2 ready nodes" check);
2. nodes, written Ready into etcd (same labels, taints, allocatable, capacity, conditions,
   unschedulable; kwok keeps their leases);
3. through the API (admitted, validated): namespaces, the ServiceAccounts pods name (objects
   only, no tokens), a ResourceQuota *hold* (`pods: 0`, `count/replicasets.apps: 0`) in every
   namespace with owners, proven in force with a dry-run create, PriorityClasses and
   StorageClasses;
4. into etcd (`replay.etcd`): PVs and PVCs bound to each other, PDBs, then the owners
   (Deployments, ReplicaSets, StatefulSets, DaemonSets) and last the pods, so the garbage
   collector never sees a dependent without its owner; UIDs are new and consistent, so
   ownerReferences, minReplicas and the controllers all hold; `creationTimestamp` and
   `status.startTime` are the snapshot's, shifted together (`ages`);
5. wait for proof that the controllers' caches hold every restored object (`Barrier`: a
   last ReplicaSet and a last pod, each acted on by its controller) and that every PDB is
   observed, lift the hold, and verify every pod: node, phase, owner, both timestamps as
   written (kwok's stages never touch a Running pod: checked, not assumed).

The `api` method (fallback, or on request) creates everything through the API server: pods as
orphans, then their owners bottom-up (which adopt them), then `status.startTime` through the
status subresource once kwok marked each pod Running; the API server stamps
`creationTimestamp` itself there, so PodLifeTime sees restore-time ages.

Ages: `shift` (default) moves every timestamp by the same offset (restore time - takenAt), so
each pod is as old at the round as it was when the snapshot was taken; `preserve` writes them
unchanged (ages grow by the time since the snapshot).

Deviations, all recorded in the result: DaemonSets and StatefulSets are restored with
`updateStrategy: OnDelete` (their ControllerRevisions are not in a snapshot, so a rolling
update could otherwise replace every pod); pods of Jobs, terminating pods and the
descheduler's own pods are not restored (kwok completes Running Job pods at once; the replay
installs its own descheduler); NotReady nodes become Ready (kwok manages every node).
"""

from __future__ import annotations

import copy
import datetime as dt
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.replay import kubeapi
from pytest_desched.replay.format import (
    DESCHEDULER_LABEL,
    Snapshot,
    controller_of,
    key,
    rfc3339,
    utc,
)

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

Reporter = Callable[[str], None]

RUNNER_NODE = "desched-replay-runner"
RUNNER_LABEL = "desched.pytest.io/replay-runner"
RUNNER_TAINT = {"key": RUNNER_LABEL, "value": "true", "effect": "NoSchedule"}
HOLD_QUOTA = "desched-replay-hold"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
OWNER_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")
SECTION_OF_KIND = {
    "Deployment": "deployments",
    "ReplicaSet": "replicaSets",
    "StatefulSet": "statefulSets",
    "DaemonSet": "daemonSets",
}
SYSTEM_PRIORITY = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
AGES = ("shift", "preserve")
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class RestoreError(ProviderError):
    """The replay cluster refused part of the snapshot; names the object and the answer."""


def _say(msg: str) -> None:
    import sys

    print(f"[desched] {msg}", file=sys.stderr, flush=True)


# -- the plan (pure) -----------------------------------------------------------------------
@dataclass
class RestorePlan:
    """Everything a restore will write, decided before the first change."""

    ages: str
    shift_s: float
    api: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # section -> bodies
    owners: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # kind -> objects
    pods: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {pod, why}
    deviations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod key -> facts

    @property
    def owner_namespaces(self) -> list[str]:
        return sorted({o["metadata"]["namespace"] for objs in self.owners.values() for o in objs})


def _shift(ts: str | None, by: dt.timedelta) -> str | None:
    t = utc(ts)
    return rfc3339(t + by) if t is not None else None


def _clean_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A PodSpec fit to store: our notes (`_source`) removed."""
    spec = copy.deepcopy(spec)
    for v in spec.get("volumes") or []:
        v.pop("_source", None)
    return spec


def _priority(spec: dict[str, Any], classes: dict[str, int], default: int) -> int:
    if spec.get("priority") is not None:
        return int(spec["priority"])
    name = spec.get("priorityClassName")
    if name:
        return classes.get(name, SYSTEM_PRIORITY.get(name, default))
    return default


def _running_status(st: dict[str, Any], start: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"phase": st.get("phase") or "Pending"}
    for k in ("reason", "qosClass"):
        if st.get(k):
            out[k] = st[k]
    if start:
        out["startTime"] = start
    conds = [dict(c) for c in st.get("conditions") or []]
    if out["phase"] == "Running" and not conds:
        conds = [
            {"type": t, "status": "True"}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
    if conds:
        out["conditions"] = conds
    return out


def plan_restore(
    snap: Snapshot,
    now: dt.datetime | None = None,
    ages: str = "shift",
    node_uids: dict[str, str] | None = None,
) -> RestorePlan:
    """What to write and what to leave out (and why); raises ConfigError on bad input."""
    if ages not in AGES:
        raise ConfigError(f"ages={ages!r}: use one of {AGES}")
    snap.validate()
    now = now or dt.datetime.now(dt.UTC)
    shift = now - snap.taken_at if ages == "shift" else dt.timedelta(0)
    plan = RestorePlan(ages=ages, shift_s=round(shift.total_seconds(), 3))
    classes = {
        pc["metadata"]["name"]: int(pc.get("value", 0)) for pc in snap.items("priorityClasses")
    }
    default_prio = next(
        (
            int(pc.get("value", 0))
            for pc in snap.items("priorityClasses")
            if pc.get("globalDefault")
        ),
        0,
    )

    # -- owners: new UIDs, shifted ages, OnDelete for DaemonSets and StatefulSets ---------
    new_uid: dict[str, str] = {}  # old uid (or kind/ns/name) -> new uid
    owner_by_name: dict[tuple[str, str, str], dict[str, Any]] = {}
    for kind in OWNER_KINDS:
        for src in snap.items(SECTION_OF_KIND[kind]):
            m = src["metadata"]
            uid = str(uuid.uuid4())
            ident = m.get("uid") or f"{kind}/{m['namespace']}/{m['name']}"
            new_uid[ident] = uid
            spec = copy.deepcopy(src.get("spec") or {})
            spec["template"] = copy.deepcopy(spec.get("template") or {})
            spec["template"]["spec"] = _clean_spec(spec["template"].get("spec") or {})
            if kind in ("DaemonSet", "StatefulSet"):
                was = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
                if was != "OnDelete":
                    spec["updateStrategy"] = {"type": "OnDelete"}
            obj = {
                "apiVersion": "apps/v1",
                "kind": kind,
                "metadata": {
                    **{
                        k: v
                        for k, v in m.items()
                        if k in ("name", "namespace", "labels", "annotations")
                    },
                    "uid": uid,
                    "generation": 1,
                    "creationTimestamp": _shift(m.get("creationTimestamp"), shift) or rfc3339(now),
                },
                "spec": spec,
                "status": {},
            }
            if m.get("ownerReferences"):
                obj["metadata"]["ownerReferences"] = copy.deepcopy(m["ownerReferences"])
            owner_by_name[(kind, m["namespace"], m["name"])] = obj
            plan.owners.setdefault(kind, []).append(obj)
    for kind in ("DaemonSet", "StatefulSet"):
        changed = [
            o["metadata"]["name"]
            for o, src in zip(
                plan.owners.get(kind, []), snap.items(SECTION_OF_KIND[kind]), strict=True
            )
            if (src.get("spec") or {}).get("updateStrategy", {}).get("type", "RollingUpdate")
            != "OnDelete"
        ]
        if changed:
            plan.deviations.append(
                f"{kind}s {changed[:5]}{'...' if len(changed) > 5 else ''}: updateStrategy "
                "OnDelete (a snapshot has no ControllerRevisions, so a rolling update could "
                "replace every pod)"
            )

    def remap(refs: list[dict[str, Any]], ns: str) -> tuple[list[dict[str, Any]], str | None]:
        out = []
        for r in refs:
            kind, name = r.get("kind"), r.get("name")
            if kind in OWNER_KINDS:
                owner = owner_by_name.get((kind, ns, name))
                if owner is None:
                    return [], f"its owner {kind}/{name} is not in the snapshot"
                out.append({**r, "uid": owner["metadata"]["uid"]})
            elif kind == "Node":
                uid = (node_uids or {}).get(str(name), "00000000-0000-0000-0000-000000000000")
                out.append({**r, "uid": uid})
            elif kind in ("Job", "CronJob"):
                return [], (
                    f"owned by {kind} {name}: kwok completes Running Job pods at once "
                    "(pod-complete stage), so its fate cannot be replayed"
                )
            else:
                out.append(dict(r))  # a kind the replay cannot create (an operator's CRD)
                plan.notes.append(
                    f"pod owner kind {kind} ({ns}/{name}) cannot be restored: its pods keep the "
                    "reference, but nothing replaces them after an eviction"
                )
        return out, None

    for owner in plan.owners.get("ReplicaSet", []):  # RS -> Deployment references
        refs = owner["metadata"].get("ownerReferences") or []
        if refs:
            remapped, why = remap(refs, owner["metadata"]["namespace"])
            owner["metadata"]["ownerReferences"] = remapped
            if why:
                plan.notes.append(f"ReplicaSet {key(owner)}: {why}; restored without an owner")
                owner["metadata"].pop("ownerReferences", None)

    # -- pods ----------------------------------------------------------------------------
    for src in snap.pods:
        m, spec, st = src["metadata"], src.get("spec") or {}, src.get("status") or {}
        k = key(src)
        labels = m.get("labels") or {}
        why = None
        if labels.get(DESCHEDULER_LABEL[0]) == DESCHEDULER_LABEL[1]:
            why = "the descheduler itself: the replay runs its own release"
        elif m.get("deletionTimestamp"):
            why = "terminating when the snapshot was taken"
        refs, ref_why = remap(m.get("ownerReferences") or [], m["namespace"])
        why = why or ref_why
        if why:
            plan.skipped.append({"pod": k, "why": why})
            continue
        spec = _clean_spec(spec)
        spec["priority"] = _priority(spec, classes, default_prio)
        meta = {
            **{x: v for x, v in m.items() if x in ("name", "namespace", "labels", "annotations")},
            "uid": str(uuid.uuid4()),
            "creationTimestamp": _shift(m.get("creationTimestamp"), shift) or rfc3339(now),
        }
        if refs:
            meta["ownerReferences"] = refs
        start = _shift(st.get("startTime"), shift)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": spec,
            "status": _running_status(st, start),
        }
        plan.pods.append(pod)
        owner = controller_of(pod)
        plan.expected[k] = {
            "uid": meta["uid"],
            "node": spec.get("nodeName"),
            "phase": pod["status"]["phase"],
            "creationTimestamp": meta["creationTimestamp"],
            "startTime": start,
            "owner": f"{owner['kind']}/{owner['name']}" if owner else None,
            "ownerUid": owner.get("uid") if owner else None,
        }

    # -- everything else, through the API ------------------------------------------------
    plan.api = _api_bodies(snap, plan)
    if any(
        any(
            c.get("type") == "Ready" and c.get("status") != "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
        for n in snap.nodes
    ):
        plan.deviations.append(
            "NotReady nodes of the snapshot are Ready in the replay (kwok manages every node), "
            "so the descheduler considers them"
        )
    if plan.skipped:
        why = Counter(s["why"].split(":")[0] for s in plan.skipped)
        plan.notes.append(f"{len(plan.skipped)} pods not restored: {dict(why)}")
    return plan


def _api_bodies(snap: Snapshot, plan: RestorePlan) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    listed = set()
    for n in snap.items("namespaces"):
        listed.add(n["metadata"]["name"])
        out["namespaces"].append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(n, ("name", "labels"))}
        )
    used = {
        o["metadata"]["namespace"] for _, o in snap.all_objects() if o["metadata"].get("namespace")
    }
    for ns in sorted(used - listed):  # a scoped or partial snapshot: the namespace, unlabelled
        out["namespaces"].append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    for pc in snap.items("priorityClasses"):
        if pc["metadata"]["name"].startswith("system-"):
            continue
        out["priorityClasses"].append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": _meta(pc, ("name", "labels")),
                "value": int(pc.get("value", 0)),
                **({"globalDefault": True} if pc.get("globalDefault") else {}),
                **(
                    {"preemptionPolicy": pc["preemptionPolicy"]}
                    if pc.get("preemptionPolicy")
                    else {}
                ),
            }
        )
    for sc in snap.items("storageClasses"):
        out["storageClasses"].append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": _meta(sc, ("name", "labels")),
                "provisioner": sc.get("provisioner") or "desched.pytest.io/none",
                **(
                    {"volumeBindingMode": sc["volumeBindingMode"]}
                    if sc.get("volumeBindingMode")
                    else {}
                ),
                **({"reclaimPolicy": sc["reclaimPolicy"]} if sc.get("reclaimPolicy") else {}),
            }
        )
    for pv in snap.items("persistentVolumes"):
        spec = {k: v for k, v in (pv.get("spec") or {}).items() if not k.startswith("_")}
        spec.setdefault("accessModes", ["ReadWriteOnce"])
        spec.setdefault("capacity", {"storage": "1Gi"})
        spec["hostPath"] = {"path": f"/tmp/desched-replay/{pv['metadata']['name']}"}
        spec["persistentVolumeReclaimPolicy"] = "Retain"
        out["persistentVolumes"].append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": _meta(pv, ("name", "labels")),
                "spec": spec,
            }
        )
    pv_names = {pv["metadata"]["name"] for pv in snap.items("persistentVolumes")}
    for pvc in snap.items("persistentVolumeClaims"):
        spec = dict(pvc.get("spec") or {})
        spec.setdefault("accessModes", ["ReadWriteOnce"])
        spec.setdefault("resources", {"requests": {"storage": "1Gi"}})
        if spec.get("volumeName") and spec["volumeName"] not in pv_names:
            spec.pop("volumeName")  # its PV was not readable: the claim stays Pending
        out["persistentVolumeClaims"].append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": _meta(pvc, ("name", "namespace", "labels")),
                "spec": spec,
            }
        )
    sas: set[tuple[str, str]] = set()
    for pod in plan.pods:
        sas.add((pod["metadata"]["namespace"], pod["spec"].get("serviceAccountName") or "default"))
    for objs in plan.owners.values():
        for o in objs:
            sa = ((o["spec"].get("template") or {}).get("spec") or {}).get("serviceAccountName")
            sas.add((o["metadata"]["namespace"], sa or "default"))
    for ns, sa in sorted(sas):
        out["serviceAccounts"].append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": ns},
            }
        )
    for pdb in snap.items("podDisruptionBudgets"):
        spec = {k: v for k, v in (pdb.get("spec") or {}).items()}
        out["podDisruptionBudgets"].append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(pdb, ("name", "namespace", "labels")),
                "spec": spec,
            }
        )
    for n in snap.nodes:
        st = n.get("status") or {}
        meta = _meta(n, ("name", "labels", "annotations"))
        meta.setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
        out["nodes"].append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": meta,
                "spec": {
                    k: v
                    for k, v in (n.get("spec") or {}).items()
                    if k in ("taints", "unschedulable")
                },
                "status": {k: st[k] for k in ("allocatable", "capacity") if st.get(k)},
            }
        )
    return dict(out)


def _meta(obj: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    m = obj.get("metadata") or {}
    return {k: copy.deepcopy(m[k]) for k in keys if m.get(k)}


def runner_node() -> dict[str, Any]:
    """The node round pods run on: invisible to nodeFit, utilization and topology spreading."""
    res = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": RUNNER_NODE,
            "labels": {RUNNER_LABEL: "true"},
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
        "spec": {"unschedulable": True, "taints": [RUNNER_TAINT]},
        "status": {"allocatable": res, "capacity": res},
    }


def runner_values() -> dict[str, Any]:
    """Chart values that put round pods on the runner node (and nowhere else)."""
    return {
        "nodeSelector": {RUNNER_LABEL: "true"},
        "tolerations": [{"operator": "Exists"}],
    }


# -- the restore ----------------------------------------------------------------------------
@dataclass
class RestoreResult:
    """What was restored, how, what was left out, and the checks that it holds."""

    method: str
    ages: str
    shift_s: float
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    verified: dict[str, Any] = field(default_factory=dict)
    extra_pods: list[str] = field(default_factory=list)  # made by controllers during restore
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    written_at: str = ""
    runner_node: str = RUNNER_NODE

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("expected")
        return d


class _Timer:
    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.t = timings, time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.timings[name] = round(self.timings.get(name, 0.0) + now - self.t, 3)
        self.t = now


def _create(
    api: Any, path: str, body: dict[str, Any], tolerate_exists: bool = False
) -> dict[str, Any] | None:
    try:
        return kubeapi.request(api, "POST", path, body)
    except ApiException as exc:
        if tolerate_exists and exc.status == 409:
            return None
        raise RestoreError(
            f"create {body.get('kind')} {key(body)}: {kubeapi.status_reason(exc)}"
        ) from None


def _path(body: dict[str, Any]) -> str:
    kind, ns = body["kind"], (body["metadata"].get("namespace"))
    group = {
        "PriorityClass": "/apis/scheduling.k8s.io/v1",
        "StorageClass": "/apis/storage.k8s.io/v1",
        "PodDisruptionBudget": "/apis/policy/v1",
        "ResourceQuota": "/api/v1",
    }.get(kind, "/api/v1")
    plural = {
        "PriorityClass": "priorityclasses",
        "StorageClass": "storageclasses",
        "PersistentVolume": "persistentvolumes",
        "PersistentVolumeClaim": "persistentvolumeclaims",
        "PodDisruptionBudget": "poddisruptionbudgets",
        "ServiceAccount": "serviceaccounts",
        "Namespace": "namespaces",
        "Node": "nodes",
        "ResourceQuota": "resourcequotas",
        "Pod": "pods",
    }[kind]
    return f"{group}/namespaces/{ns}/{plural}" if ns else f"{group}/{plural}"


def _create_all(
    api: Any, bodies: list[dict[str, Any]], tolerate_exists: bool = False, workers: int = 8
) -> list[dict[str, Any] | None]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda b: _create(api, _path(b), b, tolerate_exists), bodies))


def restore(
    cluster: Cluster,
    snap: Snapshot,
    ages: str = "shift",
    method: str = "auto",
    timeout: float = 120,
    report: Reporter = _say,
) -> RestoreResult:
    """Restore `snap` onto `cluster` (a fresh embedded cluster); see the module docstring.

    `method`: `etcd` (pods and owners into the cluster's etcd), `api` (through the API
    server: slower, and creationTimestamp is then the restore's), `auto` (etcd when the
    cluster's etcd answers). Raises ConfigError before any change on a bad snapshot.
    """
    if method not in ("auto", "etcd", "api"):
        raise ConfigError(f"method={method!r}: use auto, etcd or api")
    plan_restore(snap, ages=ages)  # every input problem surfaces here, before any change
    etcd = None
    if method in ("auto", "etcd"):
        from pytest_desched.replay.etcd import Etcd, EtcdError, endpoint_of

        try:
            if cluster.workdir is None:
                raise EtcdError("the cluster has no directory (not an embedded cluster)")
            etcd = Etcd(*endpoint_of(cluster.workdir))
            etcd.ping()
        except EtcdError as exc:
            if method == "etcd":
                raise
            report(f"restore: etcd not usable ({exc}); restoring through the API")
            etcd = None
    api = cluster.api_client
    result = RestoreResult(method="etcd" if etcd else "api", ages=ages, shift_s=0.0)
    timer = _Timer(result.timings)
    snap_nodes = {n["metadata"]["name"] for n in snap.nodes}
    for w in cluster.workers:  # the provider's own workers would be extra nodes
        if w not in snap_nodes:
            try:
                kubeapi.request(api, "DELETE", f"/api/v1/nodes/{w}")
            except ApiException as exc:
                if exc.status != 404:
                    raise RestoreError(f"delete node {w}: {kubeapi.status_reason(exc)}") from None
    if etcd is not None:
        plan = _restore_via_etcd(api, etcd, snap, ages, timeout, result, timer, report)
    else:
        created = _create_all(
            api, [runner_node(), *plan_restore(snap, ages=ages).api.get("nodes", [])]
        )
        node_uids = {c["metadata"]["name"]: c["metadata"]["uid"] for c in created if c}
        _wait_nodes_ready(api, [RUNNER_NODE, *sorted(snap_nodes)], timeout)
        timer.lap("nodes")
        plan = plan_restore(snap, ages=ages, node_uids=node_uids)
        result.shift_s = plan.shift_s
        _namespaces(api, plan)
        _create_all(api, plan.api.get("serviceAccounts", []), tolerate_exists=True)
        for section in (
            "priorityClasses",
            "storageClasses",
            "persistentVolumes",
            "persistentVolumeClaims",
            "podDisruptionBudgets",
        ):
            _create_all(api, plan.api.get(section, []))
        timer.lap("api_objects")
        _restore_via_api(api, plan, result, timeout, report)
        timer.lap("api_pods")
    result.expected = plan.expected
    result.verified, result.extra_pods = verify(api, plan, result.method)
    timer.lap("verify")
    result.skipped, result.deviations = plan.skipped, plan.deviations
    result.notes = plan.notes + result.notes
    result.counts = {
        "nodes": len(snap_nodes),
        "pods": len(plan.pods),
        "skipped_pods": len(plan.skipped),
        **{f"{k}s": len(v) for k, v in plan.owners.items()},
        **{k: len(v) for k, v in plan.api.items() if k != "nodes"},
    }
    report(
        f"restored {len(plan.pods)} pods on {len(snap_nodes)} nodes via {result.method} in "
        f"{sum(result.timings.values()):.1f}s ({len(plan.skipped)} not restored)"
    )
    return result


def _namespaces(api: Any, plan: RestorePlan) -> None:
    """Create the snapshot's namespaces; the built-in ones only get its labels."""
    for ns_body in plan.api.get("namespaces", []):
        name = ns_body["metadata"]["name"]
        if name not in BUILTIN_NAMESPACES:
            _create(api, "/api/v1/namespaces", ns_body)
        elif ns_body["metadata"].get("labels"):
            kubeapi.request(
                api,
                "PATCH",
                f"/api/v1/namespaces/{name}",
                {"metadata": {"labels": ns_body["metadata"]["labels"]}},
                content_type="application/merge-patch+json",
            )


def _restore_via_etcd(
    api: Any,
    etcd: Any,
    snap: Snapshot,
    ages: str,
    timeout: float,
    result: RestoreResult,
    timer: _Timer,
    report: Reporter,
) -> RestorePlan:
    """Nodes, storage, PDBs, owners and pods into etcd; the few others through the API.

    Through the API (admitted, validated, and the objects admission must know about):
    namespaces, ServiceAccounts, the hold, PriorityClasses, StorageClasses.
    """
    now = dt.datetime.now(dt.UTC)
    node_uids = {n["metadata"]["name"]: str(uuid.uuid4()) for n in [runner_node(), *snap.nodes]}
    plan = plan_restore(snap, now=now, ages=ages, node_uids=node_uids)  # ages shifted to now
    result.shift_s = plan.shift_s
    etcd.create(etcd_nodes(snap, node_uids, now))
    _wait_nodes_ready(api, sorted(node_uids), timeout)
    timer.lap("nodes")
    _namespaces(api, plan)
    _create_all(api, plan.api.get("serviceAccounts", []), tolerate_exists=True)
    holds = [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": HOLD_QUOTA, "namespace": ns},
            "spec": {"hard": {"pods": "0", "count/replicasets.apps": "0"}},
        }
        for ns in plan.owner_namespaces
    ]
    _create_all(api, holds)
    _wait_hold(api, plan.owner_namespaces, held=True, timeout=timeout)
    for section in ("priorityClasses", "storageClasses"):
        _create_all(api, plan.api.get(section, []))
    timer.lap("api_objects")
    barrier = Barrier(plan.owner_namespaces[0] if plan.owner_namespaces else "default", now)
    etcd.create([*etcd_storage_and_pdbs(plan, now), barrier.pdb])
    timer.lap("etcd_pvs_pvcs_pdbs")
    for kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"):
        etcd.create(plan.owners.get(kind, []))  # owners first: the GC never sees an orphan
    etcd.create([barrier.rs])  # after every owner: see Barrier
    timer.lap("etcd_owners")
    etcd.create(plan.pods)
    etcd.create([barrier.pod])  # after every pod
    result.written_at = rfc3339(dt.datetime.now(dt.UTC))
    timer.lap("etcd_pods")
    barrier.wait(api, plan, timeout)
    timer.lap("settle")
    for h in holds:
        kubeapi.request(
            api,
            "DELETE",
            f"/api/v1/namespaces/{h['metadata']['namespace']}/resourcequotas/{HOLD_QUOTA}",
        )
    _wait_hold(api, plan.owner_namespaces, held=False, timeout=timeout)
    barrier.remove(api, timeout)
    timer.lap("hold_lifted")
    return plan


class Barrier:
    """Proof that the controllers' caches hold every restored object, before the hold lifts.

    Watch events of one resource arrive in revision order, so an object written after all
    others of its kind, once a controller has acted on it, proves that controller's cache
    holds them all. Two such objects: a ReplicaSet with 0 replicas written after every owner
    (its status observed: the ReplicaSet cache is complete, so no Deployment makes a second
    one), and a bare Ready pod written after every pod, selected by a PDB of its own (the
    disruption controller counts it healthy: the shared pod cache is complete, so no
    ReplicaSet, StatefulSet or DaemonSet makes a pod the snapshot has). Then every PDB must
    be observed too: the eviction API answers 429 for a PDB its controller has not processed.
    Controllers still catching up on their own queues after that only confirm what is there.
    """

    NAME = "desched-replay-barrier"
    LABEL = "desched.pytest.io/replay-barrier"

    def __init__(self, namespace: str, now: dt.datetime) -> None:
        stamp, token = rfc3339(now), uuid.uuid4().hex[:10]
        self.namespace = namespace
        meta = {"namespace": namespace, "creationTimestamp": stamp}
        pod_labels = {self.LABEL: f"pod-{token}"}
        rs_labels = {self.LABEL: f"rs-{token}"}  # never selects the barrier pod
        container = {"name": "barrier", "image": "registry.k8s.io/pause:3.10"}
        self.rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {**meta, "name": self.NAME, "uid": str(uuid.uuid4()), "generation": 1},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": rs_labels},
                "template": {
                    "metadata": {"labels": rs_labels},
                    "spec": {"containers": [container]},
                },
            },
            "status": {},
        }
        self.pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {**meta, "name": self.NAME, "uid": str(uuid.uuid4()), "generation": 1},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": pod_labels}},
        }
        self.pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**meta, "name": self.NAME, "uid": str(uuid.uuid4()), "labels": pod_labels},
            "spec": {
                "nodeName": RUNNER_NODE,
                "containers": [container],
                "tolerations": [{"operator": "Exists"}],
                "priority": 0,
            },
            "status": _running_status({"phase": "Running"}, stamp),
        }

    def wait(self, api: Any, plan: RestorePlan, timeout: float) -> None:
        pdbs = {key(b) for b in plan.api.get("podDisruptionBudgets", [])}
        ns = self.namespace

        def probe() -> list[str]:
            waiting = []
            rs = kubeapi.get(api, f"/apis/apps/v1/namespaces/{ns}/replicasets/{self.NAME}")
            if ((rs.get("status") or {}).get("observedGeneration") or 0) < 1:
                waiting.append("the ReplicaSet controller has not reached the last owner yet")
            for pdb in kubeapi.list_all(api, "/apis/policy/v1/poddisruptionbudgets"):
                st, k = pdb.get("status") or {}, key(pdb)
                if pdb["metadata"]["name"] == self.NAME and pdb["metadata"]["namespace"] == ns:
                    if (st.get("currentHealthy") or 0) < 1:
                        waiting.append("the pod cache has not reached the last pod yet")
                elif k in pdbs and (st.get("observedGeneration") or 0) < (
                    pdb["metadata"].get("generation") or 1
                ):
                    waiting.append(f"PDB {k} not observed yet")
            return waiting

        try:
            wait_for(
                "the controllers' caches to hold every restored object, and every PDB observed",
                probe,
                lambda w: not w,
                timeout,
                describe=lambda w: f"{len(w)} waiting, e.g. {w[:5]}",
            )
        except WaitTimeout as exc:
            raise RestoreError(str(exc)) from None

    def remove(self, api: Any, timeout: float) -> None:
        """Delete the three barrier objects (the pod at once) and wait until they are gone."""
        ns, name = self.namespace, self.NAME
        paths = [
            f"/api/v1/namespaces/{ns}/pods/{name}",
            f"/apis/apps/v1/namespaces/{ns}/replicasets/{name}",
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}",
        ]
        for path in paths:
            kubeapi.request(api, "DELETE", path, {"gracePeriodSeconds": 0})

        def left() -> list[str]:
            out = []
            for path in paths:
                try:
                    kubeapi.get(api, path)
                    out.append(path)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            return out

        wait_for("the replay's barrier objects gone", left, lambda x: not x, timeout)


def etcd_nodes(snap: Snapshot, uids: dict[str, str], now: dt.datetime) -> list[dict[str, Any]]:
    """Nodes as a kubelet (here kwok) would have registered them, already Ready.

    Conditions other than Ready are the snapshot's (kwok rewrites them only at its heartbeat
    stage, after 10 minutes); a node NotReady in the snapshot is written NotReady, and kwok's
    node-initialize stage makes it Ready (see the deviations).
    """
    stamp = rfc3339(now)
    out = []
    for n in [runner_node(), *snap.nodes]:
        meta = {
            k: copy.deepcopy(v)
            for k, v in n["metadata"].items()
            if k in ("name", "labels", "annotations")
        }
        meta.setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
        meta["uid"] = uids[meta["name"]]
        meta["creationTimestamp"] = stamp
        st = n.get("status") or {}
        conds = {c["type"]: c for c in st.get("conditions") or [] if c.get("type")}
        conds.setdefault("Ready", {"type": "Ready", "status": "True", "reason": "KubeletReady"})
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            conds.setdefault(t, {"type": t, "status": "False", "reason": f"KubeletHasNo{t}"})
        status = {
            **{k: st[k] for k in ("allocatable", "capacity") if st.get(k)},
            "conditions": [
                {**c, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
                for c in conds.values()
            ],
            "phase": "Running",
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "kwok",
            },
        }
        spec = {k: v for k, v in (n.get("spec") or {}).items() if k in ("taints", "unschedulable")}
        out.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
        )
    return out


def etcd_storage_and_pdbs(plan: RestorePlan, now: dt.datetime) -> list[dict[str, Any]]:
    """PVs and PVCs written bound to each other (consistent UIDs), and PDBs (status left to
    the disruption controller, which the restore waits for)."""
    stamp = rfc3339(now)
    pvcs = {}
    for body in plan.api.get("persistentVolumeClaims", []):
        obj = copy.deepcopy(body)
        obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp)
        obj["status"] = {"phase": "Pending"}
        pvcs[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
    out = []
    for body in plan.api.get("persistentVolumes", []):
        pv = copy.deepcopy(body)
        pv["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp)
        ref = pv["spec"].get("claimRef") or {}
        claim = pvcs.get((ref.get("namespace"), ref.get("name")))
        if claim is not None and claim["spec"].get("volumeName") == pv["metadata"]["name"]:
            pv["spec"]["claimRef"] = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": ref["namespace"],
                "name": ref["name"],
                "uid": claim["metadata"]["uid"],
            }
            pv["status"] = {"phase": "Bound"}
            claim["status"] = {
                "phase": "Bound",
                "accessModes": pv["spec"].get("accessModes"),
                "capacity": pv["spec"].get("capacity"),
            }
            claim["metadata"].setdefault("annotations", {}).update(
                {
                    "pv.kubernetes.io/bind-completed": "yes",
                    "pv.kubernetes.io/bound-by-controller": "yes",
                }
            )
        else:
            pv["spec"].pop("claimRef", None)
            pv["status"] = {"phase": "Available"}
        out.append(pv)
    out += list(pvcs.values())
    for body in plan.api.get("podDisruptionBudgets", []):
        pdb = copy.deepcopy(body)
        pdb["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp, generation=1)
        out.append(pdb)
    return out


def _wait_hold(api: Any, namespaces: list[str], held: bool, timeout: float) -> None:
    """Until the API server's quota admission refuses (held) or admits (lifted) a pod.

    Proven with a server-side dry-run create per namespace, not assumed: the admission reads
    quotas from an informer, and for a namespace where that shows none it caches a live
    lookup for 30 s, so a hold created right after other objects of the namespace can be
    invisible to the controllers' creates for a while (seen: a ReplicaSet made extra pods,
    then deleted restored ones to converge).
    """
    probe_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "desched-replay-probe-"},
        "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]},
    }

    def refused(ns: str) -> bool:
        try:
            kubeapi.request(
                api, "POST", f"/api/v1/namespaces/{ns}/pods", probe_pod, query=[("dryRun", "All")]
            )
            return False
        except ApiException as exc:
            if exc.status == 403 and HOLD_QUOTA in str(exc.body or ""):
                return True
            raise RestoreError(f"dry-run pod in {ns}: {kubeapi.status_reason(exc)}") from None

    def probe() -> list[str]:
        return [ns for ns in namespaces if refused(ns) != held]

    wait_for(
        f"the replay hold {'in force' if held else 'lifted'} in {len(namespaces)} namespaces",
        probe,
        lambda pending: not pending,
        timeout,
        describe=lambda pending: f"not yet in {pending[:5]}",
        max_interval=0.2,
    )


def _wait_nodes_ready(api: Any, names: list[str], timeout: float) -> None:
    want = set(names)

    def probe() -> list[str]:
        nodes = kubeapi.list_all(api, "/api/v1/nodes")
        ready = {
            n["metadata"]["name"]
            for n in nodes
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        }
        return sorted(want - ready)

    wait_for(
        f"{len(want)} restored nodes Ready (kwok)",
        probe,
        lambda missing: not missing,
        timeout,
        describe=lambda missing: f"{len(missing)} not Ready, e.g. {missing[:5]}",
    )


_OWNER_PATHS = {
    "Deployment": "/apis/apps/v1/deployments",
    "ReplicaSet": "/apis/apps/v1/replicasets",
    "StatefulSet": "/apis/apps/v1/statefulsets",
    "DaemonSet": "/apis/apps/v1/daemonsets",
}


SYNC_ANNOTATION = "desched.pytest.io/replay-sync"


def _patch(api: Any, kind: str, ns: str, name: str, body: dict[str, Any]) -> None:
    kubeapi.request(
        api,
        "PATCH",
        f"{_OWNER_PATHS[kind].rsplit('/', 1)[0]}/namespaces/{ns}/{_OWNER_PATHS[kind].rsplit('/', 1)[1]}/{name}",
        body,
        content_type="application/merge-patch+json",
    )


def _wait_settled(
    api: Any,
    plan: RestorePlan,
    timeout: float,
    report: Reporter,
    result: RestoreResult | None = None,
) -> None:
    """Every owner's controller and every PDB has observed the restored state.

    An owner written before its pods reached its controller's cache fails its first sync (the
    hold refuses the pods it tries to make), and may fail the next one too (its cache has not
    yet seen its own status write); those retries go through the controller's rate limiter,
    10 a second for *all* owners: minutes for a thousand. So an owner its controller has
    observed with the wrong count, or any owner still waiting after a window without
    progress, is nudged with an annotation (`desched.pytest.io/replay-sync`): its update event
    queues it at once. Owners merely queued are left alone (a nudge costs a write and a sync).
    """
    active: Counter[str] = Counter()
    for p in plan.pods:
        ref = controller_of(p)
        if ref and p["status"].get("phase") not in ("Succeeded", "Failed"):
            active[ref["uid"]] += 1
    want_uids = {o["metadata"]["uid"] for objs in plan.owners.values() for o in objs}
    pdbs = {key(b) for b in plan.api.get("podDisruptionBudgets", [])}

    def probe() -> list[tuple[str, str, str, str]]:
        waiting: list[tuple[str, str, str, str]] = []
        for kind, path in _OWNER_PATHS.items():
            if not plan.owners.get(kind):
                continue
            for o in kubeapi.list_all(api, path):
                uid, ns, name = (
                    o["metadata"]["uid"],
                    o["metadata"]["namespace"],
                    o["metadata"]["name"],
                )
                if uid not in want_uids:
                    continue
                st = o.get("status") or {}
                why = None
                if (st.get("observedGeneration") or 0) < (o["metadata"].get("generation") or 1):
                    why = "not observed yet"
                elif (
                    kind in ("ReplicaSet", "StatefulSet")
                    and (st.get("replicas") or 0) != active[uid]
                ):
                    why = f"status.replicas {st.get('replicas')} != {active[uid]} restored"
                elif kind == "DaemonSet" and (st.get("currentNumberScheduled") or 0) < active[uid]:
                    why = (
                        f"currentNumberScheduled {st.get('currentNumberScheduled')} < {active[uid]}"
                    )
                if why:
                    waiting.append((kind, ns, name, why))
        if pdbs:
            for pdb in kubeapi.list_all(api, "/apis/policy/v1/poddisruptionbudgets"):
                st = pdb.get("status") or {}
                if key(pdb) in pdbs and (st.get("observedGeneration") or 0) < (
                    pdb["metadata"].get("generation") or 1
                ):
                    waiting.append(
                        (
                            "PodDisruptionBudget",
                            pdb["metadata"]["namespace"],
                            pdb["metadata"]["name"],
                            "not observed yet",
                        )
                    )
        return waiting

    def describe(w: list[tuple[str, str, str, str]]) -> str:
        return f"{len(w)} waiting, e.g. {[f'{k} {n}/{m}: {y}' for k, n, m, y in w[:5]]}"

    deadline = time.monotonic() + timeout
    nudged = 0
    before: int | None = None
    for attempt in range(1, 10_000):
        window = min(2.0, max(0.1, deadline - time.monotonic()))
        try:
            wait_for(
                "the restored owners and PDBs to be observed",
                probe,
                lambda w: not w,
                window,
                describe=describe,
            )
            break
        except WaitTimeout:
            if time.monotonic() >= deadline:
                raise RestoreError(
                    f"timed out after {timeout:.0f}s waiting for the restored owners and PDBs to be "
                    f"observed by their controllers; last seen: {describe(probe())}"
                ) from None
        waiting = probe()
        stalled = before is not None and len(waiting) >= before
        before = len(waiting)
        stuck = [
            w for w in waiting if w[0] in _OWNER_PATHS and (stalled or w[3] != "not observed yet")
        ]
        body = {"metadata": {"annotations": {SYNC_ANNOTATION: str(attempt)}}}
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda w, b=body: _patch(api, w[0], w[1], w[2], b), stuck))
        nudged += len(stuck)
    if result is not None and nudged:
        result.notes.append(
            f"{nudged} owner syncs were nudged with the {SYNC_ANNOTATION} annotation (their "
            "controllers had backed off while the restore was half written)"
        )


def verify(api: Any, plan: RestorePlan, method: str) -> tuple[dict[str, Any], list[str]]:
    """Every restored pod as written: node, phase, owner UID, creationTimestamp, startTime.

    kwok's stages act on Pending pods only (and on Running pods of Jobs, never restored), so a
    Running pod's status must be exactly what was written: checked here, not assumed.
    """
    pods = {key(p): p for p in kubeapi.list_all(api, "/api/v1/pods")}
    mismatch: Counter[str] = Counter()
    examples: list[str] = []
    for k, want in plan.expected.items():
        got = pods.get(k)
        if got is None:
            mismatch["missing"] += 1
            examples.append(f"{k}: missing")
            continue
        st, meta = got.get("status") or {}, got["metadata"]
        ref = controller_of(got)
        checks = {
            "node": (got.get("spec") or {}).get("nodeName") == want["node"] or not want["node"],
            "owner": (ref or {}).get("uid") == want["ownerUid"],
            "phase": st.get("phase") == want["phase"] or want["phase"] == "Pending",
        }
        if method == "etcd":  # through the API, the server stamps its own
            checks["creationTimestamp"] = utc(meta.get("creationTimestamp")) == utc(
                want["creationTimestamp"]
            )
        if want["startTime"] and want["phase"] != "Pending":
            checks["startTime"] = utc(st.get("startTime")) == utc(want["startTime"])
        for name, ok in checks.items():
            if not ok:
                mismatch[name] += 1
                if len(examples) < 10:
                    examples.append(f"{k}: {name} differs")
    restored = set(plan.expected)
    extra = sorted(
        k
        for k, p in pods.items()
        if k not in restored
        and controller_of(p) is not None
        and controller_of(p).get("kind") in OWNER_KINDS
    )
    return (
        {
            "pods_checked": len(plan.expected),
            "mismatches": dict(mismatch),
            "examples": examples,
            "ok": not mismatch,
            "kwok_kept_status": not (mismatch["startTime"] or mismatch["phase"]),
        },
        extra,
    )


def _restore_via_api(
    api: Any, plan: RestorePlan, result: RestoreResult, timeout: float, report: Reporter
) -> None:
    """Fallback: pods as orphans through the API, then owners (which adopt them), startTimes.

    Slower, and the API server sets creationTimestamp (PodLifeTime then sees restore-time
    ages); status.startTime is patched through the status subresource once kwok has marked
    each pod Running (earlier, kwok's pod-ready stage would overwrite it). Owners come
    bottom-up (ReplicaSets before their Deployments, which adopt them), so no controller
    makes an object the snapshot already has; the wait is for every pod to be adopted.
    """
    orphans = []
    for p in plan.pods:
        body = copy.deepcopy(p)
        body["metadata"].pop("uid", None)
        body["metadata"].pop("creationTimestamp", None)
        refs = body["metadata"].pop("ownerReferences", None)
        if refs and refs[0].get("kind") not in OWNER_KINDS:
            body["metadata"]["ownerReferences"] = refs
        body.pop("status", None)
        body["spec"].pop("priority", None)  # the Priority admission computes it
        orphans.append(body)
    _create_all(api, orphans)
    new_uid: dict[str, str] = {}
    for kind in ("ReplicaSet", "StatefulSet", "DaemonSet", "Deployment"):
        plural = _OWNER_PATHS[kind].rsplit("/", 1)[1]
        for o in plan.owners.get(kind, []):
            body = copy.deepcopy(o)
            ns = body["metadata"]["namespace"]
            for f in ("uid", "creationTimestamp", "generation"):
                body["metadata"].pop(f, None)
            body.pop("status", None)
            body["metadata"].pop("ownerReferences", None)  # adopted by its own owner
            got = _create(api, f"/apis/apps/v1/namespaces/{ns}/{plural}", body)
            if got:
                new_uid[o["metadata"]["uid"]] = got["metadata"]["uid"]
                o["metadata"]["uid"] = got["metadata"]["uid"]
    for p in plan.pods:  # the plan speaks the server's UIDs from here on
        for r in p["metadata"].get("ownerReferences") or []:
            r["uid"] = new_uid.get(r["uid"], r["uid"])
    for facts in plan.expected.values():
        facts["ownerUid"] = new_uid.get(facts["ownerUid"], facts["ownerUid"])
    result.notes.append(
        "restored through the API: creationTimestamp is the restore's (PodLifeTime sees "
        "restore-time ages); status.startTime patched after kwok marked each pod Running"
    )
    by_key = {key(p): p for p in plan.pods}

    def adopted_and_running() -> tuple[list[dict[str, Any]], list[str]]:
        running, waiting = [], []
        for p in kubeapi.list_all(api, "/api/v1/pods"):
            k = key(p)
            if k not in plan.expected:
                continue
            if (controller_of(p) or {}).get("uid") != plan.expected[k]["ownerUid"]:
                waiting.append(f"{k} not adopted yet")
            if (p.get("status") or {}).get("phase") == "Running":
                running.append(p)
        want = sum(1 for p in plan.pods if p["status"].get("phase") == "Running")
        if len(running) < want:
            waiting.append(f"{len(running)} of {want} Running")
        return running, waiting

    seen, _ = wait_for(
        "the restored pods adopted by their owners and Running (kwok)",
        adopted_and_running,
        lambda r: not r[1],
        timeout,
        describe=lambda r: f"{len(r[1])} waiting, e.g. {r[1][:5]}",
    )

    def patch(p: dict[str, Any]) -> None:
        start = by_key[key(p)]["status"].get("startTime")
        if start:
            kubeapi.request(
                api,
                "PATCH",
                f"/api/v1/namespaces/{p['metadata']['namespace']}/pods/{p['metadata']['name']}/status",
                {"status": {"startTime": start}},
                content_type="application/merge-patch+json",
            )

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(patch, seen))
    _wait_settled(api, plan, timeout, report, result)
    for p in kubeapi.list_all(api, "/api/v1/pods"):  # the pods' UIDs are the server's
        if key(p) in plan.expected:
            plan.expected[key(p)]["uid"] = p["metadata"]["uid"]
