"""Emergency stop and ordered cleanup, as the runbook says: stop the executor first.

Neither function ever deletes a PodDisruptionBudget or loosens a protection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.providers.base import Cluster


def _started(cluster: Cluster, job: Any) -> bool:
    """A Job has started once any of its pods runs or ran (not merely exists)."""
    s = job.status
    if s and ((s.succeeded or 0) or (s.failed or 0) or s.completion_time):
        return True
    pods = cluster.core.list_namespaced_pod(
        job.metadata.namespace, label_selector=f"job-name={job.metadata.name}"
    ).items
    return any(p.status.phase in ("Running", "Succeeded", "Failed") for p in pods)


def round_jobs(cluster: Cluster, release: Release) -> list[Any]:
    """Jobs owned by the release's CronJob (manual rounds and scheduled ones alike)."""
    jobs = cluster.batch.list_namespaced_job(release.namespace).items
    return [
        j
        for j in jobs
        if any(
            o.kind == "CronJob" and o.name == release.cronjob_name
            for o in j.metadata.owner_references or []
        )
    ]


def _delete_job(cluster: Cluster, name: str, namespace: str) -> None:
    """Delete a round Job; one already gone (404: its CronJob's history limit, a parallel
    cleanup, or an API server reading a stale list while etcd is down) is the goal reached."""
    try:
        cluster.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
    except ApiException as exc:
        if exc.status != 404:
            raise


def emergency_stop(cluster: Cluster, release: Release) -> dict[str, Any]:
    """Suspend the CronJob, delete the round Jobs that have not started; touch nothing else."""
    report: dict[str, Any] = {"suspended": False, "deleted_jobs": [], "kept_started_jobs": []}
    try:
        cluster.batch.patch_namespaced_cron_job(
            release.cronjob_name, release.namespace, {"spec": {"suspend": True}}
        )
        report["suspended"] = True
    except ApiException as exc:
        if exc.status != 404:
            raise
        report["suspended"] = "absent"
    for job in round_jobs(cluster, release):
        if _started(cluster, job):
            report["kept_started_jobs"].append(job.metadata.name)
            continue
        _delete_job(cluster, job.metadata.name, release.namespace)
        report["deleted_jobs"].append(job.metadata.name)
    return report


def leftovers(cluster: Cluster, release: Release) -> list[str]:
    """Objects of the release that survived `helm uninstall` (the runbook's last look)."""
    sel = f"app.kubernetes.io/instance={release.name}"
    found: list[str] = []
    ns = release.namespace
    for kind, items in (
        (
            "ServiceAccount",
            cluster.core.list_namespaced_service_account(ns, label_selector=sel).items,
        ),
        ("ConfigMap", cluster.core.list_namespaced_config_map(ns, label_selector=sel).items),
        ("ClusterRole", cluster.rbac.list_cluster_role(label_selector=sel).items),
        ("ClusterRoleBinding", cluster.rbac.list_cluster_role_binding(label_selector=sel).items),
        ("CronJob", cluster.batch.list_namespaced_cron_job(ns, label_selector=sel).items),
    ):
        found += [f"{kind}/{o.metadata.name}" for o in items]
    found += [f"Job/{j.metadata.name}" for j in round_jobs(cluster, release)]
    return found


def cleanup_release(cluster: Cluster, release: Release) -> dict[str, Any]:
    """Stop, uninstall, delete our round Jobs (helm does not own them), report leftovers."""
    out: dict[str, Any] = {"emergency_stop": emergency_stop(cluster, release)}
    for job in round_jobs(cluster, release):
        _delete_job(cluster, job.metadata.name, release.namespace)
    out["uninstall"] = release.uninstall().strip()[-300:]
    out["leftovers"] = leftovers(cluster, release)
    return out
