"""Apply one timeline change to the replay cluster, the way the incident's actors made it.

What is applied and what is only observed, and why:
- Nodes, namespaces, PDBs, PriorityClasses and the workloads' own objects (Deployments,
  StatefulSets, DaemonSets, ReplicaSets no controller owns) are what people and tools change
  during an incident (a pool label moved, a node cordoned or tainted, a PDB tightened, a
  Deployment scaled): applied. An update sets exactly the recorded labels (removed ones
  removed) and the fields a decision reads (a Node's taints and unschedulable; a workload's
  replicas and template; a PDB's spec), as a JSON merge patch on the live object, so the
  replay's own UIDs, resource versions and restore deviations (`OnDelete`) stay.
- Pods a controller owns are made, replaced and deleted by that controller in the replay
  too, and evictions are the descheduler's: applying them would act twice. They are observed
  (kept in the timeline for comparison), counted, never applied. Pods without a controller
  are applied (created bound to their node, deleted, relabelled).
- A `patch` (from an audit log that kept no object) is sent as the merge patch it was.

One outcome per change (`applied`, `observed`, `skipped: why`, `failed: answer`); a failure
never stops the replay: the ledger lists it.
"""

from __future__ import annotations

import copy
from typing import Any

from kubernetes.client.rest import ApiException

from pytest_desched.replay import kubeapi, objects
from pytest_desched.replay.capture.format import controller_of
from pytest_desched.replay.capture.timeline import Change

APPLIED, OBSERVED = "applied", "observed"
CONTROLLED_BY = ("ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Deployment")
WORKLOADS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")
_MERGE = "application/merge-patch+json"


def object_path(c: Change) -> str:
    return objects.object_path(c.kind, c.namespace, c.name)


def observed_only(c: Change) -> str | None:
    """Why a change is observed and never applied (None: it is applied)."""
    if c.verb == "evict":
        return "the incident's own eviction: the replay's descheduler decides"
    obj = c.object or {}
    if c.kind == "Pod":
        ref = controller_of(obj) if obj else None
        if ref and ref.get("kind") in CONTROLLED_BY:
            return f"a pod its {ref.get('kind')} makes and deletes in the replay too"
    if c.kind == "ReplicaSet" and controller_of(obj):
        return "a ReplicaSet its Deployment makes in the replay too"
    if c.kind in ("Job", "CronJob"):
        return "Jobs are not restored (kwok completes their pods at once)"
    return None


def label_patch(live: dict[str, str] | None, want: dict[str, str] | None) -> dict[str, Any]:
    """A merge patch taking labels (or annotations) from `live` to exactly `want`."""
    live, want = live or {}, want or {}
    patch: dict[str, Any] = {k: v for k, v in want.items() if live.get(k) != v}
    patch.update({k: None for k in live if k not in want})
    return patch


def update_patch(c: Change, live: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that takes the live object to the recorded one (see the docstring)."""
    want = c.object or {}
    wm, lm = want.get("metadata") or {}, live.get("metadata") or {}
    patch: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    labels = label_patch(lm.get("labels"), wm.get("labels"))
    if labels:
        meta["labels"] = labels
    if meta:
        patch["metadata"] = meta
    ws, ls = want.get("spec") or {}, live.get("spec") or {}
    spec: dict[str, Any] = {}
    if c.kind == "Node":
        if ws.get("taints") != ls.get("taints"):
            spec["taints"] = ws.get("taints")
        if bool(ws.get("unschedulable")) != bool(ls.get("unschedulable")):
            spec["unschedulable"] = bool(ws.get("unschedulable")) or None
    elif c.kind in WORKLOADS:
        if "replicas" in ws and ws.get("replicas") != ls.get("replicas"):
            spec["replicas"] = ws["replicas"]
        tmpl = ws.get("template")
        if tmpl is not None and _template_differs(tmpl, ls.get("template") or {}):
            spec["template"] = tmpl
    elif c.kind == "PodDisruptionBudget":
        for k in ("minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy"):
            if ws.get(k) != ls.get(k):
                spec[k] = ws.get(k)
    if spec:
        patch["spec"] = spec
    return patch


def _template_differs(want: dict[str, Any], live: dict[str, Any]) -> bool:
    """Only what the recorder keeps is compared (the live template has defaults filled)."""
    wl = (want.get("metadata") or {}).get("labels")
    ll = (live.get("metadata") or {}).get("labels")
    wspec, lspec = want.get("spec") or {}, live.get("spec") or {}
    keys = ("nodeSelector", "affinity", "tolerations", "priorityClassName")
    return wl != ll or any(wspec.get(k) != lspec.get(k) for k in keys)


def create_body(c: Change) -> dict[str, Any]:
    """A create body from a recorded object: no UID, owner or version of the incident's."""
    body = copy.deepcopy(c.object or {})
    body["apiVersion"], body["kind"] = objects.KINDS[c.kind].api_version, c.kind
    meta = body.setdefault("metadata", {})
    for k in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences", "generation"):
        meta.pop(k, None)
    meta.pop("deletionTimestamp", None)
    if c.kind != "Node":  # a Node's status is kwok's to keep, but its capacity is the record's
        body.pop("status", None)
    if c.kind == "PersistentVolume":
        (body.get("spec") or {}).pop("_source", None)
    return body


def apply_change(api: Any, c: Change) -> str:
    """Apply `c` to the replay cluster; returns its outcome (see the module docstring)."""
    why = observed_only(c)
    if why:
        return f"{OBSERVED}: {why}"
    path = object_path(c)
    try:
        if c.verb == "delete":
            kubeapi.request(api, "DELETE", path)
        elif c.verb == "patch":
            kubeapi.request(api, "PATCH", path, c.patch, content_type=_MERGE)
        elif c.verb == "create":
            try:
                kubeapi.request(
                    api, "POST", objects.collection_path(c.kind, c.namespace), create_body(c)
                )
            except ApiException as exc:
                if exc.status != 409:
                    raise
                return _update(api, c, path)  # there already (restored, or seen twice)
        else:
            return _update(api, c, path)
    except ApiException as exc:
        if c.verb == "delete" and exc.status == 404:
            return "skipped: already gone"
        return f"failed: {kubeapi.status_reason(exc)}"
    return APPLIED


def _update(api: Any, c: Change, path: str) -> str:
    live = kubeapi.get(api, path)
    patch = update_patch(c, live)
    if not patch:
        return "skipped: nothing a decision reads changed"
    kubeapi.request(api, "PATCH", path, patch, content_type=_MERGE)
    return APPLIED
