"""Seeded incident windows over a generated cluster: the changes a busy half hour makes.

Why: a timeline replay at speed (issue 42) needs windows of a known size with a steady change
rate, rebuilt byte for byte from a seed; a recorded production window is neither shareable
nor sized to order. Every change is one `apply` applies (none is only observed), so the
replay's change thread carries the whole rate, written as a watch records them (`update`,
`create`, `delete`, whole objects):

- `scale`: a Deployment's replicas walked up or down by 1-2, within [its start - 2, its start
  + 3] and never below 1, so the cluster neither drains nor fills over a long window;
- `node-label`: a node's maintenance label set, changed or removed;
- `node-taint`: a NoSchedule maintenance taint put on a node or taken off (at most
  `max_tainted_share` of the nodes at once);
- `bare-pod`: a pod without a controller created on a node, or one deleted;
- `deployment`: a Deployment created in a team namespace, or one deleted (its ReplicaSets
  and pods go with it).

Times: change i falls in the i-th of `changes` equal slots of the window, jittered inside it,
so the rate is the same in every part of the window at any size.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pytest_desched.replay.capture.format import Snapshot, controller_of, utc
from pytest_desched.replay.capture.timeline import Change, Timeline, make_header
from pytest_desched.replay.gen.genbase import TAKEN_AT, GenBase

MIX: tuple[tuple[str, float], ...] = (
    ("scale", 0.35),
    ("node-label", 0.25),
    ("node-taint", 0.15),
    ("bare-pod", 0.15),
    ("deployment", 0.10),
)
MAINT_LABEL = "example.com/maintenance"
MAINT_TAINT = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
_LABEL_VALUES = ("planned", "urgent", None)  # None: the label removed


@dataclass(frozen=True)
class Churn:
    """How long a window is, how many changes it holds, and their mix (weights)."""

    seed: int = 1
    window_s: float = 1800.0
    changes: int = 5000
    mix: tuple[tuple[str, float], ...] = MIX
    max_tainted_share: float = 0.02


class _Window:
    """The live state the changes walk (so each one names an object that exists then)."""

    def __init__(self, snap: Snapshot, churn: Churn) -> None:
        self.rng = random.Random(churn.seed)
        self.prims = GenBase(churn.seed)  # pod templates only (no randomness drawn from it)
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in snap.nodes}
        self.node_names = list(self.nodes)
        self.tainted: list[str] = []
        self.max_tainted = max(1, int(len(self.nodes) * churn.max_tainted_share))
        self.deps: dict[tuple[str, str], dict[str, Any]] = {}
        self.base: dict[tuple[str, str], int] = {}
        for d in snap.items("deployments"):
            m = d["metadata"]
            k = (m["namespace"], m["name"])
            self.deps[k] = copy.deepcopy(d)
            self.base[k] = int((d.get("spec") or {}).get("replicas") or 1)
        sys_ns = {"kube-system"}
        self.teams = sorted(
            {ns for ns, _ in self.deps if ns not in sys_ns}
            | {p["metadata"]["namespace"] for p in snap.pods if not controller_of(p)} - sys_ns
        ) or ["default"]
        self.bare = [
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in snap.pods
            if not controller_of(p)
        ]
        self.made = 0  # objects this window created (their names)

    # -- one change of each kind -------------------------------------------------------
    def scale(self, t: float) -> Change:
        k = self.rng.choice(list(self.deps))
        dep = self.deps[k]
        cur, base = int(dep["spec"].get("replicas") or 1), self.base[k]
        lo, hi = max(1, base - 2), base + 3
        step = self.rng.choice((1, 2)) * self.rng.choice((-1, 1))
        new = min(hi, max(lo, cur + step))
        if new == cur:  # at a bound: the other way
            new = min(hi, max(lo, cur - step))
        dep = copy.deepcopy(dep)
        dep["spec"]["replicas"] = new
        self.deps[k] = dep
        return Change(t, "update", "Deployment", k[1], k[0], dep)

    def node_label(self, t: float) -> Change:
        name = self.rng.choice(self.node_names)
        node = copy.deepcopy(self.nodes[name])
        labels = node["metadata"].setdefault("labels", {})
        choices = [v for v in _LABEL_VALUES if v != labels.get(MAINT_LABEL)]
        value = self.rng.choice(choices)
        if value is None:
            labels.pop(MAINT_LABEL, None)
        else:
            labels[MAINT_LABEL] = value
        self.nodes[name] = node
        return Change(t, "update", "Node", name, None, node)

    def node_taint(self, t: float) -> Change:
        add = len(self.tainted) < self.max_tainted and (not self.tainted or self.rng.random() < 0.6)
        if add:
            name = self.rng.choice([n for n in self.node_names if n not in self.tainted])
            self.tainted.append(name)
        else:
            name = self.tainted.pop(self.rng.randrange(len(self.tainted)))
        node = copy.deepcopy(self.nodes[name])
        spec = node.setdefault("spec", {})
        taints = [x for x in spec.get("taints") or [] if x.get("key") != MAINT_TAINT["key"]]
        if add:
            taints.append(dict(MAINT_TAINT))
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        self.nodes[name] = node
        return Change(t, "update", "Node", name, None, node)

    def bare_pod(self, t: float) -> Change:
        if self.bare and self.rng.random() < 0.5:
            ns, name = self.bare.pop(self.rng.randrange(len(self.bare)))
            return Change(t, "delete", "Pod", name, ns)
        self.made += 1
        ns, name = self.rng.choice(self.teams), f"churn-pod-{self.made}"
        tmpl = self.prims.template({"run": name}, "100m", "128Mi")
        node = self.rng.choice(self._untainted())
        pod = {
            "metadata": {"name": name, "namespace": ns, "labels": tmpl["metadata"]["labels"]},
            "spec": {**tmpl["spec"], "nodeName": node},
        }
        self.bare.append((ns, name))
        return Change(t, "create", "Pod", name, ns, pod)

    def deployment(self, t: float) -> Change:
        team_deps = [k for k in self.deps if k[0] in self.teams]
        if team_deps and self.rng.random() < 0.5:
            k = self.rng.choice(team_deps)
            del self.deps[k]
            return Change(t, "delete", "Deployment", k[1], k[0])
        self.made += 1
        ns, name = self.rng.choice(self.teams), f"churn-{self.made}"
        replicas = self.rng.randint(2, 8)
        labels = {"app": name}
        tmpl = self.prims.template(labels, self.rng.choice(("100m", "250m")), "128Mi")
        dep = {
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels)},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": dict(labels)},
                "template": tmpl,
                "strategy": {"type": "RollingUpdate"},
            },
        }
        self.deps[(ns, name)] = dep
        self.base[(ns, name)] = replicas
        return Change(t, "create", "Deployment", name, ns, copy.deepcopy(dep))

    def _untainted(self) -> list[str]:
        """Nodes a bare pod may land on: no NoSchedule taint (the system pool's, ours)."""
        ok = [
            n
            for n, node in self.nodes.items()
            if not any(
                x.get("effect") == "NoSchedule"
                for x in (node.get("spec") or {}).get("taints") or []
            )
        ]
        return ok or self.node_names


def churn_window(snap: Snapshot, churn: Churn | None = None, **kw: Any) -> Timeline:
    """A valid timeline over `snap` (its start) with `churn.changes` changes of `churn.mix`,
    one per slot of the window; deterministic for a seed and snapshot."""
    churn = churn or Churn(**kw)
    if churn.changes < 1 or churn.window_s <= 0:
        raise ValueError("a churn window needs changes >= 1 and window_s > 0")
    if not snap.nodes or not snap.items("deployments"):
        raise ValueError("a churn window needs a snapshot with nodes and Deployments")
    kinds = [k for k, _ in churn.mix]
    unknown = set(kinds) - {k for k, _ in MIX}
    if unknown:
        raise ValueError(f"unknown change kinds {sorted(unknown)}; use {[k for k, _ in MIX]}")
    w = _Window(snap, churn)
    make = {
        "scale": w.scale,
        "node-label": w.node_label,
        "node-taint": w.node_taint,
        "bare-pod": w.bare_pod,
        "deployment": w.deployment,
    }
    slot = churn.window_s / churn.changes
    drawn = w.rng.choices(kinds, weights=[x for _, x in churn.mix], k=churn.changes)
    changes: list[Change] = []
    for i, kind in enumerate(drawn):
        t = round(min(churn.window_s, (i + w.rng.uniform(0.05, 0.95)) * slot), 3)
        changes.append(make[kind](t))
    start = utc(snap.header.get("takenAt")) or TAKEN_AT
    header = make_header(
        start,
        churn.window_s,
        "generated",
        generator=f"pytest_desched.replay.gen.timeline_gen (seed {churn.seed})",
        changesByKind=dict(sorted(Counter(drawn).items())),
    )
    return Timeline(header, snap, changes).validate("(generated)")
