"""The two policy rules of a host replay (docs/replay-at-scale.md, design point 4).

1. The replay's descheduler acts on the replay only: its policy's `nodeSelector` gains this
   run's fake-node term and every evicting plugin gets a `namespaces.include` list of the
   replay's namespaces (the incident's own include/exclude lists rewritten with the namespace
   mapping). `Release.apply_policy` then holds it to that scope (`check_policy_scope`), as on
   the existing provider.
2. The host's own descheduler must exclude the replay's namespaces (the runbook's rule: never
   two executors on the same pods). A running one whose policy cannot be read, or whose
   evicting plugin could reach a replay namespace, refuses the replay before any write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.checker import facts_for
from pytest_desched.descheduler.policy.scope import evicting_plugins, selector_with
from pytest_desched.errors import PolicyError

WHY = "host replay: rounds act only on this run's fake nodes and the replay's namespaces"


def _namespaces_arg(doc: Mapping[str, Any], profile: int, plugin: str) -> dict[str, Any]:
    prof = (doc.get("profiles") or [])[profile]
    for pc in (prof.get("pluginConfig") or []) if isinstance(prof, dict) else []:
        if isinstance(pc, dict) and pc.get("name") == plugin:
            return dict(((pc.get("args") or {}).get("namespaces")) or {})
    return {}


def replay_include(namespaces_arg: Mapping[str, Any], mapping: Mapping[str, str]) -> list[str]:
    """The host namespaces a plugin may act on: the incident's filter, through the mapping."""
    include, exclude = namespaces_arg.get("include"), namespaces_arg.get("exclude")
    if include:
        return sorted(mapping[n] for n in include if n in mapping)
    excluded = set(exclude or ())
    return sorted(m for n, m in mapping.items() if n not in excluded)


def narrow_policy(policy: Policy, mapping: Mapping[str, str], node_selector: str) -> Policy:
    """The incident's policy held to the replay (rule 1); PolicyError if a plugin cannot be."""
    doc = policy.to_dict()
    facts = facts_for()
    found = evicting_plugins(doc)
    bad = [
        f"profiles[{i}].plugins.{ep}.enabled: {name} cannot be limited to namespaces "
        f"(descheduler {facts.version} has no include list for it); refused on a host"
        for i, ep, name in found
        if name not in facts.namespaced_plugins
    ]
    if bad:
        raise PolicyError(bad, f"{policy.source} narrowed to the host replay")
    scoped = policy.override(
        "nodeSelector", selector_with(doc.get("nodeSelector"), node_selector), why=WHY
    )
    for i, _, name in found:
        include = replay_include(_namespaces_arg(doc, i, name), mapping)
        if not include:
            # an include list cannot be empty; a name no namespace has keeps the plugin idle
            include = ["desched-host-replay-none"]
        scoped = scoped.override(f"profiles[{i}].{name}.namespaces", {"include": include}, why=WHY)
    return scoped


def _running(entry: Mapping[str, Any], workload: Mapping[str, Any] | None) -> str | None:
    """Why a host descheduler cannot evict now (None: it can)."""
    args = [str(a) for a in entry.get("args") or []]
    if any(a in ("--dry-run", "--dry-run=true") for a in args):
        return "runs in dry run"
    spec = (workload or {}).get("spec") or {}
    if entry.get("kind") == "CronJob" and entry.get("suspended"):
        return "its CronJob is suspended"
    if entry.get("kind") == "Deployment" and spec.get("replicas") == 0:
        return "its Deployment has 0 replicas"
    return None


def host_descheduler_problems(
    entries: Iterable[Mapping[str, Any]],
    policies: Mapping[tuple[str, str], str | None],
    host_namespaces: Iterable[str],
    workloads: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    evicting_points: tuple[str, ...] | None = None,
) -> tuple[list[str], list[str]]:
    """(refusals, notes) for the host's descheduler workloads against the replay's namespaces.

    `entries` come from `capture.snapshot.find_descheduler` over the host's CronJobs and
    Deployments; `policies[(namespace, name)]` is the text of its policy ConfigMap (None:
    unreadable). A descheduler that cannot evict now (dry run, suspended, scaled to 0) is a
    note; a suspended one could be resumed during the replay, so the note says so.
    """
    points = evicting_points or facts_for().evicting_points
    wanted = sorted(set(host_namespaces))
    problems: list[str] = []
    notes: list[str] = []
    for e in entries:
        ident = (str(e.get("namespace")), str(e.get("name")))
        who = f"the host's descheduler {e.get('kind')} {ident[0]}/{ident[1]}"
        idle = _running(e, (workloads or {}).get(ident))
        if idle:
            notes.append(f"{who} {idle}: it cannot evict while it stays so")
            continue
        text = policies.get(ident)
        try:
            doc = yaml.safe_load(text) if text else None
        except yaml.YAMLError:
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), list):
            problems.append(
                f"{who}: its policy could not be read (a v1alpha2 policy in the ConfigMap behind "
                "--policy-config-file is needed to prove it excludes the replay's namespaces)"
            )
            continue
        for i, prof in enumerate(doc["profiles"]):
            plugins = (prof.get("plugins") or {}) if isinstance(prof, dict) else {}
            for ep in points:
                for name in (plugins.get(ep) or {}).get("enabled") or []:
                    arg = _namespaces_arg(doc, i, name)
                    include, exclude = arg.get("include"), set(arg.get("exclude") or ())
                    reach = (
                        sorted(set(include) & set(wanted))
                        if include
                        else sorted(n for n in wanted if n not in exclude)
                    )
                    if reach:
                        problems.append(
                            f"{who}: profiles[{i}] {name} could evict in the replay's namespaces "
                            f"{', '.join(reach[:5])}; add them to its namespaces.exclude"
                        )
    return problems, notes


__all__ = ["WHY", "host_descheduler_problems", "narrow_policy", "replay_include"]
