"""Holding a policy to the lab on a cluster that is not the plugin's own (provider `existing`).

On a throwaway cluster the runbook's policy may act everywhere; on someone else's cluster it
must act only inside the lab namespace and on nodes that opted in. :class:`PolicyScope` does
both sides of that: it narrows a policy (namespace include lists for every evicting plugin, an
extra node-selector term), each change a recorded override, and it is the guard that refuses a
non-dry-run upgrade with a policy that could reach further. Which plugins evict and which can be
narrowed at all comes from the pinned descheduler's own code (the policycheck helper's facts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.policy.checker import facts_for
from pytest_desched.descheduler.policy.model import Policy
from pytest_desched.errors import PolicyError

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

__all__ = [
    "PolicyScope",
    "check_policy_scope",
    "cluster_scope",
    "evicting_plugins",
    "scope_policy",
    "selector_with",
]


def evicting_plugins(doc: Mapping[str, Any]) -> list[tuple[int, str, str]]:
    """(profile index, extension point, plugin) for every enabled plugin that evicts."""
    points = facts_for().evicting_points
    out = []
    for i, prof in enumerate(doc.get("profiles") or []):
        plugins = (prof.get("plugins") or {}) if isinstance(prof, dict) else {}
        for ep in points:
            for name in (plugins.get(ep) or {}).get("enabled") or []:
                out.append((i, ep, name))
    return out


def selector_with(current: Any, term: str | None) -> str:
    """A policy's `nodeSelector` with `term` ANDed in (once); unchanged when `term` is None."""
    if term is None:
        return str(current or "")
    terms = [t.strip() for t in str(current or "").split(",") if t.strip()]
    return ",".join(terms if term in terms else [*terms, term])


@dataclass(frozen=True)
class PolicyScope:
    """Where a policy may act on a cluster that is not the plugin's own (provider `existing`).

    `apply` narrows a policy to the lab: every evicting plugin gets `namespaces.include: [lab]`
    and the top-level `nodeSelector` gains the opt-in term, each as a recorded override.
    `problems` is the guard `Release.apply_policy` runs before any non-dry-run upgrade.
    """

    node_selector: str | None  # one `key=value` term ANDed with the policy's; None: no term
    why: str = "existing cluster: rounds act only inside the lab namespace and on opted-in nodes"
    # False on a throwaway cluster (a user's own policy): a plugin with no include list is left
    # as the user wrote it (the cluster holds nothing else to evict) instead of refused.
    strict: bool = True

    def _evicting(self, doc: Mapping[str, Any]) -> list[tuple[int, str, str]]:
        return evicting_plugins(doc)

    def _selector(self, current: Any) -> str:
        return selector_with(current, self.node_selector)

    def apply(self, policy: Policy, namespace: str) -> Policy:
        """The policy limited to `namespace` and the opted-in nodes; PolicyError if impossible."""
        doc = policy.to_dict()
        facts = facts_for()
        bad = [
            f"profiles[{i}].plugins.{ep}.enabled: {name} cannot be limited to one namespace "
            f"(descheduler {facts.version} has no include list for it); refused on an existing "
            "cluster"
            for i, ep, name in self._evicting(doc)
            if name not in facts.namespaced_plugins
        ]
        if bad and self.strict:
            raise PolicyError(bad, f"{policy.source} scoped to {namespace}")
        why = f"{self.why} (namespace {namespace}"
        why += f", nodes {self.node_selector})" if self.node_selector else ")"
        scoped = policy
        if self.node_selector is not None:
            scoped = policy.override(
                "nodeSelector", self._selector(doc.get("nodeSelector")), why=why
            )
        for i, _, name in self._evicting(doc):
            if name not in facts.namespaced_plugins:  # only when not strict (refused above)
                continue
            scoped = scoped.override(
                f"profiles[{i}].{name}.namespaces", {"include": [namespace]}, why=why
            )
        return scoped

    def problems(self, policy: Policy | None) -> list[str]:
        """Why `policy` could act outside a lab on this cluster (empty: it cannot)."""
        if policy is None:
            return [
                "the chart's default policy acts on every namespace and node; on an existing "
                "cluster only a policy scoped to the lab runs outside dry-run (scope_policy)"
            ]
        doc = policy.to_dict()
        out = []
        if self._selector(doc.get("nodeSelector")) != str(doc.get("nodeSelector") or ""):
            out.append(f"nodeSelector: must include {self.node_selector!r} (opted-in nodes only)")
        for i, ep, name in self._evicting(doc):
            try:
                include = (policy.plugin_args(name, i).get("namespaces") or {}).get("include")
            except KeyError:
                include = None
            if not include:
                out.append(
                    f"profiles[{i}].plugins.{ep}.enabled: {name} has no namespaces.include "
                    "list; it could evict outside the lab"
                )
        return out


# -- a cluster's scope: the provider says which nodes (Cluster.lab_node_selector) ---------
def cluster_scope(cluster: Cluster) -> PolicyScope | None:
    """The scope `cluster`'s provider asks for; None on a throwaway cluster (no limit)."""
    selector = cluster.lab_node_selector
    return None if selector is None else PolicyScope(node_selector=selector)


def scope_policy(cluster: Cluster, policy: Policy, namespace: str) -> Policy:
    """The policy as it may run on `cluster`: narrowed to the lab when the cluster is scoped."""
    scope = cluster_scope(cluster)
    return policy if scope is None else scope.apply(policy, namespace)


def check_policy_scope(cluster: Cluster, policy: Policy | None) -> None:
    """PolicyError unless `policy` stays inside `cluster`'s scope (before any change)."""
    scope = cluster_scope(cluster)
    problems = [] if scope is None else scope.problems(policy)
    if problems:
        raise PolicyError(problems, f"{cluster.provider} cluster {cluster.name} (lab scope)")
