"""`desched lint` rules for policies on actual utilization (the runbook's metrics rule, issue 50).

The runbook: a utilization policy on actual usage reads a metrics source (`metricsProviders`:
Kubernetes Metrics or Prometheus; the old `metricsCollector` is deprecated), and the
Prometheus token is read through `secretReference`, never in plain text in values or logs.
Each rule is static: it reads the policy (or the user's values files) as written.

* DL022 metrics-source-unconfigured: an enabled LowNodeUtilization/HighNodeUtilization reads
  a source (`metricsUtilization.source`, the deprecated `metricsServer: true`, or a
  `prometheus.query`) that no `metricsProviders` entry configures (nor, for Kubernetes
  Metrics, `metricsCollector.enabled`), or a Prometheus provider without a `url`.
* DL023 prometheus-token-in-plain-text: a Prometheus `authToken` that is not a `secretReference`,
  or a credential anywhere in the values outside the policy (env, args, annotations). The
  value is never quoted.
* DL024 deprecated-metrics-collector: `metricsCollector` (top level) or
  `metricsUtilization.metricsServer`, each with the v0.36.0 form that replaces it.
* DL025 query-without-instance: a Prometheus query whose result cannot carry an `instance`
  label, so no sample names a node (v0.36.0 usageclients.go: "the collected metrics sample is
  missing 'instance' key"): an aggregation without `by (..instance..)`, one `without
  (..instance..)`, or a scalar. Anything it cannot tell statically is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_desched.descheduler.policy.safety import credential_problems

Hit = tuple[str, str, str, str]  # (rule id, path in the policy, message, fix)

KUBERNETES_METRICS, PROMETHEUS = "KubernetesMetrics", "Prometheus"
UTILIZATION_PLUGINS = ("LowNodeUtilization", "HighNodeUtilization")
_TOKEN_KEYS = re.compile(r"token|bearer|password|secret|credential", re.I)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _enabled(profile: Mapping[str, Any]) -> set[str]:
    return {
        str(n)
        for ep in _dict(profile.get("plugins")).values()
        for n in _list(_dict(ep).get("enabled"))
    }


def _utilization_args(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path of the args, plugin, args) of each enabled utilization plugin's config."""
    for i, prof in enumerate(_list(doc.get("profiles"))):
        prof = _dict(prof)
        enabled = _enabled(prof)
        for j, pc in enumerate(_list(prof.get("pluginConfig"))):
            pc = _dict(pc)
            if pc.get("name") in UTILIZATION_PLUGINS and pc.get("name") in enabled:
                path = f"profiles[{i}].pluginConfig[{j}].args"
                yield path, str(pc["name"]), _dict(pc.get("args"))


def _sources_read(args: Mapping[str, Any]) -> list[str]:
    mu = _dict(args.get("metricsUtilization"))
    out = []
    if mu.get("source") in (KUBERNETES_METRICS, PROMETHEUS):
        out.append(str(mu["source"]))
    if mu.get("metricsServer") is True:
        out.append(KUBERNETES_METRICS)
    if _dict(mu.get("prometheus")).get("query"):
        out.append(PROMETHEUS)
    return list(dict.fromkeys(out))


def sources_read(doc: Mapping[str, Any]) -> list[str]:
    """Every metrics source an enabled utilization plugin of `doc` reads (empty: the policy
    works on requests only): what a replay must serve before its round."""
    found = [src for _, _, args in _utilization_args(doc) for src in _sources_read(args)]
    return list(dict.fromkeys(found))


def _providers(doc: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(k, _dict(p)) for k, p in enumerate(_list(doc.get("metricsProviders")))]


def source_findings(doc: Mapping[str, Any]) -> list[Hit]:
    """DL022: a source an enabled utilization plugin reads that the policy never configures."""
    providers = _providers(doc)
    configured = {str(p.get("source")) for _, p in providers}
    if _dict(doc.get("metricsCollector")).get("enabled") is True:
        configured.add(KUBERNETES_METRICS)
    out: list[Hit] = []
    for path, plugin, args in _utilization_args(doc):
        for source in _sources_read(args):
            if source in configured:
                continue
            out.append(
                (
                    "DL022",
                    f"{path}.metricsUtilization",
                    f"{plugin} reads actual utilization from {source}, which no "
                    "metricsProviders entry configures: the descheduler has no source to read",
                    f"add metricsProviders: [{{source: {source}"
                    + (", prometheus: {url: ...}" if source == PROMETHEUS else "")
                    + "}] at the policy's top level",
                )
            )
    for k, p in providers:
        if p.get("source") == PROMETHEUS and not _dict(p.get("prometheus")).get("url"):
            out.append(
                (
                    "DL022",
                    f"metricsProviders[{k}].prometheus",
                    "a Prometheus source without a url: there is nothing to query",
                    "set metricsProviders[].prometheus.url to the Prometheus server",
                )
            )
    return out


_SECRET_REF_FIX = (
    "put the token in a Secret in the descheduler's namespace and reference it: "
    "prometheus.authToken.secretReference: {namespace: ..., name: ...}"
)


def token_findings(doc: Mapping[str, Any]) -> list[Hit]:
    """DL023 in a policy: a Prometheus authToken that is not only a secretReference."""
    out: list[Hit] = []
    for k, p in _providers(doc):
        if "authToken" not in _dict(p.get("prometheus")):
            continue
        token = p["prometheus"]["authToken"]
        if isinstance(token, dict) and set(token) <= {"secretReference"}:
            continue
        out.append(
            (
                "DL023",
                f"metricsProviders[{k}].prometheus.authToken",
                # "<path>: <message>" is scrubbed as a whole: whatever follows "authToken: "
                # reads as its value, so the message starts with the placeholder itself
                "<redacted> (a Prometheus token in plain text, value not shown): it lands in a "
                "ConfigMap, the chart's values and every log that prints them",
                _SECRET_REF_FIX,
            )
        )
    return out


def values_token_paths(doc: Any, skip: str = "deschedulerPolicy") -> list[str]:
    """Paths of plain-text credentials anywhere in a values document, outside the policy
    (the rendered policy is linted on its own): never the values themselves."""
    if not isinstance(doc, dict):
        return []
    out: list[str] = []
    for key, value in doc.items():
        if key == skip:
            continue
        out += [p.split(": ", 1)[0] for p in credential_problems(value, str(key), str(key))]
    return out


def deprecation_findings(doc: Mapping[str, Any]) -> list[Hit]:
    """DL024: the deprecated metricsCollector, and metricsUtilization.metricsServer."""
    out: list[Hit] = []
    if "metricsCollector" in doc:
        out.append(
            (
                "DL024",
                "metricsCollector",
                "metricsCollector is deprecated (v0.36.0 api/types.go: use MetricsProviders)",
                "replace it with metricsProviders: [{source: KubernetesMetrics}]",
            )
        )
    for path, plugin, args in _utilization_args(doc):
        if "metricsServer" in _dict(args.get("metricsUtilization")):
            out.append(
                (
                    "DL024",
                    f"{path}.metricsUtilization.metricsServer",
                    f"{plugin}'s metricsUtilization.metricsServer is deprecated",
                    "replace it with metricsUtilization: {source: KubernetesMetrics}",
                )
            )
    return out


_AGGREGATIONS = "sum|avg|min|max|count|group|stddev|stdvar|topk|bottomk|quantile|count_values|limitk|limit_ratio"
_OUTER_AGG = re.compile(
    rf"^\s*({_AGGREGATIONS})\s*(?:(by|without)\s*\(([^)]*)\))?\s*\(", re.I | re.S
)
_TRAILING_CLAUSE = re.compile(r"\)\s*(by|without)\s*\(([^)]*)\)\s*$", re.I | re.S)
_SCALAR = re.compile(r"^\s*(?:scalar\s*\(|vector\s*\(|[-+]?\d+(?:\.\d+)?\s*$)", re.I)


def _labels(text: str) -> set[str]:
    return {x.strip() for x in text.split(",") if x.strip()}


def query_names_no_node(query: str) -> str | None:
    """Why the query's result can carry no `instance` label, or None (it can, or cannot say).

    Only the outermost expression is read: `sum(...)` without a clause, `sum by (node) (...)`
    or `sum(...) by (node)`, `... without (instance)`, `scalar(...)`, `vector(...)`, a number.
    """
    q = query.strip()
    if _SCALAR.match(q):
        return "it is a scalar: no labels at all"
    m = _OUTER_AGG.match(q)
    if not m:
        return None
    agg, clause, labels = m.group(1), m.group(2), m.group(3)
    if clause is None:
        trailing = _TRAILING_CLAUSE.search(q)
        if trailing and q[: trailing.start() + 1].count("(") == q[: trailing.start() + 1].count(
            ")"
        ):
            clause, labels = trailing.group(1), trailing.group(2)
    if clause is None:
        return f"{agg}(...) without `by` drops every label"
    names = _labels(labels or "")
    if clause.lower() == "by" and "instance" not in names:
        return f"{agg} by ({', '.join(sorted(names))}) keeps no instance label"
    if clause.lower() == "without" and "instance" in names:
        return f"{agg} without (instance) drops it"
    return None


def query_findings(doc: Mapping[str, Any]) -> list[Hit]:
    """DL025: a Prometheus query whose samples cannot name nodes."""
    out: list[Hit] = []
    for path, plugin, args in _utilization_args(doc):
        query = _dict(_dict(args.get("metricsUtilization")).get("prometheus")).get("query")
        if not isinstance(query, str):
            continue
        why = query_names_no_node(query)
        if why:
            out.append(
                (
                    "DL025",
                    f"{path}.metricsUtilization.prometheus.query",
                    f"{plugin}'s query result cannot name nodes ({why}); v0.36.0 refuses every "
                    "sample without `instance`, and a node missing from the result stops the "
                    "plugin",
                    "aggregate `by (instance)` with instance set to the node name (a recording "
                    "rule's relabeling), e.g. avg by (instance) (...)",
                )
            )
    return out


def metrics_findings(doc: Mapping[str, Any]) -> list[Hit]:
    """Every metrics rule on one policy document, in rule order."""
    return (
        source_findings(doc) + token_findings(doc) + deprecation_findings(doc) + query_findings(doc)
    )
