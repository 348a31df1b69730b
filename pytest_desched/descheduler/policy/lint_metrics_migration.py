"""`desched lint` rules for the `metricsCollector` -> `metricsProviders` migration (issue 50).

The deprecated form (DL024 names it) is top-level `metricsCollector: {enabled: true}` with
LowNodeUtilization's `metricsUtilization: {metricsServer: true}`; the new one is
`metricsProviders: [{source: KubernetesMetrics}]` with `metricsUtilization: {source:
KubernetesMetrics}`. v0.33.0 to v0.36.0 accept both (one collector serves either:
v0.36.0 descheduler.go:341, lownodeutilization.go:377); v0.32.2 knows only the old one. A
migration goes wrong in three ways, each told from the policy as written and its release:

* DL026 metrics-forms-combined (error): both forms at one level, which v0.33.0 to v0.36.0
  refuse at start: `metricsCollector.enabled` beside a KubernetesMetrics provider ("it is not
  allowed to combine metrics provider when metrics collector is enabled", v0.36.0
  policyconfig.go:170) or `metricsServer: true` beside `source: KubernetesMetrics` ("it is
  not allowed to set both", nodeutilization/validation.go:66).
* DL027 metrics-migration-half-done (warning): one level migrated and the other not (the top
  level on metricsProviders and a plugin still on metricsServer, or the reverse). Accepted and
  read from the same collector today; the release that drops the deprecated field refuses it.
* DL028 metrics-providers-unknown (error): the new form on a release before v0.33.0, which
  has no such field (v0.32.2 api/v1alpha2/types.go: only `metricsCollector`; its
  nodeutilization/types.go: only `metricsServer`). Migrate with the upgrade, not before.
* DL029 metrics-rbac-missing (error, Helm values): the rendered policy reads Kubernetes Metrics
  but the rendered ClusterRole grants no `get` on metrics.k8s.io nodes. Charts 0.33.0 to
  0.36.0 grant it only for a `metricsProviders` entry with source KubernetesMetrics
  (templates/clusterrole.yaml:42-50 in 0.36.0); chart 0.32.2 granted it for
  `metricsCollector.enabled`. So the deprecated form, kept across the chart upgrade, makes
  every fetch forbidden and the round fail closed (seen: `utilization-legacy` on v0.36.0).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pytest_desched.descheduler.bug_ranges import release_key
from pytest_desched.descheduler.policy.lint_metrics import KUBERNETES_METRICS, UTILIZATION_PLUGINS

Hit = tuple[str, str, str, str]  # (rule id, path in the policy, message, fix)
FIRST_WITH_PROVIDERS = (0, 33, 0)  # v0.33.0: metricsProviders and metricsUtilization.source
NEW_TOP = "metricsProviders: [{source: KubernetesMetrics}]"
NEW_ARGS = "metricsUtilization: {source: KubernetesMetrics}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def utilization_args(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path of the args, plugin, args) of each utilization plugin's config, enabled or not
    (a disabled one is still refused by the release that reads the policy)."""
    profiles = doc.get("profiles")
    for i, prof in enumerate(profiles if isinstance(profiles, list) else []):
        pcs = _dict(prof).get("pluginConfig")
        for j, pc in enumerate(pcs if isinstance(pcs, list) else []):
            pc = _dict(pc)
            if pc.get("name") in UTILIZATION_PLUGINS:
                yield (
                    f"profiles[{i}].pluginConfig[{j}].args",
                    str(pc["name"]),
                    _dict(pc.get("args")),
                )


def _old_top(doc: Mapping[str, Any]) -> bool:
    return _dict(doc.get("metricsCollector")).get("enabled") is True


def _new_top(doc: Mapping[str, Any]) -> int | None:
    """The index of the KubernetesMetrics provider, or None."""
    providers = doc.get("metricsProviders")
    for k, p in enumerate(providers if isinstance(providers, list) else []):
        if _dict(p).get("source") == KUBERNETES_METRICS:
            return k
    return None


def migration_findings(doc: Mapping[str, Any], version: str = "") -> list[Hit]:
    """DL026-DL028 on one policy document; `version` is the release that will read it."""
    out: list[Hit] = []
    old_top, new_top = _old_top(doc), _new_top(doc)
    key = release_key(version) if version else None
    before = key is not None and key < FIRST_WITH_PROVIDERS
    if old_top and new_top is not None:
        out.append(
            (
                "DL026",
                f"metricsProviders[{new_top}]",
                "metricsCollector.enabled and a KubernetesMetrics provider together: v0.33.0 "
                "to v0.36.0 refuse the policy at start ('it is not allowed to combine metrics "
                "provider when metrics collector is enabled')",
                "remove metricsCollector; the provider alone configures the same collector",
            )
        )
    if before and (new_top is not None or "metricsProviders" in doc):
        out.append(
            (
                "DL028",
                "metricsProviders",
                f"descheduler {version} has no metricsProviders (added in v0.33.0)",
                "keep metricsCollector: {enabled: true} on this release; migrate with the "
                "upgrade to v0.33.0 or later",
            )
        )
    for path, plugin, args in utilization_args(doc):
        mu = _dict(args.get("metricsUtilization"))
        old_arg = mu.get("metricsServer") is True
        new_arg = mu.get("source") == KUBERNETES_METRICS
        where = f"{path}.metricsUtilization"
        if old_arg and new_arg:
            out.append(
                (
                    "DL026",
                    where,
                    f"{plugin} sets metricsServer and source KubernetesMetrics together: v0.33.0 "
                    "to v0.36.0 refuse it ('it is not allowed to set both')",
                    "remove metricsServer: true",
                )
            )
        elif new_arg and before:
            out.append(
                (
                    "DL028",
                    f"{where}.source",
                    f"descheduler {version} has no metricsUtilization.source (added in v0.33.0)",
                    "keep metricsUtilization: {metricsServer: true} on this release",
                )
            )
        elif old_arg and new_top is not None and not old_top:
            out.append(
                (
                    "DL027",
                    f"{where}.metricsServer",
                    f"the top level is on metricsProviders but {plugin} still reads "
                    "metricsServer: half the migration (the same collector serves both today; "
                    "the release that drops metricsServer refuses it)",
                    f"replace it with {NEW_ARGS}",
                )
            )
        elif new_arg and old_top and new_top is None and not before:
            out.append(
                (
                    "DL027",
                    "metricsCollector",
                    f"{plugin} reads source KubernetesMetrics but the top level still enables "
                    "metricsCollector: half the migration",
                    f"replace metricsCollector with {NEW_TOP}",
                )
            )
    return out


def reads_kubernetes_metrics(doc: Mapping[str, Any]) -> bool:
    """The policy starts the metrics collector (either form, v0.36.0 descheduler.go:341) and a
    utilization plugin reads it."""
    started = _old_top(doc) or _new_top(doc) is not None
    return started and any(
        _dict(a.get("metricsUtilization")).get("metricsServer") is True
        or _dict(a.get("metricsUtilization")).get("source") == KUBERNETES_METRICS
        for _, _, a in utilization_args(doc)
    )


def grants_node_metrics(manifests: Iterable[Mapping[str, Any]]) -> bool:
    """A rendered ClusterRole rule allows `get` on metrics.k8s.io nodes."""
    for m in manifests:
        if m.get("kind") != "ClusterRole":
            continue
        rules = m.get("rules")
        for r in rules if isinstance(rules, list) else []:
            r = _dict(r)
            if (
                "metrics.k8s.io" in (r.get("apiGroups") or [])
                and {"nodes", "*"} & set(r.get("resources") or [])
                and {"get", "*"} & set(r.get("verbs") or [])
            ):
                return True
    return False


def rbac_findings(
    policy: Mapping[str, Any] | None, manifests: Iterable[Mapping[str, Any]], chart: str
) -> list[Hit]:
    """DL029: Helm values whose policy reads Kubernetes Metrics the chart grants no access to."""
    manifests = list(manifests)
    if not policy or not manifests or not reads_kubernetes_metrics(policy):
        return []
    if not any(m.get("kind") == "ClusterRole" for m in manifests) or grants_node_metrics(manifests):
        return []
    old = _old_top(policy) and _new_top(policy) is None
    return [
        (
            "DL029",
            "metricsCollector" if old else "metricsProviders",
            f"the policy reads Kubernetes Metrics but {chart}'s ClusterRole grants no get on "
            "metrics.k8s.io nodes: every fetch is forbidden and the plugin refuses each round"
            + (
                " (charts 0.33.0 to 0.36.0 grant it only for a metricsProviders entry)"
                if old
                else ""
            ),
            f"replace metricsCollector with {NEW_TOP} (the chart then grants it)"
            if old
            else "grant get/list on metrics.k8s.io nodes and pods to the descheduler's ClusterRole",
        )
    ]
