"""`desched lint` DL030: a Prometheus token Secret the chart's descheduler cannot read.

v0.36.0 reads `metricsProviders[].prometheus.authToken.secretReference` through an informer on
the Secrets of the reference's namespace (pkg/descheduler/prom_client_controller.go: it lists
and watches them all, then picks the name). Chart 0.36.0's ClusterRole grants no `secrets`
(templates/clusterrole.yaml), so unless a Role outside the chart grants get, list and watch
there, the Secret is never read, no Prometheus client is made, and every round's
LowNodeUtilization stops with "prometheus client not initialized". Found in the Prometheus
experiments (docs/utilization.md#prometheus): they add that Role in the lab namespace.

Static and a warning: lint cannot see RBAC made outside the chart. The namespace is named,
the Secret's content never (there is none to show: a reference only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Hit = tuple[str, str, str, str]  # (rule id, path in the policy, message, fix)


def secret_findings(doc: Mapping[str, Any]) -> list[Hit]:
    """DL030: each Prometheus secretReference, with what the chart's RBAC lacks to read it."""
    out: list[Hit] = []
    providers = doc.get("metricsProviders")
    for k, p in enumerate(providers if isinstance(providers, list) else []):
        prom = p.get("prometheus") if isinstance(p, Mapping) else None
        token = prom.get("authToken") if isinstance(prom, Mapping) else None
        ref = token.get("secretReference") if isinstance(token, Mapping) else None
        if not isinstance(ref, Mapping):
            continue
        ns, name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
        if not ns or not name:
            continue  # the descheduler refuses it at start ("missing authentication token secret")
        broad = (
            f"; in {ns} that is every Secret of the cluster's system components"
            if ns == "kube-system"
            else ""
        )
        out.append(
            (
                "DL030",
                f"metricsProviders[{k}].prometheus.authToken.secretReference",
                f"the descheduler reads Secret {ns}/{name} through an informer that lists and "
                f"watches every Secret of {ns}{broad}, and the chart's ClusterRole grants no "
                "`secrets`: without a Role there, no Prometheus client is made and "
                "LowNodeUtilization stops with 'prometheus client not initialized'",
                f"add a Role in {ns} (secrets: get, list, watch) bound to the chart's "
                "ServiceAccount, and keep only the token's Secret in that namespace",
            )
        )
    return out
