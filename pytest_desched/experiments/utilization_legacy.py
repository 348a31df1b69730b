"""The `metricsCollector` -> `metricsProviders` migration in behaviour (issue 50).

The deprecated form, `metricsCollector: {enabled: true}` with LowNodeUtilization's
`metricsUtilization: {metricsServer: true}` (lint DL024), is still accepted by v0.33.0 to
v0.36.0, and the release reads it the way it reads the new one: either starts the one
metrics collector (v0.36.0 descheduler.go:341) and picks the same usage client
(lownodeutilization.go:377). The chart does not follow: charts 0.33.0 to 0.36.0 grant
`metrics.k8s.io` only for a `metricsProviders` entry with source KubernetesMetrics
(templates/clusterrole.yaml:42-50 in 0.36.0; chart 0.32.2 granted it for
`metricsCollector.enabled`). Installed the runbook's way, the old form reads nothing:

* `utilization-legacy`: the `utilization` lab and caps on the old form, the chart's own RBAC.
  Every fetch is forbidden (`Error fetching metrics ... forbidden`), the plugin refuses the
  round for want of node metrics, nothing is evicted. It fails closed, and silently stops
  all balancing: lint DL029 finds it in the values before anything runs.
* `utilization-legacy-rbac`: the same, with the read DL029's fix names granted in the lab
  (a ClusterRole and binding of its own for the descheduler's ServiceAccount, deleted after):
  the round then reads the same usage as `utilization` and evicts the same one pod. The e2e
  test compares the usage the two rounds logged.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.utilization_log import FETCH_ERROR, NO_NODE_METRICS
from pytest_desched.experiments.utilization import Utilization, UtilizationBase

LEGACY_TOP = {"metricsCollector": {"enabled": True}}
LEGACY_ARGS = {"metricsServer": True}
GRANT_LABEL = {
    "app.kubernetes.io/managed-by": "pytest-desched",
    "desched.pytest.io/grant": "metrics",
}


def legacy_policy(exp: UtilizationBase, base: Policy) -> Policy:
    """`base` on the deprecated form: metricsCollector instead of metricsProviders."""
    doc = base.to_dict()
    doc.pop("metricsProviders", None)
    doc.update(LEGACY_TOP)
    return Policy.from_dict(doc, source=f"<{exp.name} lab policy, deprecated metrics form>")


class UtilizationLegacy(UtilizationBase):
    """The deprecated metricsCollector form through the chart's own RBAC: every fetch is
    forbidden, the round fails closed, nothing is evicted (lint DL029 says so beforehand)."""

    name = "utilization-legacy"
    title = "utilization-kubernetes-metrics-legacy-form"

    def strategy_args(self) -> dict[str, Any]:
        return {**super().strategy_args(), "metricsUtilization": dict(LEGACY_ARGS)}

    def policy(self) -> Policy:
        return legacy_policy(self, super().policy())

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        v = self.v
        seen = self.usage_seen(v)
        errors = v.extra["utilization"]["metrics_source_errors"]
        forbidden = {
            n
            for n in self.workers
            if any(f'"{FETCH_ERROR}"' in e and n in e and "forbidden" in e for e in errors)
        }
        self.r.check(
            "descheduler-says-forbidden",
            "the descheduler's own log says every node's metrics fetch was forbidden and the "
            "balance extension point stopped for want of node metrics",
            forbidden == set(self.workers) and any(NO_NODE_METRICS in e for e in errors),
            "\n".join(errors[:4]) or "no such line in the round's log",
        )
        self.r.check(
            "no-node-read-as-idle",
            "no node was classified (none read as idle without a sample)",
            not seen,
            f"logged {seen}",
        )
        self.r.assess_no_eviction_request(v, self.s1)


class UtilizationLegacyGranted(Utilization):
    """The deprecated form with the metrics read granted in the lab: the same usage read as
    `utilization`, the same one eviction."""

    name = "utilization-legacy-rbac"
    title = "utilization-kubernetes-metrics-legacy-form-granted"

    def strategy_args(self) -> dict[str, Any]:
        return {**super().strategy_args(), "metricsUtilization": dict(LEGACY_ARGS)}

    def policy(self) -> Policy:
        return legacy_policy(self, super().policy())

    def act(self) -> None:
        from kubernetes.client.rest import ApiException

        rel = self.ctx.release
        sa = rel.live_cronjob().spec.job_template.spec.template.spec.service_account_name
        name = f"desched-metrics-read-{self.ctx.namespace}"[:63]
        rbac = self.ctx.cluster.rbac
        meta = {"name": name, "labels": dict(GRANT_LABEL)}
        rbac.create_cluster_role(
            {
                "metadata": meta,
                "rules": [
                    {
                        "apiGroups": ["metrics.k8s.io"],
                        "resources": ["nodes", "pods"],
                        "verbs": ["get", "list"],
                    }
                ],
            }
        )
        try:
            rbac.create_cluster_role_binding(
                {
                    "metadata": meta,
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": name,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": sa, "namespace": rel.namespace}
                    ],
                }
            )
            self.r.result.notes.append(
                f"granted get/list on metrics.k8s.io nodes, pods to {rel.namespace}/{sa} "
                f"(ClusterRole and binding {name}, deleted after the round)"
            )
            super().act()
        finally:
            for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
                try:
                    delete(name)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
