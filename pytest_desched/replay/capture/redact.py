"""Consistent renaming of a snapshot so it can be shared: same name, same alias, everywhere.

Why structured and not a text substitution: a replay must still behave like the original,
so every selector has to keep matching what it matched. One table maps each original string
to one alias wherever it appears (a node's name, a `kubernetes.io/hostname` value, a
DaemonSet pod's `matchFields`); StatefulSet pods and their PVCs are renamed by structure
(`<set>-<ordinal>`, `<template>-<set>-<ordinal>`), because the StatefulSet controller derives
those names and would otherwise "repair" them. Label keys under a custom domain get an alias
domain; values of a few well-known keys (os, arch, instance type) and plain true/false/numbers
stay. UIDs are remapped with uuid5 (still consistent, no longer the source cluster's). The
mapping is never written anywhere.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections import Counter
from typing import Any

import yaml

from pytest_desched.errors import InputError
from pytest_desched.inputs_safe import load_yaml
from pytest_desched.replay.capture.format import (
    DESCHEDULER_LABEL,
    KIND_SECTION,
    Snapshot,
    controller_of,
)
from pytest_desched.replay.capture.trim import KEEP_ANNOTATIONS

KEEP_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
KEEP_VALUE_KEYS = frozenset(
    {
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "node.kubernetes.io/instance-type",
        "apps.kubernetes.io/pod-index",
        "statefulset.kubernetes.io/pod-index",
        "node-role.kubernetes.io/control-plane",
    }
)
_KEEP_VALUE = re.compile(r"(?i)(|true|false|yes|no|\d+)")
_WELL_KNOWN_DOMAIN = re.compile(r"(^|\.)(kubernetes\.io|k8s\.io|x-k8s\.io)$")
_UID_NS = uuid.UUID("5b3c1c1e-6f6a-4d5e-9a43-3c0f0d1d2e10")
CATEGORY = {
    "namespaces": "ns",
    "nodes": "node",
    "priorityClasses": "pc",
    "storageClasses": "sc",
    "persistentVolumes": "pv",
    "persistentVolumeClaims": "pvc",
    "podDisruptionBudgets": "pdb",
    "deployments": "deploy",
    "replicaSets": "rs",
    "statefulSets": "sts",
    "daemonSets": "ds",
    "jobs": "job",
    "cronJobs": "cronjob",
    "pods": "pod",
}


class Aliases:
    """original string -> alias; the first category a string is seen in names its alias."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.domains: dict[str, str] = {}

    def __call__(self, value: str, category: str) -> str:
        if value not in self.table:
            self.counts[category] += 1
            self.table[value] = f"{category}-{self.counts[category]}"
        return self.table[value]

    def fixed(self, value: str, alias: str) -> str:
        """Register a structural alias (StatefulSet members); the first registration wins."""
        return self.table.setdefault(value, alias)

    def ns(self, name: str | None) -> str | None:
        return name if name is None or name in KEEP_NAMESPACES else self(name, "ns")

    def key(self, k: str) -> str:
        """A label/taint key: a custom domain prefix becomes `dN.example`."""
        prefix, slash, name = k.rpartition("/")
        if not slash or _WELL_KNOWN_DOMAIN.search(prefix):
            return k
        if prefix not in self.domains:
            self.domains[prefix] = f"d{len(self.domains) + 1}.example"
        return f"{self.domains[prefix]}/{name}"

    def value(self, k: str, v: Any) -> Any:
        if not isinstance(v, str) or k in KEEP_VALUE_KEYS or _KEEP_VALUE.fullmatch(v):
            return v
        if (k, v) == DESCHEDULER_LABEL:  # the replay must still recognise the descheduler
            return v
        if k in ("kubernetes.io/metadata.name",):
            return self.ns(v)
        return self(v, "v")

    def labels(self, labels: dict[str, str] | None) -> dict[str, str] | None:
        if labels is None:
            return None
        return {self.key(k): self.value(k, v) for k, v in labels.items()}

    def uid(self, u: str | None) -> str | None:
        return str(uuid.uuid5(_UID_NS, u)) if u else u

    def name(self, name: str | None, category: str) -> str | None:
        if not name:
            return name
        if category == "pc" and name.startswith("system-"):
            return name
        if category == "sa" and name == "default":
            return name
        return self(name, category)


# -- selectors -----------------------------------------------------------------------------
def _expr(a: Aliases, e: dict[str, Any], field: bool = False) -> dict[str, Any]:
    e = dict(e)
    k = str(e.get("key", ""))
    if field:  # matchFields: metadata.name -> node names
        e["values"] = [a(v, "node") for v in e.get("values") or []]
        return e
    e["key"] = a.key(k)
    if e.get("values"):
        e["values"] = [a.value(k, v) for v in e["values"]]
    return e


def label_selector(a: Aliases, sel: dict[str, Any] | None) -> dict[str, Any] | None:
    if not sel:
        return sel
    out = dict(sel)
    if sel.get("matchLabels"):
        out["matchLabels"] = a.labels(sel["matchLabels"])
    if sel.get("matchExpressions"):
        out["matchExpressions"] = [_expr(a, e) for e in sel["matchExpressions"]]
    return out


def _node_term(a: Aliases, t: dict[str, Any]) -> dict[str, Any]:
    t = dict(t)
    if t.get("matchExpressions"):
        t["matchExpressions"] = [_expr(a, e) for e in t["matchExpressions"]]
    if t.get("matchFields"):
        t["matchFields"] = [_expr(a, e, field=True) for e in t["matchFields"]]
    return t


def _pod_term(a: Aliases, t: dict[str, Any]) -> dict[str, Any]:
    t = dict(t)
    t["labelSelector"] = label_selector(a, t.get("labelSelector"))
    if t.get("namespaceSelector"):
        t["namespaceSelector"] = label_selector(a, t["namespaceSelector"])
    if t.get("namespaces"):
        t["namespaces"] = [a.ns(n) for n in t["namespaces"]]
    if t.get("topologyKey"):
        t["topologyKey"] = a.key(t["topologyKey"])
    for f in ("matchLabelKeys", "mismatchLabelKeys"):
        if t.get(f):
            t[f] = [a.key(k) for k in t[f]]
    return {k: v for k, v in t.items() if v is not None}


def affinity(a: Aliases, aff: dict[str, Any] | None) -> dict[str, Any] | None:
    if not aff:
        return aff
    out = copy.deepcopy(aff)
    na = out.get("nodeAffinity") or {}
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req:
        req["nodeSelectorTerms"] = [_node_term(a, t) for t in req.get("nodeSelectorTerms") or []]
    for p in na.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        p["preference"] = _node_term(a, p.get("preference") or {})
    for kind in ("podAffinity", "podAntiAffinity"):
        pa = out.get(kind) or {}
        if pa.get("requiredDuringSchedulingIgnoredDuringExecution"):
            pa["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _pod_term(a, t) for t in pa["requiredDuringSchedulingIgnoredDuringExecution"]
            ]
        for w in pa.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
            w["podAffinityTerm"] = _pod_term(a, w.get("podAffinityTerm") or {})
    return out


def _taints(a: Aliases, items: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not items:
        return items
    out = []
    for t in items:
        t = dict(t)
        k = str(t.get("key", ""))
        if k:
            t["key"] = a.key(k)
        if t.get("value"):
            t["value"] = a.value(k, t["value"])
        out.append(t)
    return out


def pod_spec(a: Aliases, spec: dict[str, Any]) -> dict[str, Any]:
    s = dict(spec)
    if s.get("nodeName"):
        s["nodeName"] = a(s["nodeName"], "node")
    if s.get("nominatedNodeName"):
        s["nominatedNodeName"] = a(s["nominatedNodeName"], "node")
    if s.get("nodeSelector"):
        s["nodeSelector"] = a.labels(s["nodeSelector"])
    s["affinity"] = affinity(a, s.get("affinity"))
    s["tolerations"] = _taints(a, s.get("tolerations"))
    if s.get("topologySpreadConstraints"):
        s["topologySpreadConstraints"] = [
            {
                **c,
                "topologyKey": a.key(c.get("topologyKey", "")),
                "labelSelector": label_selector(a, c.get("labelSelector")),
                **(
                    {"matchLabelKeys": [a.key(k) for k in c["matchLabelKeys"]]}
                    if c.get("matchLabelKeys")
                    else {}
                ),
            }
            for c in s["topologySpreadConstraints"]
        ]
    if s.get("priorityClassName"):
        s["priorityClassName"] = a.name(s["priorityClassName"], "pc")
    if s.get("serviceAccountName"):
        s["serviceAccountName"] = a.name(s["serviceAccountName"], "sa")
    vols = []
    for v in s.get("volumes") or []:
        v = copy.deepcopy(v)
        if "persistentVolumeClaim" in v:
            v["persistentVolumeClaim"]["claimName"] = a(
                v["persistentVolumeClaim"]["claimName"], "pvc"
            )
        if "configMap" in v and v["configMap"].get("name"):
            v["configMap"]["name"] = a(v["configMap"]["name"], "cm")
        if "secret" in v and v["secret"].get("secretName"):
            v["secret"]["secretName"] = a(v["secret"]["secretName"], "secret")
        if "hostPath" in v and v["hostPath"].get("path"):
            v["hostPath"]["path"] = "/" + a(v["hostPath"]["path"], "path")
        if (
            (v.get("ephemeral") or {})
            .get("volumeClaimTemplate", {})
            .get("spec", {})
            .get("storageClassName")
        ):
            sp = v["ephemeral"]["volumeClaimTemplate"]["spec"]
            sp["storageClassName"] = a(sp["storageClassName"], "sc")
        vols.append(v)
    if vols:
        s["volumes"] = vols
    for field in ("initContainers", "containers"):
        if s.get(field):
            s[field] = [
                {**c, "image": a(c["image"], "image")} if c.get("image") else c for c in s[field]
            ]
    return {k: v for k, v in s.items() if v is not None}


def _meta(a: Aliases, m: dict[str, Any], name: str | None) -> dict[str, Any]:
    out = dict(m)
    out["name"] = name
    if m.get("namespace"):
        out["namespace"] = a.ns(m["namespace"])
    if m.get("labels"):
        out["labels"] = a.labels(m["labels"])
    out.pop("generateName", None)
    if m.get("uid"):
        out["uid"] = a.uid(m["uid"])
    if m.get("annotations"):
        out["annotations"] = {
            k: (a(v, "v") if k == "kubernetes.io/config.mirror" else v)
            for k, v in m["annotations"].items()
            if k in KEEP_ANNOTATIONS
        }
    if m.get("ownerReferences"):
        out["ownerReferences"] = [
            {
                **r,
                "name": a(
                    r["name"],
                    "node"
                    if r.get("kind") == "Node"
                    else CATEGORY.get(_section_of(r.get("kind")), "owner"),
                ),
                "uid": a.uid(r.get("uid")),
            }
            for r in m["ownerReferences"]
        ]
    return out


def _section_of(kind: str | None) -> str:

    return KIND_SECTION.get(str(kind), "")


def _register_structure(a: Aliases, snap: Snapshot) -> None:
    """Names other names derive from: namespaces, nodes, StatefulSet members and their PVCs."""
    for n in snap.items("namespaces"):
        a.ns(n["metadata"]["name"])
    for n in snap.nodes:
        a(n["metadata"]["name"], "node")
    for s in snap.items("statefulSets"):
        a(s["metadata"]["name"], "sts")
    for sts in snap.items("statefulSets"):
        sname, salias = sts["metadata"]["name"], a.table[sts["metadata"]["name"]]
        ns = sts["metadata"]["namespace"]
        vcts = [v["metadata"]["name"] for v in sts["spec"].get("volumeClaimTemplates") or []]
        for vct in vcts:
            a(vct, "vct")
        for p in snap.pods:
            ref = controller_of(p)
            if not (ref and ref.get("kind") == "StatefulSet" and ref.get("name") == sname):
                continue
            if p["metadata"].get("namespace") != ns:
                continue
            ordinal = p["metadata"]["name"].rsplit("-", 1)[-1]
            a.fixed(p["metadata"]["name"], f"{salias}-{ordinal}")
            for vct in vcts:
                a.fixed(f"{vct}-{sname}-{ordinal}", f"{a.table[vct]}-{salias}-{ordinal}")


def redact_policy(a: Aliases, text: str | None) -> str | None:
    """Namespaces, selectors, node selector and priority class names of a policy."""
    if not text:
        return text
    try:
        doc = load_yaml(text, "the snapshot's policy")
    except InputError:  # not YAML, or past a bound (an alias bomb): never expanded here
        return "# (the policy could not be parsed, so it was withheld from the redacted snapshot)\n"

    def walk(x: Any, parent: str = "") -> Any:
        if isinstance(x, dict):
            out: dict[str, Any] = {}
            for k, v in x.items():
                if k in ("namespaces", "evictableNamespaces") and isinstance(v, dict):
                    out[k] = {kk: [a.ns(n) for n in vv or []] for kk, vv in v.items()}
                elif k in ("labelSelector", "namespaceLabelSelector", "podSelector") and isinstance(
                    v, dict
                ):
                    out[k] = label_selector(a, v)
                elif k == "nodeSelector" and isinstance(v, str):
                    out[k] = _selector_string(a, v)
                elif k == "priorityThreshold" and isinstance(v, dict) and v.get("name"):
                    out[k] = {**v, "name": a.name(v["name"], "pc")}
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(x, list):
            return [walk(v, parent) for v in x]
        return x

    return yaml.safe_dump(walk(doc), sort_keys=False)


def _selector_string(a: Aliases, s: str) -> str:
    """`k=v,k2!=v2,k3` (the descheduler's --node-selector form): keys and values renamed."""
    out = []
    for part in s.split(","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)?\s*([^\s]*)\s*", part)
        if not m:
            out.append(part)
            continue
        k, op, v = m.groups()
        out.append(f"{a.key(k)}{op or ''}{a.value(k, v) if op else ''}")
    return ",".join(out)


def redact_snapshot(snap: Snapshot, aliases: Aliases | None = None) -> Snapshot:
    """A renamed copy of `snap` (see the module docstring); the header says what changed.

    `aliases`: a table to fill and reuse (a timeline renames its changes with the same one).
    """
    a = aliases if aliases is not None else Aliases()
    _register_structure(a, snap)
    out = Snapshot(header=copy.deepcopy(snap.header), policy=None, objects={})
    for section, obj in snap.all_objects():
        out.items(section).append(redact_object(a, section, obj))
    out.policy = redact_policy(a, snap.policy)
    out.usage = redact_usage(a, snap.usage)
    _redact_header(a, out.header)
    return out


def redact_usage(a: Aliases, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """The usage section keyed by the aliases of its nodes and pods (the objects' own)."""
    if not usage:
        return usage
    out = {k: v for k, v in usage.items() if k not in ("nodes", "pods")}
    out["nodes"] = {
        alias_name(a, "nodes", n): dict(v) for n, v in (usage.get("nodes") or {}).items()
    }
    pods = {}
    for k, v in (usage.get("pods") or {}).items():
        ns, _, name = k.partition("/")
        pods[f"{a.ns(ns)}/{alias_name(a, 'pods', name)}"] = dict(v)
    out["pods"] = pods
    return out


def alias_name(a: Aliases, section: str, name: str) -> str:
    """The alias of an object's own name, by its section's rule."""
    if section == "namespaces":
        return str(a.ns(name))
    if section == "priorityClasses":
        return str(a.name(name, "pc"))
    return a(name, CATEGORY[section])


def redact_object(a: Aliases, section: str, obj: dict[str, Any]) -> dict[str, Any]:
    """One object of `section`, renamed with the table `a` (a copy)."""
    o = copy.deepcopy(obj)
    m = o.get("metadata") or {}
    o["metadata"] = _meta(a, m, alias_name(a, section, m["name"]))
    spec = o.get("spec") or {}
    if section == "nodes":
        spec["taints"] = _taints(a, spec.get("taints"))
    elif section == "pods" or section == "cronJobs":
        if section == "pods":
            o["spec"] = pod_spec(a, spec)
        else:
            t = spec["jobTemplate"]["spec"]["template"]
            t["spec"] = pod_spec(a, t.get("spec") or {})
    elif section in ("deployments", "replicaSets", "statefulSets", "daemonSets", "jobs"):
        spec["selector"] = label_selector(a, spec.get("selector"))
        t = spec.get("template") or {}
        tm = t.get("metadata") or {}
        if tm.get("labels"):
            tm["labels"] = a.labels(tm["labels"])
        t["spec"] = pod_spec(a, t.get("spec") or {})
        if spec.get("serviceName"):
            spec["serviceName"] = a(spec["serviceName"], "svc")
        for v in spec.get("volumeClaimTemplates") or []:
            v["metadata"]["name"] = a(v["metadata"]["name"], "vct")
            if v["spec"].get("storageClassName"):
                v["spec"]["storageClassName"] = a(v["spec"]["storageClassName"], "sc")
    elif section == "podDisruptionBudgets":
        spec["selector"] = label_selector(a, spec.get("selector"))
    elif section == "persistentVolumeClaims":
        if spec.get("volumeName"):
            spec["volumeName"] = a(spec["volumeName"], "pv")
        if spec.get("storageClassName"):
            spec["storageClassName"] = a(spec["storageClassName"], "sc")
    elif section == "persistentVolumes":
        if spec.get("claimRef"):
            cr = spec["claimRef"]
            spec["claimRef"] = {
                "namespace": a.ns(cr.get("namespace")),
                "name": a(cr["name"], "pvc"),
            }
        if spec.get("storageClassName"):
            spec["storageClassName"] = a(spec["storageClassName"], "sc")
        req = ((spec.get("nodeAffinity") or {}).get("required")) or None
        if req:
            req["nodeSelectorTerms"] = [
                _node_term(a, t) for t in req.get("nodeSelectorTerms") or []
            ]
    return o


def _redact_header(a: Aliases, header: dict[str, Any]) -> None:
    src = header.get("source") or {}
    if src.get("context"):
        src["context"] = "context-1"
    d = header.get("descheduler") or {}
    for entry in [d, *(header.get("otherDeschedulers") or [])]:
        if not entry:
            continue
        entry["namespace"] = a.ns(entry.get("namespace"))
        entry["name"] = a(entry["name"], "descheduler") if entry.get("name") else None
        if entry.get("configMap"):
            entry["configMap"] = {**entry["configMap"], "name": a(entry["configMap"]["name"], "cm")}
    # free text (notes) may quote any name: substitute every known original, longest first
    if a.table:
        alts = "|".join(re.escape(n) for n in sorted(a.table, key=len, reverse=True))
        pat = re.compile(rf"(?<![A-Za-z0-9])(?:{alts})(?![A-Za-z0-9])")

        def text(x: Any) -> Any:
            if isinstance(x, str):
                return pat.sub(lambda m: a.table[m.group(0)], x)
            if isinstance(x, dict):
                return {k: text(v) for k, v in x.items()}
            if isinstance(x, list):
                return [text(v) for v in x]
            return x

        for k in ("notes", "takenWith", "scope"):
            if k in header:
                header[k] = text(header[k])
    header["redacted"] = True
    header["redaction"] = {
        "aliases": dict(sorted(a.counts.items())),
        "labelDomains": len(a.domains),
        "uids": "remapped (uuid5)",
        "annotations": "only those a decision reads",
        "mapping": "never written",
    }
