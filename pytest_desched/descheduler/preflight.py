"""The runbook's pre-flight, done and recorded before the first install changes anything.

Cluster and client versions, whether the chart's ServiceAccount may create
`pods/eviction` in the target namespace, that namespace's PodDisruptionBudgets, and a
`kubectl diff` of what the install will create. Each answer is kept as evidence (every
round record carries it); a step that cannot be answered says why instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_desched.redaction import scrub_secrets

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

DIFF_MAX_CHARS = 20_000  # the record keeps the diff's head; the count covers all of it


def versions(cluster: Cluster) -> dict[str, Any]:
    """`kubectl version -o json`: the client's and the cluster's gitVersion."""
    proc = cluster.kubectl("version", "-o", "json", check=False)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return {"error": scrub_secrets(proc.stderr.strip()[-300:])}
    return {
        "client": (doc.get("clientVersion") or {}).get("gitVersion"),
        "server": (doc.get("serverVersion") or {}).get("gitVersion"),
    }


def can_i_evict(cluster: Cluster, service_account: str, sa_namespace: str, target: str) -> dict:
    """`kubectl auth can-i create pods --subresource=eviction --as=<the chart's SA> -n <target>`.

    Not `create pods/eviction`: kubectl reads that as a pod *named* "eviction", which the
    chart's ServiceAccount may never create, so it answered "no" even after the install.
    """
    user = f"system:serviceaccount:{sa_namespace}:{service_account}"
    proc = cluster.kubectl(
        "auth",
        "can-i",
        "create",
        "pods",
        "--subresource=eviction",
        f"--as={user}",
        "-n",
        target,
        check=False,
    )
    answer = proc.stdout.strip() or proc.stderr.strip()[-200:]
    return {"as": user, "namespace": target, "answer": answer, "allowed": proc.returncode == 0}


def pdbs(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """The target namespace's PDBs: what the evictions will have to respect."""
    out = []
    for p in cluster.policy.list_namespaced_pod_disruption_budget(namespace).items:
        st = p.status
        out.append(
            {
                "name": p.metadata.name,
                "min_available": p.spec.min_available,
                "max_unavailable": p.spec.max_unavailable,
                "selector": (p.spec.selector.match_labels if p.spec.selector else None),
                "disruptions_allowed": st.disruptions_allowed if st else None,
                "current_healthy": st.current_healthy if st else None,
                "desired_healthy": st.desired_healthy if st else None,
            }
        )
    return out


def diff_objects(diff: str) -> list[str]:
    """The objects a `kubectl diff` shows, from its `diff -u -N` headers (+++ .../KIND.NS.NAME)."""
    found = []
    for line in diff.splitlines():
        if line.startswith("+++ "):
            found.append(line[4:].split("\t")[0].rsplit("/", 1)[-1])
    return found


def run_preflight(
    cluster: Cluster,
    docs: list[dict[str, Any]],
    diff: str | Callable[[], str],
    release_namespace: str,
    target_namespace: str | None,
) -> dict[str, Any]:
    """All pre-flight answers as plain JSON data (`docs`: the render the install will apply).

    `diff` is the `kubectl diff` text, or the call that makes it. The questions are
    independent reads (kubectl's and the API server's), so they are asked at the same time:
    each mostly waits on a round trip; the answers are the same as one after another.
    """
    from concurrent.futures import ThreadPoolExecutor

    sas = [d["metadata"]["name"] for d in docs if d.get("kind") == "ServiceAccount"]
    with ThreadPoolExecutor(4, thread_name_prefix="desched-preflight") as pool:
        asked_diff = pool.submit(diff) if callable(diff) else None
        asked_versions = pool.submit(versions, cluster)
        asked_evict = (
            pool.submit(can_i_evict, cluster, sas[0], release_namespace, target_namespace)
            if target_namespace and sas
            else None
        )
        asked_pdbs = pool.submit(pdbs, cluster, target_namespace) if target_namespace else None
        text = asked_diff.result() if asked_diff is not None else str(diff)
        result: dict[str, Any] = {
            "versions": asked_versions.result(),
            "target_namespace": target_namespace,
            "diff_objects": diff_objects(text),
            "diff_lines": len(text.splitlines()),
            "diff": text[:DIFF_MAX_CHARS],
        }
    if target_namespace:
        result["can_i_evict"] = (
            asked_evict.result()
            if asked_evict is not None
            else {"answer": "the render creates no ServiceAccount", "allowed": None}
        )
        from kubernetes.client.rest import ApiException

        try:
            result["pdbs"] = asked_pdbs.result() if asked_pdbs is not None else []
        except ApiException as exc:
            result["pdbs"] = {"error": f"{exc.status} {exc.reason}"}
    else:
        result["can_i_evict"] = {"answer": "no target namespace given", "allowed": None}
        result["pdbs"] = []
    return result
