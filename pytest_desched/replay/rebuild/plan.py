"""The restore plan (pure): every object a restore will write, decided before the first
change, with what is left out and why; the runner node and its chart values."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import (
    DESCHEDULER_LABEL,
    Snapshot,
    controller_of,
    copy_json,
    key,
    rfc3339,
    utc,
)

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
    spec = copy_json(spec)
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


def running_status(st: dict[str, Any], start: str | None) -> dict[str, Any]:
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
            spec = copy_json(src.get("spec") or {})
            spec["template"] = spec.get("template") or {}
            spec["template"]["spec"] = _clean_spec(spec["template"].get("spec") or {})
            if kind in ("DaemonSet", "StatefulSet"):
                was = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
                if was != "OnDelete":
                    spec["updateStrategy"] = {"type": "OnDelete"}
            obj: dict[str, Any] = {
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
                obj["metadata"]["ownerReferences"] = copy_json(m["ownerReferences"])
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
                owner = owner_by_name.get((kind, ns, str(name)))
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
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": spec,
            "status": running_status(st, start),
        }
        plan.pods.append(pod)
        ctrl = controller_of(pod)
        plan.expected[k] = {
            "uid": meta["uid"],
            "node": spec.get("nodeName"),
            "phase": pod["status"]["phase"],
            "creationTimestamp": meta["creationTimestamp"],
            "startTime": start,
            "owner": f"{ctrl['kind']}/{ctrl['name']}" if ctrl else None,
            "ownerUid": ctrl.get("uid") if ctrl else None,
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
        reasons = Counter(s["why"].split(":")[0] for s in plan.skipped)
        plan.notes.append(f"{len(plan.skipped)} pods not restored: {dict(reasons)}")
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
    return {k: copy_json(m[k]) for k in keys if m.get(k)}


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
