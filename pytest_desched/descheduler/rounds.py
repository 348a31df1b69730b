"""One descheduler round: a Job created from the suspended CronJob, run, and read back.

Equivalent to `kubectl create job --from=cronjob/descheduler NAME`: the Job copies the
CronJob's jobTemplate, is owned by the CronJob and annotated as a manual instantiation.
"""

from __future__ import annotations

import contextlib
import copy
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.audit import expected_requests
from pytest_desched.descheduler.decisions import RoundResult
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.errors import RoundError
from pytest_desched.kube import (
    UnscheduledGuard,
    WaitTimeout,
    api_unavailable,
    owned_by_job,
    wait_for,
    watch_until,
)
from pytest_desched.providers.audit_log import AuditWindow, EvictionRequest
from pytest_desched.providers.jobs import failed_pod

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.providers.base import Cluster
    from pytest_desched.providers.jobs import PodRun


# Every round Job (and its pods) carries the run's label, so an emergency stop finds them
# by selector as well as by the runbook's names: kubectl -n kube-system delete job -l RUN_LABEL=ID
RUN_LABEL = "desched.pytest.io/run"
RUN_ID = uuid.uuid4().hex[:8]  # one per process: one `pytest` or `desched` run


def runbook_job_name(cluster: Cluster, namespace: str, name: str, run_id: str = RUN_ID) -> str:
    """The runbook's Job name (e.g. descheduler-positive), suffixed only if one exists already."""
    from kubernetes.client.rest import ApiException

    for candidate in (name, f"{name}-{run_id[:5]}"):
        try:
            cluster.batch.read_namespaced_job(candidate, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return candidate
            raise
    return f"{name}-{run_id[:5]}-{uuid.uuid4().hex[:4]}"


@dataclass
class Round:
    """The outcome of one Job: its identity, timing, exit status, logs and parsed decisions."""

    name: str
    namespace: str
    job_uid: str
    succeeded: bool
    exit_code: int | None
    logs: str
    result: RoundResult
    started: float  # time.monotonic()
    ended: float
    service_account: str
    executor: str
    pod_runs: list[PodRun] = field(default_factory=list)
    log_path: Path | None = None
    conditions: dict[str, str] = field(default_factory=dict)
    # The API server's audit log of the round's window (eviction creates and pod deletes, see
    # pytest_desched.providers.audit_log); None when the cluster has no readable audit log
    # (cluster.audit_unavailable_why says why).
    audit_requests: list[EvictionRequest] | None = None
    audit_wait_s: float | None = None  # after the Job finished, until the window was complete
    audit_complete: bool | None = None  # False: fewer requests than the log proves were sent
    # Why the round did not finish within its timeout (the wait's last state); None: it did.
    # A timed-out round is stopped (its Job deleted with its pods, the process ended) and
    # read like any other: its log so far is `logs` (known_bugs.hang_cause names a cause).
    timed_out: str | None = None
    # Watching the Job for its verdict since the round ended (start_settling), so the wait in
    # settle() overlaps whatever the caller does meanwhile (assess, checks).
    settling: threading.Thread | None = field(default=None, repr=False, compare=False)

    @property
    def duration_s(self) -> float:
        return self.ended - self.started

    @property
    def settled(self) -> bool:
        """The Job controller has decided: Complete or Failed (a timed-out round's Job is gone:
        there is nothing left to decide)."""
        return (
            self.timed_out is not None
            or self.conditions.get("Complete") == "True"
            or self.conditions.get("Failed") == "True"
        )

    def start_settling(self, cluster: Cluster, timeout: float = 30) -> None:
        """Start waiting for the Job controller's verdict in the background (see settle).

        The thread only waits (it changes nothing on the round); settle() reads the verdict.
        """
        if self.settled or self.settling is not None:
            return

        def wait() -> None:
            with contextlib.suppress(Exception):  # settle() waits (and fails) in its own thread
                self._verdict(cluster, timeout)

        self.settling = threading.Thread(target=wait, name=f"settle {self.name}", daemon=True)
        self.settling.start()

    def settle(self, cluster: Cluster, timeout: float = 30) -> Round:
        """Wait (watching the Job) for the Job controller's verdict; sets `succeeded`.

        A round that ended when its pod exited (run_round(wait_job=False)) has the pod's exit
        status but maybe not yet the Job's condition: the Job controller batches pod updates
        for up to 1 s (its verdict lands about 1 s after the pod was created, however short
        the run). The wait started when the round ended (start_settling) is joined first, so
        it overlapped the caller's work since. On timeout the conditions seen stay as they
        are (`succeeded` False).
        """
        if self.settled:
            return self
        deadline = time.monotonic() + timeout
        if self.settling is not None:
            self.settling.join(timeout)
        conditions = self._verdict(cluster, max(1.0, deadline - time.monotonic()))
        self.conditions, self.succeeded = conditions, conditions.get("Complete") == "True"
        return self

    def _verdict(self, cluster: Cluster, timeout: float) -> dict[str, str]:
        """The Job's conditions once Complete or Failed, or as they are after `timeout`."""

        def conds(jobs: list[Any]) -> dict[str, str]:
            job = next((j for j in jobs if j.metadata.uid == self.job_uid), None)
            status = job.status if job is not None else None
            return {c.type: c.status for c in (status.conditions or [])} if status else {}

        try:
            jobs = watch_until(
                f"Job {self.namespace}/{self.name} Complete or Failed",
                cluster.batch.list_namespaced_job,
                lambda jobs: bool(
                    {"Complete", "Failed"} & {k for k, v in conds(jobs).items() if v == "True"}
                ),
                timeout,
                lambda jobs: str(conds(jobs)),
                self.namespace,
                field_selector=f"metadata.name={self.name}",
            )
        except WaitTimeout:
            jobs = cluster.batch.list_namespaced_job(
                self.namespace, field_selector=f"metadata.name={self.name}"
            ).items
        return conds(jobs)

    @property
    def user(self) -> str:
        """The username the API server authenticates the round's pod as (its ServiceAccount)."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def job_from_cronjob(
    cronjob: Any,
    name: str,
    pod_annotations: Mapping[str, str] | None = None,
    service_account: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Job `kubectl create job --from=cronjob/...` would create, as a plain manifest.

    `pod_annotations` go on the pod template (a provider's JobRunner asks for them, to mark
    the plugin's own rounds). `service_account` swaps the identity (used
    to prove RBAC is what the API enforces). `labels` go on the Job and its pods (the run's
    label, for an emergency stop by selector).
    """
    from kubernetes import client

    tmpl = client.ApiClient().sanitize_for_serialization(cronjob.spec.job_template)
    tmpl = copy.deepcopy(tmpl)
    meta = tmpl.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    annotations["cronjob.kubernetes.io/instantiate"] = "manual"
    spec = tmpl["spec"]
    pod_meta = spec["template"].setdefault("metadata", {})
    if pod_annotations:
        pod_meta.setdefault("annotations", {}).update(pod_annotations)
    if labels:
        pod_meta.setdefault("labels", {}).update(labels)
    if service_account:
        spec["template"]["spec"]["serviceAccountName"] = service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": cronjob.metadata.namespace,
            "labels": {**(meta.get("labels") or {}), **(labels or {})},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": cronjob.metadata.name,
                    "uid": cronjob.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


DRY_RUN_ARG = re.compile(r"^--dry-run(=.*)?$")


def force_dry_run(manifest: dict[str, Any]) -> None:
    """The Job runs in dry run whatever its CronJob says: `--dry-run=true`, and nothing else
    of that flag, on the descheduler's container (the one verify_live reads).

    The only direction this goes: a dry-run twin of a real round (fidelity/engine.py) is the
    same CronJob, policy and binary with evictions off, never the other way round.
    """
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container.get("args") or [] if not DRY_RUN_ARG.match(str(a))]
    container["args"] = [*args, "--dry-run=true"]


def ensure_suspended(release: Release) -> Any:
    cj = release.live_cronjob()
    if cj.spec.suspend is not True:
        raise RoundError(
            f"CronJob {release.namespace}/{cj.metadata.name} is not suspended; refusing to run a "
            f"round (the runbook allows evictions only through explicit Jobs). Suspend it: "
            f"kubectl -n {release.namespace} patch cronjob {cj.metadata.name} -p "
            '\'{"spec":{"suspend":true}}\''
        )
    return cj


def run_round(
    cluster: Cluster,
    release: Release,
    name: str,
    log_dir: Path,
    timeout: float = 180,
    service_account: str | None = None,
    audit_timeout: float = 10,
    wait_job: bool = True,
    dry_run: bool = False,
) -> Round:
    """Create the Job, have it run (by a kubelet, or the provider's JobRunner), parse its logs.

    With a readable audit log, the log's offset is taken before the Job exists and the
    requests appended after it are attached (`Round.audit_requests`), waiting up to
    `audit_timeout` for as many eviction requests as the round's log proves it sent (its own:
    rounds of other releases may run at the same time).
    `wait_job=False`: where the provider's JobRunner knows the pod's exit, the round ends
    there and the Job's condition is the caller's to wait for (`Round.settle`).
    `dry_run=True`: the Job runs in dry run whatever the CronJob says (`force_dry_run`), and
    the round fails unless its log confirms it did.
    """
    ns = release.namespace
    with api_unavailable(cluster, f"reading CronJob {ns}/{release.cronjob_name} (no Job created)"):
        cj = ensure_suspended(release)
    runner = cluster.job_runner
    annotations = runner.pod_annotations if runner is not None else None
    manifest = job_from_cronjob(cj, name, annotations, service_account, {RUN_LABEL: RUN_ID})
    if dry_run:
        force_dry_run(manifest)
    window = AuditWindow(cluster.audit_log) if cluster.audit_log is not None else None
    binary = (release.binary or cluster.toolchain.path("descheduler")) if runner else None
    if runner is not None and binary is not None:
        runner.register(cluster, release.image, binary)
    started = time.monotonic()
    with api_unavailable(cluster, f"creating round Job {ns}/{name} (it may or may not exist)"):
        job = cluster.batch.create_namespaced_job(ns, manifest)
    pod_runs: list[PodRun] = []
    timed_out: str | None = None
    # A failure from here on leaves a started round behind: the emergency stop keeps it.
    with api_unavailable(cluster, f"waiting for round Job {ns}/{name} (it may still be running)"):
        try:
            if runner is not None and binary is not None:
                pod_runs = runner.run(cluster, name, ns, binary, log_dir, timeout, not wait_job)
                logs = "\n".join(r.log.rstrip("\n") for r in pod_runs) + "\n"
            else:
                wait_job_finished(cluster, name, ns, timeout)
                logs = read_job_logs(cluster, name, ns)
        except WaitTimeout as exc:
            timed_out = str(exc).split("; logs so far:", 1)[0]
            pod_runs, logs = stop_round(cluster, name, ns, log_dir)
        ended = time.monotonic()
        if timed_out is None:
            job = cluster.batch.read_namespaced_job(name, ns)
            exit_code = pod_runs[-1].exit_code if pod_runs else _exit_code(cluster, name, ns)
            conds = {c.type: c.status for c in job.status.conditions or []}
        else:  # the Job is gone (stop_round): its conditions were never decided
            exit_code = pod_runs[-1].exit_code if pod_runs else None
            conds = {}
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    log_path.write_text(logs)
    result = parse_log(logs, release.descheduler_version)
    if dry_run and not result.dry_run:
        raise RoundError(
            f"round Job {ns}/{name} was created with --dry-run=true but its log does not say it "
            f"ran in dry run ({log_path}); its evictions, if any, are in the audit log"
        )
    sa = manifest["spec"]["template"]["spec"].get("serviceAccountName", "default")
    user = f"system:serviceaccount:{release.namespace}:{sa}"
    audit_requests, audit_wait_s, audit_complete = (
        window.collect(expected_requests(result), audit_timeout, lambda r: r.user == user)
        if window
        else (None, None, None)
    )
    rnd = Round(
        name=name,
        namespace=release.namespace,
        job_uid=job.metadata.uid,  # as created (a timed-out round's Job is deleted since)
        succeeded=conds.get("Complete") == "True",
        exit_code=exit_code,
        logs=logs,
        result=result,
        started=started,
        ended=ended,
        service_account=sa,
        executor=cluster.job_executor,
        pod_runs=pod_runs,
        log_path=log_path,
        conditions=conds,
        audit_requests=audit_requests,
        audit_wait_s=audit_wait_s,
        audit_complete=audit_complete,
        timed_out=timed_out,
    )
    if not wait_job:  # the caller settles it later: its wait starts now (Round.settle)
        rnd.start_settling(cluster)
    return rnd


STOP_TIMEOUT_S = 60.0  # a stopped round's pods gone and its process ended, under load


def stop_round(
    cluster: Cluster, name: str, namespace: str, log_dir: Path, timeout: float = STOP_TIMEOUT_S
) -> tuple[list[PodRun], str]:
    """Stop a round that outlived its timeout, and keep what it said: (its pods' runs, its log).

    The runbook's emergency stop for one Job: the Job is deleted with its pods (propagation
    Background), so no process of it outlives the round; the wait ends when every pod is gone
    and, where the provider's JobRunner runs them, its runs have ended (their logs so far are
    in the runs). With a real kubelet, the log is read before the deletion.
    """
    runner = cluster.job_runner
    pods = _job_pods(cluster, name, namespace)
    logs = "" if runner is not None else read_job_logs(cluster, name, namespace)
    _delete_with_pods(cluster, name, namespace, pods, "stopped round", timeout)
    runs: list[PodRun] = []
    if runner is not None:
        started = [p for p in pods if (p.status.phase if p.status else None) == "Running"]
        runs = runner.stopped(cluster, [p.metadata.uid for p in started], log_dir, timeout)
        logs = "\n".join(r.log.rstrip("\n") for r in runs) + "\n"
    return runs, logs


def delete_round_job(
    cluster: Cluster, name: str, namespace: str, timeout: float = STOP_TIMEOUT_S
) -> None:
    """Delete a finished round Job with its pods, and wait until each of them is gone (a Job
    already gone is the goal reached; pods it left are still waited for)."""
    pods = _job_pods(cluster, name, namespace)
    _delete_with_pods(cluster, name, namespace, pods, "round", timeout)


def _delete_with_pods(
    cluster: Cluster, name: str, namespace: str, pods: list[Any], what: str, timeout: float
) -> None:
    """Delete the Job (propagation Background) and wait until every one of `pods` is gone."""
    from kubernetes import client

    with contextlib.suppress(Exception):  # gone already: the wait below says what is left
        cluster.batch.delete_namespaced_job(
            name, namespace, body=client.V1DeleteOptions(propagation_policy="Background")
        )
    uids = {p.metadata.uid for p in pods}
    wait_for(
        f"the pods of the {what} Job {namespace}/{name} to be gone",
        lambda: [p.metadata.name for p in _job_pods_any(cluster, name, namespace)
                 if p.metadata.uid in uids],
        lambda left: not left,
        timeout,
    )  # fmt: skip


def _job_pods_any(cluster: Cluster, name: str, namespace: str) -> list[Any]:
    """Every pod labelled with the Job's name (its own are all of them once it is deleted)."""
    return cluster.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items


def wait_job_finished(cluster: Cluster, name: str, namespace: str, timeout: float) -> None:
    """Wait for the Job's outcome; a pod that exited non-zero ends the round at once."""
    unscheduled = UnscheduledGuard(f"round Job {namespace}/{name}")

    def probe() -> dict[str, str]:
        job = cluster.batch.read_namespaced_job(name, namespace)
        conds = {c.type: c.status for c in job.status.conditions or []}
        if conds.get("Complete") != "True":
            failure = failed_pod(cluster, name, namespace)
            if failure is not None:
                raise failure  # RoundFailed: the retries the Job would make cannot help
            unscheduled.check(_job_pods(cluster, name, namespace))
        return conds

    try:
        wait_for(
            f"Job {namespace}/{name} to finish",
            probe,
            lambda c: c.get("Complete") == "True" or c.get("Failed") == "True",
            timeout,
        )
    except WaitTimeout as exc:
        raise WaitTimeout(
            f"{exc}; logs so far:\n{read_job_logs(cluster, name, namespace)[-2000:]}"
        ) from None


def _job_pods(cluster: Cluster, name: str, namespace: str) -> list[Any]:
    """The Job's own pods; an earlier Job of the same name may still have some (kube.owned_by_job)."""
    from kubernetes.client.rest import ApiException

    try:
        job = cluster.batch.read_namespaced_job(name, namespace)
        uid = getattr(getattr(job, "metadata", None), "uid", None)
    except ApiException as exc:
        if exc.status != 404:
            raise
        uid = None
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
    return [p for p in pods if owned_by_job(p, uid)]


def read_job_logs(cluster: Cluster, name: str, namespace: str) -> str:
    out = []
    for p in _job_pods(cluster, name, namespace):
        try:
            out.append(cluster.core.read_namespaced_pod_log(p.metadata.name, namespace))
        except Exception as exc:  # logs of a pod that never started
            out.append(f'{{"msg":"pytest-desched: no logs for pod {p.metadata.name}: {exc}"}}\n')
    return "".join(out)


def _exit_code(cluster: Cluster, name: str, namespace: str) -> int | None:
    for p in _job_pods(cluster, name, namespace):
        for cs in p.status.container_statuses or []:
            if cs.state and cs.state.terminated:
                return cs.state.terminated.exit_code
    return None
