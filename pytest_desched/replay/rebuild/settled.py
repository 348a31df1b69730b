"""Owners and PDBs written as their controllers leave them, so settle has nothing to write.

The etcd restore writes owners and PDBs with an empty status; each controller then computes
it and writes it (1,446 Deployments cost about 4,000 status writes, 2.8 each, plus their
ReplicaSets', PDBs' and the revision annotations), which was most of a restore's settle.
Every controller compares what it computes with what is stored and writes only on a
difference, so a status written here that equals the controller's result costs it nothing,
and one that does not equal it is simply overwritten by the controller: a write here never
decides anything the controller would decide otherwise. The rules, from kube-controller-
manager v1.36 (pkg/controller):

- ReplicaSet (replicaset/replica_set_utils.go calculateStatus, updateReplicaSetStatus):
  replicas = its active pods (controlled by it, selector matching, not terminal, not
  deleted), fullyLabeledReplicas = those matching the template's labels, readyReplicas =
  Ready ones, availableReplicas = Ready for minReadySeconds, terminatingReplicas 0 (gate
  DeploymentReplicaSetTerminatingReplicas, on since 1.35), observedGeneration = generation.
- Deployment (deployment/sync.go getNewReplicaSet, calculateStatus; progress.go
  syncRolloutStatus): the new ReplicaSet (the oldest whose template equals the Deployment's,
  pod-template-hash aside) carries revision max(old) + 1 (unless higher) and the
  Deployment's annotations; the Deployment carries the new ReplicaSet's revision; status
  counts are sums of its ReplicaSets' statuses; conditions Available (True,
  MinimumReplicasAvailable) and Progressing (True, NewReplicaSetAvailable). Written only for
  a Deployment at rest (complete, not paused, no scaling or old ReplicaSet to scale down):
  any other is left to its controller, as before.
- PodDisruptionBudget (disruption/disruption.go trySync, updatePdbStatus): expectedPods,
  desiredHealthy, currentHealthy (Ready, not deleted), disruptionsAllowed, the
  DisruptionAllowed condition, observedGeneration = generation. Left to the controller when a
  selected pod's controller has no scale the controller can read here (a DaemonSet, an
  operator's kind) and the budget needs one (maxUnavailable or a percentage).

StatefulSets and DaemonSets are left to their controllers: their status names
ControllerRevisions (hashes of the template) that a snapshot does not have.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from pytest_desched.replay.capture.format import controller_of, utc

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
# copyDeploymentAnnotationsToReplicaSet skips these (deployment_util.go annotationsToSkip)
NOT_COPIED = {
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
}
HASH_LABEL = "pod-template-hash"
NO_DEADLINE = 2**31 - 1  # progressDeadlineSeconds = MaxInt32: no Progressing condition
REV_HISTORY_CHARS = 2000  # maxRevHistoryLengthInChars


# -- the primitives the controllers use -------------------------------------------------------
def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(...).Matches(labels); an empty selector matches all."""
    sel = selector or {}
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        has = k in labels
        if op == "In" and not (has and labels[k] in vals):
            return False
        if op == "NotIn" and has and labels[k] in vals:
            return False
        if op == "Exists" and not has:
            return False
        if op == "DoesNotExist" and has:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"selector operator {op!r}")
    return True


def pod_ready(pod: dict[str, Any]) -> bool:
    """podutil.IsPodReady: the Ready condition is True."""
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def pod_available(pod: dict[str, Any], min_ready_s: int, now: Any) -> bool:
    """podutil.IsPodAvailable: Ready, and for minReadySeconds (a missing transition time is
    the zero time: long enough)."""
    if not pod_ready(pod):
        return False
    if min_ready_s <= 0:
        return True
    cond = next(c for c in pod["status"]["conditions"] if c.get("type") == "Ready")
    since = utc(cond.get("lastTransitionTime"))
    return since is None or since.timestamp() + min_ready_s <= now.timestamp()


def pod_active(pod: dict[str, Any]) -> bool:
    """controller.IsPodActive: not Succeeded/Failed, not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def scaled(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, str) and value.endswith("%"):
        f = int(value[:-1]) * total / 100
        return int(math.ceil(f) if round_up else math.floor(f))
    return int(value)


def _semantic(x: Any) -> Any:
    """apiequality.Semantic.DeepEqual treats nil and empty maps/slices alike: drop them."""
    if isinstance(x, dict):
        return {k: _semantic(v) for k, v in x.items() if v not in (None, {}, [])}
    if isinstance(x, list):
        return [_semantic(v) for v in x]
    return x


def equal_ignore_hash(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """deploymentutil.EqualIgnoreHash, conservatively: the two templates as stored, the
    pod-template-hash label aside (a template that differs only by a field the API server
    defaults is not matched here; its Deployment is then left to the controller)."""

    def strip(t: dict[str, Any]) -> Any:
        t = {**t, "metadata": dict(t.get("metadata") or {})}
        t["metadata"]["labels"] = {
            k: v for k, v in (t["metadata"].get("labels") or {}).items() if k != HASH_LABEL
        }
        return _semantic(t)

    return bool(strip(a) == strip(b))


def _replicas(obj: dict[str, Any]) -> int:
    r = (obj.get("spec") or {}).get("replicas")
    return 1 if r is None else int(r)  # the API server's default


def _revision(obj: dict[str, Any]) -> int | None:
    v = (obj["metadata"].get("annotations") or {}).get(REVISION)
    if v is None:
        return 0
    try:
        return int(v)
    except ValueError:
        return None  # the controller skips it (MaxRevision) or gives up (SetNewRS...)


class PodIndex:
    """Pods by namespace and by label, so each selector looks at its candidates only."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.by_ns: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.by_label: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for p in pods:
            ns = p["metadata"]["namespace"]
            self.by_ns[ns].append(p)
            for k, v in (p["metadata"].get("labels") or {}).items():
                self.by_label[(ns, k, v)].append(p)

    def select(self, ns: str, sel: dict[str, Any] | None) -> list[dict[str, Any]]:
        """Pods of `ns` the selector selects (none selects nothing, an empty one all)."""
        if sel is None:
            return []
        first = next(iter((sel.get("matchLabels") or {}).items()), None)
        pool = self.by_label.get((ns, *first), []) if first else self.by_ns.get(ns, [])
        return [p for p in pool if selector_matches(sel, p["metadata"].get("labels") or {})]


# -- the three statuses ----------------------------------------------------------------------
def replicaset_status(rs: dict[str, Any], pods: list[dict[str, Any]], now: Any) -> dict[str, Any]:
    """What the ReplicaSet controller writes for `rs` with these pods (its own, by UID)."""
    spec = rs.get("spec") or {}
    tmpl_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    active = [
        p
        for p in pods
        if pod_active(p)
        and selector_matches(spec.get("selector"), p["metadata"].get("labels") or {})
    ]
    labels = [p["metadata"].get("labels") or {} for p in active]
    min_ready = int(spec.get("minReadySeconds") or 0)
    return {
        "replicas": len(active),
        "fullyLabeledReplicas": sum(
            all(lb.get(k) == v for k, v in tmpl_labels.items()) for lb in labels
        ),
        "readyReplicas": sum(pod_ready(p) for p in active),
        "availableReplicas": sum(pod_available(p, min_ready, now) for p in active),
        "terminatingReplicas": 0,
        "observedGeneration": rs["metadata"].get("generation") or 1,
    }


def settle_deployment(
    dep: dict[str, Any], rss: list[dict[str, Any]], stamp: str
) -> dict[str, Any] | None:
    """The Deployment's status at rest and the annotations its controller sets (on it and on
    its new ReplicaSet, mutated in place), or None when it is not at rest (then nothing is
    changed). `rss`: its ReplicaSets, statuses already settled."""
    spec = dep.get("spec") or {}
    if spec.get("paused") or not rss:
        return None
    ordered = sorted(
        rss, key=lambda r: (r["metadata"].get("creationTimestamp") or "", r["metadata"]["name"])
    )
    new = next(
        (
            r
            for r in ordered
            if equal_ignore_hash(r["spec"].get("template") or {}, spec.get("template") or {})
        ),
        None,
    )
    if new is None:
        return None
    old = [r for r in rss if r is not new]
    replicas = _replicas(dep)
    desired = (new["metadata"].get("annotations") or {}).get(DESIRED_REPLICAS)
    if (
        _replicas(new) != replicas
        or any(_replicas(r) for r in old)
        or (desired is not None and desired != str(replicas))
    ):
        return None  # a scaling or a rollout: the controller writes, as it would
    status = {
        "observedGeneration": dep["metadata"].get("generation") or 1,
        "replicas": sum(r["status"]["replicas"] for r in rss),
        "updatedReplicas": new["status"]["replicas"],
        "readyReplicas": sum(r["status"]["readyReplicas"] for r in rss),
        "availableReplicas": sum(r["status"]["availableReplicas"] for r in rss),
        "terminatingReplicas": 0,
    }
    if (
        not status["updatedReplicas"]
        == status["replicas"]
        == status["availableReplicas"]
        == replicas
    ):
        return None  # not complete: its Progressing condition depends on the rollout's past
    # The revision annotations (getNewReplicaSet, SetNewReplicaSetAnnotations).
    old_revs = [_revision(r) for r in old]
    new_rev = max([v for v in old_revs if v is not None], default=0) + 1
    rs_meta = new["metadata"]
    mine = rs_meta.get("annotations") or {}
    have = _revision(new)
    if have is None:
        return None  # not an integer: the controller gives up on it, so do we
    ann = dict(mine)
    for k, v in (dep["metadata"].get("annotations") or {}).items():
        if k not in NOT_COPIED:
            ann[k] = v
    if have < new_rev:
        ann[REVISION] = str(new_rev)
        if REVISION in mine:  # a rollback to this ReplicaSet keeps its old revision
            hist = [h for h in (mine.get(REVISION_HISTORY) or "").split(",") if h]
            hist.append(mine[REVISION])
            while len(",".join(hist)) > REV_HISTORY_CHARS:
                hist.pop(0)
            ann[REVISION_HISTORY] = ",".join(hist)
    rs_meta["annotations"] = ann
    if (new["spec"].get("minReadySeconds") or 0) != (spec.get("minReadySeconds") or 0):
        new["spec"]["minReadySeconds"] = spec.get("minReadySeconds") or 0
    dep["metadata"].setdefault("annotations", {})[REVISION] = ann[REVISION]
    conditions = [
        {
            "type": "Available",
            "status": "True",
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
        }
    ]
    if spec.get("progressDeadlineSeconds", 600) != NO_DEADLINE:
        conditions.append(
            {
                "type": "Progressing",
                "status": "True",
                "lastUpdateTime": stamp,
                "lastTransitionTime": stamp,
                "reason": "NewReplicaSetAvailable",
                "message": f'ReplicaSet "{rs_meta["name"]}" has successfully progressed.',
            }
        )
    # availableReplicas == replicas here, so Available holds (>= replicas - maxUnavailable)
    # and unavailableReplicas is 0 (omitted, as the API server stores it).
    return {**status, "conditions": conditions}


def pdb_status(
    pdb: dict[str, Any],
    pods: list[dict[str, Any]] | PodIndex,
    scale_of: dict[tuple[str, str], tuple[str, int] | None],
    stamp: str,
) -> dict[str, Any] | None:
    """What the disruption controller writes for `pdb` with these pods, or
    None when it needs a controller's scale not known here. `scale_of`: (kind, uid) of a
    pod's controller -> (the scaled controller's uid, its replicas), None when unreadable."""
    spec = pdb.get("spec") or {}
    sel = spec.get("selector")  # none selects nothing, an empty one everything
    if isinstance(pods, list):
        pods = PodIndex(pods)
    mine = pods.select(pdb["metadata"]["namespace"], sel)
    if any(
        isinstance(v, str) and not v.endswith("%")
        for v in (spec.get("minAvailable"), spec.get("maxUnavailable"))
    ):
        return None  # the controller fails on it (and writes its fail-safe status)

    def expected_scale() -> int | None:
        scales: dict[str, int] = {}
        for p in mine:
            ref = controller_of(p)
            if ref is None:
                continue  # unmanaged: logged and left out by the controller
            found = scale_of.get((str(ref.get("kind")), str(ref.get("uid"))))
            if found is None:
                return None
            scales[found[0]] = found[1]
        return sum(scales.values())

    if spec.get("maxUnavailable") is not None:
        expected = expected_scale()
        if expected is None:
            return None
        desired = max(0, expected - scaled(spec["maxUnavailable"], expected, True))
    elif spec.get("minAvailable") is not None:
        if isinstance(spec["minAvailable"], int):
            desired, expected = spec["minAvailable"], len(mine)
        else:
            scale = expected_scale()
            if scale is None:
                return None
            expected, desired = scale, scaled(spec["minAvailable"], scale, True)
    else:
        desired = expected = 0
    healthy = sum(1 for p in mine if not p["metadata"].get("deletionTimestamp") and pod_ready(p))
    allowed = healthy - desired if expected > 0 and healthy - desired > 0 else 0
    gen = pdb["metadata"].get("generation") or 1
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "observedGeneration": gen,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "",
                "observedGeneration": gen,
                "lastTransitionTime": stamp,
            }
        ],
    }


# -- the plan's objects -----------------------------------------------------------------------
def settle(
    owners: dict[str, list[dict[str, Any]]],
    pods: list[dict[str, Any]],
    pdbs: list[dict[str, Any]],
    now: Any,
    stamp: str,
) -> dict[str, int]:
    """Write the settled statuses into the plan's owners and PDBs (in place); returns how
    many of each were settled (the rest keep an empty status for their controllers)."""
    by_owner: dict[str, list[dict[str, Any]]] = defaultdict(list)
    index = PodIndex(pods)
    for p in pods:
        ref = controller_of(p)
        if ref is not None:
            by_owner[str(ref.get("uid"))].append(p)
    counts = {"ReplicaSet": 0, "Deployment": 0, "PodDisruptionBudget": 0}
    rs_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    scale_of: dict[tuple[str, str], tuple[str, int] | None] = {}
    deployments = {d["metadata"]["uid"]: d for d in owners.get("Deployment", [])}
    for rs in owners.get("ReplicaSet", []):
        uid = rs["metadata"]["uid"]
        rs["status"] = replicaset_status(rs, by_owner.get(uid, []), now)
        counts["ReplicaSet"] += 1
        ref = controller_of(rs)
        dep = (
            deployments.get(str(ref.get("uid")))
            if ref and ref.get("kind") == "Deployment"
            else None
        )
        if dep is not None:
            rs_of[dep["metadata"]["uid"]].append(rs)
            scale_of[("ReplicaSet", uid)] = (dep["metadata"]["uid"], _replicas(dep))
        elif ref is None:
            scale_of[("ReplicaSet", uid)] = (uid, _replicas(rs))
        else:
            scale_of[("ReplicaSet", uid)] = None  # its controller is not restored
    for sts in owners.get("StatefulSet", []):
        scale_of[("StatefulSet", sts["metadata"]["uid"])] = (sts["metadata"]["uid"], _replicas(sts))
    for uid, dep in deployments.items():
        st = settle_deployment(dep, rs_of.get(uid, []), stamp)
        if st is not None:
            dep["status"] = st
            counts["Deployment"] += 1
    for pdb in pdbs:
        st = pdb_status(pdb, index, scale_of, stamp)
        if st is not None:
            pdb["status"] = st
            counts["PodDisruptionBudget"] += 1
    return counts
