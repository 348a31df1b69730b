"""Actual usage: declared per pod the way requests are, read back through `metrics.k8s.io`.

A kwok pod uses what its annotations say (kwok v0.8.0 `kustomize/metrics/usage`:
`kwok.x-k8s.io/usage-cpu` and `-memory`, 1m and 1Mi without them); kwok's emulated kubelet
serves it at /metrics/resource and metrics-server turns it into NodeMetrics and PodMetrics,
the objects the descheduler's KubernetesMetrics source reads. A workload declares it
(`Deployment(..., usage={"cpu": "800m"})`: its template's annotations, so a replacement
uses the same), and `Lab.set_usage` changes it on live pods between rounds.

metrics-server serves a node's CPU as a rate between two scrapes, so a change is seen one
`--metric-resolution` (10 s here) after kwok serves it: `wait_node_usage` waits for that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pytest_desched.kube import wait_for
from pytest_desched.lab.base import LabBase
from pytest_desched.lab.inputs import LabConfigError
from pytest_desched.lab.usage_values import (
    METRICS_GROUP,
    METRICS_VERSION,
    check_usage,
    parse_bytes,
    parse_cpu_m,
    usage_annotations,
)


class UsageSteps(LabBase):
    """Declared usage on live pods, and the node usage metrics-server serves."""

    def set_usage(
        self, usage: Mapping[str, str], *, pods: Iterable[str], namespace: str | None = None
    ) -> None:
        """Give each named pod `usage` (its kwok annotations, merged); a pod's replacement
        keeps its workload's declared usage, not this."""
        ann = usage_annotations(check_usage("Lab.set_usage", usage))
        ns = namespace or self.namespace
        names = list(pods)
        if not names:
            raise LabConfigError("Lab.set_usage: name at least one pod")
        for name in names:
            self.cluster.core.patch_namespaced_pod(name, ns, {"metadata": {"annotations": ann}})

    def node_usage(self, node: str) -> dict[str, int] | None:
        """{"cpu": millicores, "memory": bytes} metrics-server serves for `node`; None while
        it serves none (not scraped yet, or the source is down)."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        api = client.CustomObjectsApi(self.cluster.api_client)
        try:
            obj = api.get_cluster_custom_object(METRICS_GROUP, METRICS_VERSION, "nodes", node)
        except ApiException as exc:
            if exc.status in (404, 503):
                return None
            raise
        u = obj.get("usage") or {}
        if "cpu" not in u or "memory" not in u:
            return None
        return {"cpu": parse_cpu_m(u["cpu"]), "memory": parse_bytes(u["memory"])}

    def pods_with_usage(self, namespace: str | None = None) -> set[str]:
        """Names of the pods of a namespace metrics-server serves PodMetrics for."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        api = client.CustomObjectsApi(self.cluster.api_client)
        ns = namespace or self.namespace
        try:
            got = api.list_namespaced_custom_object(METRICS_GROUP, METRICS_VERSION, ns, "pods")
        except ApiException as exc:
            if exc.status in (404, 503):
                return set()
            raise
        return {str(i["metadata"]["name"]) for i in got.get("items") or []}

    def wait_pod_usage(self, pods: Iterable[str], timeout: float = 60) -> set[str]:
        """Until metrics-server serves every named pod's usage (the descheduler reads a pod's
        own usage before it evicts it, and skips a pod without)."""
        want = set(pods)
        return wait_for(
            f"metrics-server to serve the usage of pods {sorted(want)}",
            self.pods_with_usage,
            lambda got: want <= got,
            timeout=timeout,
            max_interval=1.0,
            describe=lambda got: f"served {sorted(got)}",
        )

    def wait_node_usage(
        self,
        expect: Mapping[str, Callable[[int], bool]],
        timeout: float = 60,
    ) -> dict[str, dict[str, int] | None]:
        """Until each node's CPU (millicores) served by metrics-server satisfies its predicate:
        a declared change is live in the source the round reads. Returns what was served."""

        def served() -> dict[str, dict[str, int] | None]:
            return {n: self.node_usage(n) for n in expect}

        def ok(seen: dict[str, dict[str, int] | None]) -> bool:
            return all((u := seen[n]) is not None and pred(u["cpu"]) for n, pred in expect.items())

        return wait_for(
            "metrics-server to serve the declared node usage",
            served,
            ok,
            timeout=timeout,
            max_interval=1.0,
            describe=str,
        )
