"""Experiments side by side on one cluster: one lane each, nothing shared.

The runbook's ordering rule is one executor per pod set: two descheduler instances must never
evict from the same pods. Experiments that share no state may still run at the same time if
each has a lane of its own: a lab namespace, a source and a target node, a pool label value
(so no replacement lands on another lane's node) and a release of its own whose policy acts
only inside the lane's namespace. `check_lanes` is the rule, enforced before anything starts:
disjoint namespaces, nodes and releases, and every evicting plugin of every lane's policy held
to its own namespace (an override recorded in the lane's evidence).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_desched.descheduler.policy.checker import facts_for
from pytest_desched.descheduler.policy.scope import evicting_plugins
from pytest_desched.errors import ConfigError
from pytest_desched.lab import POOL_VALUE

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy import Policy

LANE_WHY = (
    "concurrent lanes: each lane's descheduler acts only inside its own lab namespace, so two "
    "instances never evict from the same pods (runbook: one executor per pod set)"
)


@dataclass(frozen=True)
class Lane:
    """Where one experiment runs when others run beside it."""

    index: int
    namespace: str
    source: str
    target: str
    release: str  # the helm release name (its own CronJob, ServiceAccount and policy)

    @property
    def name(self) -> str:
        return f"lane{self.index}"

    @property
    def pool(self) -> str:
        return f"{POOL_VALUE}-{self.name}"


# The control plane (kube-apiserver, etcd, controller manager, scheduler, kwok) keeps about a
# core busy while experiments run, and each lane's helm, watches and descheduler round about
# one more. Measured on 2 cores (issue 31): three lanes took 1.05x the sequential wall for
# 1.3x the CPU; lanes pay only with a core to spare per lane beside the control plane.
CONTROL_PLANE_CORES = 1.0
LANE_MODES = ("auto", "always", "never")


def lanes_pay(count: int, cpus: int, load: float) -> tuple[bool, str]:
    """Whether `count` lanes beat one experiment after another here, and why (pure)."""
    spare = cpus - load
    need = CONTROL_PLANE_CORES + count
    facts = f"{cpus} CPUs, load {load:.2f}: {spare:.2f} idle, {need:g} needed for {count} lanes"
    if count < 2:
        return False, "one experiment: nothing to run beside it"
    if spare >= need:
        return True, f"lanes: {facts} (a core per lane beside the control plane)"
    return False, f"sequential: {facts} (lanes would share busy cores and only add CPU)"


def decide_execution(count: int, mode: str = "auto") -> dict[str, object]:
    """The engine's choice of lanes or sequential for `count` experiments, as recorded."""
    if mode not in LANE_MODES:
        raise ConfigError(f"lanes {mode!r}: use one of {', '.join(LANE_MODES)}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0]
    pay, why = lanes_pay(count, cpus or 1, load)
    if mode != "auto" and count > 1:
        pay, why = mode == "always", f"{'lanes' if mode == 'always' else 'sequential'}: asked for"
    return {
        "mode": "lanes" if pay else "sequential",
        "why": why,
        "cpus": cpus,
        "load_1m": round(load, 2),
        "experiments": count,
        "asked": mode,
    }


def plan_lanes(
    count: int, workers: Sequence[str], namespaces: Sequence[str], release: str
) -> list[Lane]:
    """`count` lanes over disjoint worker pairs; ConfigError when the cluster is too small."""
    if count < 1:
        raise ConfigError("run_concurrently needs at least one experiment")
    if len(namespaces) != count:
        raise ConfigError(f"{count} lanes need {count} namespaces, got {len(namespaces)}")
    if len(workers) < 2 * count:
        raise ConfigError(
            f"{count} experiments side by side need {2 * count} workers (a source and a target "
            f"each); the cluster has {len(workers)}. Bring it up with --desched-workers "
            f"{2 * count}, or run fewer at once"
        )
    return [
        Lane(i, namespaces[i], workers[2 * i], workers[2 * i + 1], f"{release}-lane{i}")
        for i in range(count)
    ]


def scope_to_lane(policy: Policy, lane: Lane) -> Policy:
    """The policy held to the lane's namespace (every evicting plugin), as recorded overrides."""
    facts = facts_for()
    scoped = policy
    for i, ep, name in evicting_plugins(policy.to_dict()):
        if name not in facts.namespaced_plugins:
            raise ConfigError(
                f"profiles[{i}].plugins.{ep}.enabled: {name} cannot be limited to one "
                f"namespace (descheduler {facts.version}); run this experiment alone"
            )
        scoped = scoped.override(
            f"profiles[{i}].{name}.namespaces",
            {"include": [lane.namespace]},
            why=f"{LANE_WHY} ({lane.name}: {lane.namespace})",
        )
    return scoped


def lane_problems(policy: Policy, namespace: str) -> list[str]:
    """Why `policy` could evict outside `namespace` (empty: it cannot)."""
    out = []
    for i, _, name in evicting_plugins(policy.to_dict()):
        try:
            include = (policy.plugin_args(name, i).get("namespaces") or {}).get("include")
        except KeyError:
            include = None
        if list(include or []) != [namespace]:
            out.append(
                f"profiles[{i}].{name}: namespaces.include is {include!r}, not [{namespace!r}]"
            )
    return out


def check_lanes(lanes: Sequence[Lane], policies: Sequence[Policy]) -> None:
    """The runbook's rule, before any change: lanes share no pods, nodes or executor."""
    problems: list[str] = []
    for what, values in (
        ("namespace", [ln.namespace for ln in lanes]),
        ("node", [n for ln in lanes for n in (ln.source, ln.target)]),
        ("release", [ln.release for ln in lanes]),
        ("pool value", [ln.pool for ln in lanes]),
    ):
        dup = sorted({v for v in values if values.count(v) > 1})
        if dup:
            problems.append(f"lanes share a {what}: {dup}")
    if len(lanes) > 1:
        for lane, policy in zip(lanes, policies, strict=True):
            problems += [f"{lane.name}: {p}" for p in lane_problems(policy, lane.namespace)]
    if problems:
        raise ConfigError(
            "experiments cannot run side by side (two descheduler instances could evict the "
            "same pods): " + "; ".join(problems)
        )
