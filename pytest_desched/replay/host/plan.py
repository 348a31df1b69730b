"""The host replay's plan (pure): what a replay on someone else's cluster will write, decided
and refused before the first write (docs/replay-at-scale.md, "the replay on an existing
cluster's control plane").

Every object the replay creates carries `RUN_LABEL=<run id>` (namespaces, fake nodes and the
cluster-scoped objects; everything else lives in a namespace it created), and teardown deletes
by that label only (`host.teardown`). The snapshot is rewritten, never the host:

- namespaces: a snapshot namespace the host already has is refused unless `--namespace-prefix`
  is given; then every snapshot namespace is prefixed (one rule, so the ledger reads the same
  whatever the host holds), and the policy's namespace filters are rewritten with the mapping;
- nodes: annotated for kwok (`kwok.x-k8s.io/node: fake`), labelled with the run, tainted
  `kwok.x-k8s.io/node=fake:NoSchedule` so nothing of the host's lands there;
- pods and owner templates: the taint's toleration plus a required node-affinity term on the
  run label, ANDed into every existing term, so neither the pods nor their replacements can
  land on a real node (a toleration alone would allow it); both recorded as deviations;
- cluster-scoped objects (PriorityClasses, StorageClasses, PersistentVolumes): one the host
  already holds identically is used, not created; one that differs is refused; a global
  default PriorityClass is written without `globalDefault` (it would change the host's own
  pods' priority) and its name is set on the snapshot's pods that named no class.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import Snapshot, copy_json
from pytest_desched.replay.rebuild.plan import KWOK_NODE_ANNOTATION, SECTION_OF_KIND

RUN_LABEL = "desched.pytest.io/host-replay-run"
ROLE_LABEL = "desched.pytest.io/host-replay-role"  # "kwok" on the kwok controller's objects
FAKE_TAINT = {"key": KWOK_NODE_ANNOTATION, "value": "fake", "effect": "NoSchedule"}
FAKE_TOLERATION = {
    "key": KWOK_NODE_ANNOTATION,
    "operator": "Equal",
    "value": "fake",
    "effect": "NoSchedule",
}
PREFIX_OPTION = "--namespace-prefix"
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def new_run_id() -> str:
    """A run id fit for a label value and a name part (10 lowercase hex digits)."""
    return secrets.token_hex(5)


@dataclass
class HostState:
    """What the host holds that the plan must not clash with (read before any write)."""

    namespaces: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    priority_classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    storage_classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    persistent_volumes: set[str] = field(default_factory=set)


@dataclass
class HostPlan:
    """The rewritten snapshot and every decision that made it, for the replay's evidence."""

    run_id: str
    snapshot: Snapshot
    namespaces: dict[str, str]  # snapshot namespace -> host namespace
    nodes: list[str]
    reused: list[str] = field(default_factory=list)  # host objects used as they are
    deviations: list[str] = field(default_factory=list)

    @property
    def node_selector(self) -> str:
        """The one term that selects this run's fake nodes (and nothing of the host's)."""
        return f"{RUN_LABEL}={self.run_id}"

    @property
    def host_namespaces(self) -> list[str]:
        return sorted(self.namespaces.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "namespaces": dict(sorted(self.namespaces.items())),
            "nodes": len(self.nodes),
            "node_selector": self.node_selector,
            "reused": self.reused,
            "deviations": self.deviations,
        }


def snapshot_namespaces(snap: Snapshot) -> list[str]:
    """Every namespace the snapshot lists or uses."""
    names = {n["metadata"]["name"] for n in snap.items("namespaces")}
    names |= {
        o["metadata"]["namespace"] for _, o in snap.all_objects() if o["metadata"].get("namespace")
    }
    return sorted(names)


def map_namespaces(
    wanted: Iterable[str], host: set[str], prefix: str | None, reserved: Iterable[str] = ()
) -> dict[str, str]:
    """Snapshot namespace -> host namespace; ConfigError (nothing written) on any clash.

    Without a prefix every namespace keeps its name and one the host has is refused; with
    one every namespace is prefixed and a prefixed name the host has is refused as well.
    `reserved`: the replay's own namespaces (the release's, kwok's), never a snapshot's.
    """
    wanted = sorted(set(wanted))
    taken = set(host) | set(reserved)
    if prefix is not None and not _DNS1123_LABEL.fullmatch(prefix.rstrip("-") or "-"):
        raise ConfigError(
            f"{PREFIX_OPTION} {prefix!r}: lowercase letters, digits and '-', starting with a "
            "letter or digit (e.g. replay-)"
        )
    mapping = {ns: f"{prefix}{ns}" if prefix else ns for ns in wanted}
    too_long = [m for m in mapping.values() if len(m) > 63]
    if too_long:
        raise ConfigError(
            f"namespace {too_long[0]} is longer than 63 characters; use a shorter {PREFIX_OPTION}"
        )
    clash = sorted(ns for ns, m in mapping.items() if m in taken)
    if clash:
        where = ", ".join(f"{ns} (as {mapping[ns]})" if prefix else ns for ns in clash[:10])
        fix = (
            f"choose another {PREFIX_OPTION}"
            if prefix
            else f"map them with {PREFIX_OPTION} PREFIX (e.g. {PREFIX_OPTION} replay-)"
        )
        raise ConfigError(
            f"{len(clash)} snapshot namespace(s) already exist on the host: {where}; {fix}"
        )
    return mapping


def _same(a: Mapping[str, Any], b: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    return all(a.get(k) == b.get(k) for k in keys)


def _affinity_with_run(spec: dict[str, Any], run_id: str) -> None:
    """AND `RUN_LABEL In [run_id]` into every required node-selector term (or add one)."""
    term = {"key": RUN_LABEL, "operator": "In", "values": [run_id]}
    aff = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    req = aff.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = req.get("nodeSelectorTerms") or [{}]
    for t in terms:
        t.setdefault("matchExpressions", []).append(dict(term))
    req["nodeSelectorTerms"] = terms


def _confine(spec: dict[str, Any], run_id: str, default_class: str | None) -> None:
    """A pod spec fit for the host: tolerates the fake nodes, can land on nothing else."""
    tols = spec.setdefault("tolerations", [])
    if FAKE_TOLERATION not in tols:
        tols.append(dict(FAKE_TOLERATION))
    _affinity_with_run(spec, run_id)
    if default_class and not spec.get("priorityClassName"):
        spec["priorityClassName"] = default_class


def _map_pod_namespaces(spec: dict[str, Any], ns_of: Callable[[str], str]) -> None:
    """Pod (anti-)affinity terms that name namespaces: the mapped names."""
    for kind in ("podAffinity", "podAntiAffinity"):
        block = (spec.get("affinity") or {}).get(kind) or {}
        for terms in block.values():
            for t in terms or []:
                t = t.get("podAffinityTerm", t)
                if t.get("namespaces"):
                    t["namespaces"] = [ns_of(n) for n in t["namespaces"]]


def _check_cluster_scoped(
    snap: Snapshot, host: HostState
) -> tuple[set[tuple[str, str]], list[str], list[str]]:
    """(objects to leave out as the host has them, reused lines, refusals)."""
    drop: set[tuple[str, str]] = set()
    reused, refused = [], []
    for section, have, keys in (
        ("priorityClasses", host.priority_classes, ("value",)),
        ("storageClasses", host.storage_classes, ("provisioner",)),
    ):
        for o in snap.items(section):
            name = o["metadata"]["name"]
            if name.startswith("system-") and section == "priorityClasses":
                continue  # built in on every cluster; the restore never writes them
            if name not in have:
                continue
            if _same(o, have[name], keys):
                drop.add((section, name))
                reused.append(f"{section[:-1]} {name} (the host's, identical {', '.join(keys)})")
            else:
                refused.append(
                    f"{section[:-1]} {name} exists on the host with other "
                    f"{', '.join(f'{k} {have[name].get(k)!r}' for k in keys)} than the "
                    f"snapshot's ({', '.join(repr(o.get(k)) for k in keys)})"
                )
    for pv in snap.items("persistentVolumes"):
        if pv["metadata"]["name"] in host.persistent_volumes:
            refused.append(f"PersistentVolume {pv['metadata']['name']} exists on the host")
    return drop, reused, refused


def plan_host(
    snap: Snapshot, host: HostState, run_id: str, prefix: str | None, reserved: Iterable[str] = ()
) -> HostPlan:
    """The snapshot rewritten for the host (see the module docstring); ConfigError on a clash."""
    mapping = map_namespaces(snapshot_namespaces(snap), host.namespaces, prefix, reserved)
    node_clash = sorted({n["metadata"]["name"] for n in snap.nodes} & host.nodes)
    if node_clash:
        raise ConfigError(
            f"{len(node_clash)} snapshot node name(s) are the host's own nodes: "
            f"{', '.join(node_clash[:10])}; replay on a host whose node names differ"
        )
    drop, reused, refused = _check_cluster_scoped(snap, host)
    if refused:
        raise ConfigError(
            f"the host already has objects the replay would create: {'; '.join(refused[:5])}; "
            "replay on a host without them"
        )

    def ns_of(ns: str) -> str:
        return mapping[ns]

    objects: dict[str, list[dict[str, Any]]] = {}
    for section, items in snap.objects.items():
        kept = []
        for o in items:
            if (section, o["metadata"]["name"]) in drop:
                continue
            o = copy_json(o)
            meta = o["metadata"]
            if meta.get("namespace"):
                meta["namespace"] = ns_of(meta["namespace"])
            kept.append(o)
        objects[section] = kept
    listed = {n["metadata"]["name"] for n in objects.get("namespaces", [])}
    for n in objects.get("namespaces", []):
        n["metadata"]["name"] = ns_of(n["metadata"]["name"])
    objects["namespaces"] = objects.get("namespaces", []) + [
        {"metadata": {"name": m}} for ns, m in sorted(mapping.items()) if ns not in listed
    ]
    default_class = None
    for pc in objects.get("priorityClasses", []):
        if pc.get("globalDefault"):
            default_class = pc["metadata"]["name"]
            pc.pop("globalDefault")
    for section in ("namespaces", "nodes", "priorityClasses", "storageClasses"):
        for o in objects.get(section, []):
            o["metadata"].setdefault("labels", {})[RUN_LABEL] = run_id
    for pv in objects.get("persistentVolumes", []):
        pv["metadata"].setdefault("labels", {})[RUN_LABEL] = run_id
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("namespace") in mapping:
            ref["namespace"] = ns_of(ref["namespace"])
    for node in objects.get("nodes", []):
        node["metadata"].setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
        taints = node.setdefault("spec", {}).setdefault("taints", [])
        if FAKE_TAINT not in taints:
            taints.append(dict(FAKE_TAINT))
    for pod in objects.get("pods", []):
        _confine(pod.setdefault("spec", {}), run_id, default_class)
        _map_pod_namespaces(pod["spec"], ns_of)
    for section in SECTION_OF_KIND.values():
        for o in objects.get(section, []):
            tmpl = o.setdefault("spec", {}).setdefault("template", {})
            _confine(tmpl.setdefault("spec", {}), run_id, default_class)
            _map_pod_namespaces(tmpl["spec"], ns_of)
    deviations = [
        f"every pod and owner template tolerates {FAKE_TAINT['key']}={FAKE_TAINT['value']}:"
        f"{FAKE_TAINT['effect']} (the fake nodes' taint) and requires nodes labelled "
        f"{RUN_LABEL}={run_id} (this run's fake nodes): no restored pod or replacement can "
        "land on a host node",
        f"nodes tainted {FAKE_TAINT['key']}={FAKE_TAINT['value']}:{FAKE_TAINT['effect']} and "
        f"labelled {RUN_LABEL}={run_id}; kwok on the host manages only them",
    ]
    if prefix:
        deviations.append(
            f"namespaces mapped with prefix {prefix!r} ({len(mapping)}); the policy's namespace "
            "filters are rewritten with the mapping"
        )
    if default_class:
        deviations.append(
            f"PriorityClass {default_class} written without globalDefault (it would change the "
            "host's own pods); the snapshot's pods and templates naming no class name it"
        )
    out = Snapshot(header=copy_json(snap.header), policy=snap.policy, objects=objects)
    return HostPlan(
        run_id=run_id,
        snapshot=out,
        namespaces=mapping,
        nodes=sorted(n["metadata"]["name"] for n in out.nodes),
        reused=reused,
        deviations=deviations,
    )
