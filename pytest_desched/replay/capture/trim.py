"""Trim API objects to what scheduling and the descheduler read: the filter every object passes.

Why a whitelist and not a blacklist: a snapshot leaves the cluster, so a field is kept only
when a scheduler predicate, a descheduler check, a controller or the replay needs it. What
is dropped on purpose, and counted in the header: Secrets and ServiceAccounts (never read),
projected service-account token volumes and their mounts (re-added by the replay cluster's
admission), container env/envFrom/command/args (credentials live there; no scheduling
decision reads them), `last-applied-configuration` and managedFields, node addresses. What
is left is scrubbed with `scrub_data` (always on).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pytest_desched.redaction import scrub_data

# Annotations a decision reads: the descheduler's evict/no-evict marks, mirror/static pod
# marks (DefaultEvictor checks), the cluster autoscaler's safe-to-evict (people look for it).
KEEP_ANNOTATIONS = (
    "descheduler.alpha.kubernetes.io/evict",
    "descheduler.alpha.kubernetes.io/prefer-no-eviction",
    "kubernetes.io/config.mirror",
    "kubernetes.io/config.source",
    "cluster-autoscaler.kubernetes.io/safe-to-evict",
    "deployment.kubernetes.io/revision",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
)
DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
TOKEN_VOLUME_PREFIX = "kube-api-access-"


class Filtered(Counter[str]):
    """What trimming removed, by category: the header's `filtered` section."""


def _pick(d: dict[str, Any] | None, *keys: str) -> dict[str, Any]:
    d = d or {}
    return {k: d[k] for k in keys if d.get(k) not in (None, [], {})}


def _annotations(ann: dict[str, str] | None, filtered: Filtered, keep_all: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (ann or {}).items():
        if k in DROP_ANNOTATIONS:
            filtered["annotations.last-applied-configuration"] += 1
        elif keep_all or k in KEEP_ANNOTATIONS:
            out[k] = v
        else:
            filtered["annotations.other"] += 1
    return out


def meta(obj: dict[str, Any], filtered: Filtered, keep_annotations: bool = True) -> dict[str, Any]:
    m = obj.get("metadata") or {}
    out = _pick(m, "name", "namespace", "uid", "generateName", "labels", "creationTimestamp")
    ann = _annotations(m.get("annotations"), filtered, keep_annotations)
    if ann:
        out["annotations"] = ann
    refs = [
        _pick(r, "apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
        for r in m.get("ownerReferences") or []
    ]
    if refs:
        out["ownerReferences"] = refs
    if m.get("deletionTimestamp"):
        out["deletionTimestamp"] = m["deletionTimestamp"]
    if m.get("generation") is not None:
        out["generation"] = m["generation"]
    if m.get("managedFields"):
        filtered["metadata.managedFields"] += 1
    return out


def is_token_volume(v: dict[str, Any]) -> bool:
    if str(v.get("name", "")).startswith(TOKEN_VOLUME_PREFIX):
        return True
    sources = (v.get("projected") or {}).get("sources") or []
    return any("serviceAccountToken" in s for s in sources)


def _volume(v: dict[str, Any]) -> dict[str, Any]:
    """A volume's name and source type; references keep their names, never contents."""
    out: dict[str, Any] = {"name": v.get("name")}
    if "emptyDir" in v:
        out["emptyDir"] = _pick(v.get("emptyDir"), "medium", "sizeLimit")
    elif "hostPath" in v:
        out["hostPath"] = _pick(v.get("hostPath"), "path", "type")
    elif "persistentVolumeClaim" in v:
        out["persistentVolumeClaim"] = _pick(v["persistentVolumeClaim"], "claimName", "readOnly")
    elif "ephemeral" in v:
        tmpl = ((v.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec") or {}
        out["ephemeral"] = {
            "volumeClaimTemplate": {
                "spec": _pick(tmpl, "accessModes", "resources", "storageClassName")
            }
        }
    elif "configMap" in v:
        out["configMap"] = _pick(v["configMap"], "name", "optional")
    elif "secret" in v:
        out["secret"] = _pick(v["secret"], "secretName", "optional")  # the name, never data
    else:  # nfs, csi, ...: not local storage; an optional ConfigMap stands in, the type noted
        out["configMap"] = {"name": str(v.get("name")), "optional": True}
        out["_source"] = next((k for k in v if k != "name"), "unknown")
    return out


def _container(c: dict[str, Any], token_mounts: set[str], filtered: Filtered) -> dict[str, Any]:
    out = _pick(c, "name", "image", "resources", "restartPolicy")
    ports = [
        _pick(p, "containerPort", "hostPort", "protocol", "hostIP") for p in c.get("ports") or []
    ]
    ports = [p for p in ports if p.get("hostPort")]  # only host ports constrain scheduling
    if ports:
        out["ports"] = ports
    mounts = [
        _pick(m, "name", "mountPath", "readOnly")
        for m in c.get("volumeMounts") or []
        if m.get("name") not in token_mounts
    ]
    if mounts:
        out["volumeMounts"] = mounts
    for k in ("env", "envFrom", "command", "args"):
        if c.get(k):
            filtered[f"containers.{k}"] += 1
    return out


def pod_spec(spec: dict[str, Any] | None, filtered: Filtered) -> dict[str, Any]:
    """The scheduling-relevant part of a PodSpec (also a template's)."""
    spec = spec or {}
    out = _pick(
        spec,
        "nodeName",
        "nodeSelector",
        "affinity",
        "tolerations",
        "topologySpreadConstraints",
        "priority",
        "priorityClassName",
        "preemptionPolicy",
        "schedulerName",
        "serviceAccountName",
        "automountServiceAccountToken",
        "restartPolicy",
        "terminationGracePeriodSeconds",
        "hostNetwork",
        "overhead",
        "runtimeClassName",
        "resourceClaims",
        "schedulingGates",
    )
    volumes = spec.get("volumes") or []
    token = {v.get("name") for v in volumes if is_token_volume(v)}
    filtered["pods.serviceAccountTokenVolumes"] += len(token)
    kept = [_volume(v) for v in volumes if v.get("name") not in token]
    if kept:
        out["volumes"] = kept
    for field in ("initContainers", "containers"):
        cs = [_container(c, token, filtered) for c in spec.get(field) or []]
        if cs:
            out[field] = cs
    if spec.get("ephemeralContainers"):
        filtered["pods.ephemeralContainers"] += 1
    return out


def template(tmpl: dict[str, Any] | None, filtered: Filtered) -> dict[str, Any]:
    tmpl = tmpl or {}
    m = tmpl.get("metadata") or {}
    out_meta = _pick(m, "labels")
    ann = _annotations(m.get("annotations"), filtered, keep_all=False)
    if ann:
        out_meta["annotations"] = ann
    return {"metadata": out_meta, "spec": pod_spec(tmpl.get("spec"), filtered)}


def _status(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    return _pick(obj.get("status"), *keys)


def trim(section: str, obj: dict[str, Any], filtered: Filtered) -> dict[str, Any]:
    """One object of `section`, trimmed and scrubbed (see the module docstring)."""
    spec = obj.get("spec") or {}
    out: dict[str, Any] = {"metadata": meta(obj, filtered)}
    if section == "namespaces":
        pass
    elif section == "nodes":
        out["spec"] = _pick(spec, "taints", "unschedulable")
        st = obj.get("status") or {}
        out["status"] = {
            **_pick(st, "allocatable", "capacity"),
            "conditions": [
                _pick(c, "type", "status", "reason") for c in st.get("conditions") or []
            ],
        }
        if st.get("addresses"):
            filtered["nodes.addresses"] += 1
    elif section == "priorityClasses":
        out.update(_pick(obj, "value", "globalDefault", "preemptionPolicy"))
    elif section == "storageClasses":
        out.update(_pick(obj, "provisioner", "volumeBindingMode", "reclaimPolicy"))
        if obj.get("parameters"):
            filtered["storageClasses.parameters"] += 1
    elif section == "persistentVolumes":
        keep = _pick(
            spec,
            "capacity",
            "accessModes",
            "storageClassName",
            "nodeAffinity",
            "persistentVolumeReclaimPolicy",
            "volumeMode",
        )
        if spec.get("claimRef"):
            keep["claimRef"] = _pick(spec["claimRef"], "namespace", "name")
        keep["_source"] = next(
            (k for k in ("local", "hostPath", "csi", "nfs") if k in spec), "other"
        )
        out["spec"] = keep
        out["status"] = _status(obj, "phase")
    elif section == "persistentVolumeClaims":
        out["spec"] = _pick(
            spec, "accessModes", "resources", "storageClassName", "volumeName", "volumeMode"
        )
        out["status"] = _status(obj, "phase")
    elif section == "podDisruptionBudgets":
        out["spec"] = _pick(
            spec, "minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy"
        )
        out["status"] = _status(
            obj, "disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"
        )
    elif section in ("deployments", "replicaSets", "statefulSets", "daemonSets", "jobs"):
        keep = _pick(
            spec,
            "replicas",
            "selector",
            "strategy",
            "updateStrategy",
            "paused",
            "minReadySeconds",
            "serviceName",
            "podManagementPolicy",
            "persistentVolumeClaimRetentionPolicy",
            "ordinals",
            "parallelism",
            "completions",
            "suspend",
            "manualSelector",
        )
        keep["template"] = template(spec.get("template"), filtered)
        vcts = spec.get("volumeClaimTemplates") or []
        if vcts:
            keep["volumeClaimTemplates"] = [
                {
                    "metadata": _pick(v.get("metadata"), "name", "labels"),
                    "spec": _pick(
                        v.get("spec"), "accessModes", "resources", "storageClassName", "volumeMode"
                    ),
                }
                for v in vcts
            ]
        out["spec"] = keep
        out["status"] = _status(
            obj,
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "currentNumberScheduled",
            "desiredNumberScheduled",
            "numberReady",
            "active",
            "observedGeneration",
        )
    elif section == "cronJobs":
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        pod = (job_spec.get("template") or {}).get("spec") or {}
        out["spec"] = {
            **_pick(spec, "schedule", "suspend"),
            "jobTemplate": {"spec": {"template": {"spec": pod_spec(pod, filtered)}}},
        }
    elif section == "pods":
        out["spec"] = pod_spec(spec, filtered)
        st = obj.get("status") or {}
        status = _pick(st, "phase", "reason", "startTime", "nominatedNodeName", "qosClass")
        conds = [_pick(c, "type", "status", "reason") for c in st.get("conditions") or []]
        if conds:
            status["conditions"] = conds
        out["status"] = status
    return scrub_data(out)


def keep_container_args(c: dict[str, Any]) -> list[str]:
    """A descheduler container's flags, scrubbed: the replay records them beside its own."""
    return [str(a) for a in scrub_data(list(c.get("command") or []) + list(c.get("args") or []))]
