"""A round pod's run and its failure: the JobRunner capability and the PodRun it returns.

Shared by every way a round pod runs: the embedded stand-in kubelet (providers.embedded)
and a real kubelet on kind or existing clusters (descheduler.rounds.wait_job_finished).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_desched.errors import RoundFailed
from pytest_desched.redaction import scrub_secrets

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

# Who runs round pods when no JobRunner does: the cluster's own kubelets (Round.executor).
IN_CLUSTER = "in-cluster"

ERROR_LINES = 5  # how many of the log's last error lines a RoundFailed quotes


_ERRORISH = re.compile(r"(?i)\berr(?:or)?s?\b|fail|invalid|refus|unable|cannot|panic|fatal")


def error_lines(log: str, n: int = ERROR_LINES, width: int = 400) -> list[str]:
    """The last `n` lines of a descheduler log that report an error, scrubbed and shortened.

    JSON lines (`--logging-format=json`) are shown as `msg: err`; plain lines (cobra's
    `Error: ...`, klog text, panics) as they are. Without any error-looking line, the last
    `n` lines are returned, so the caller never shows nothing.
    """
    picked: list[str] = []
    tail: list[str] = []
    for raw in log.splitlines():
        line = raw.strip()
        if not line:
            continue
        tail.append(line)
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            msg, err = str(doc.get("msg", "")), doc.get("err")
            if err is not None or _ERRORISH.search(msg):
                picked.append(f"{msg}: {err}" if err is not None else msg)
        elif _ERRORISH.search(line):
            picked.append(line)
    chosen = (picked or tail)[-n:]
    return [scrub_secrets(c if len(c) <= width else c[: width - 3] + "...") for c in chosen]


class JobRunner(Protocol):
    """A provider capability: its nodes run no containers, so the engine runs round pods.

    `pod_annotations` go on the round Job's pod template (marks the plugin's own rounds);
    `register` tells it which binary runs a release's image; `run` waits until the Job
    controller finished the Job and returns what each of its pods' runs produced.
    """

    name: str
    pod_annotations: dict[str, str]

    def register(self, cluster: Cluster, image: str, binary: Path) -> None: ...

    def run(
        self,
        cluster: Cluster,
        job_name: str,
        namespace: str,
        binary: Path,
        log_dir: Path,
        timeout: float = 300,
        until_exit: bool = False,
    ) -> list[PodRun]: ...

    def stopped(
        self, cluster: Cluster, uids: list[str], log_dir: Path, timeout: float = 60
    ) -> list[PodRun]:
        """The runs of these pods once their processes ended after the pods were deleted
        (a round stopped at its timeout: descheduler.rounds.stop_round), logs so far kept."""
        ...


@dataclass
class PodRun:
    """What running one round pod produced."""

    namespace: str
    pod: str
    uid: str
    service_account: str
    argv: list[str]  # binary and args as run (no credentials in them)
    exit_code: int
    started: dt.datetime
    finished: dt.datetime
    log: str
    log_path: Path | None = None
    notes: list[str] = field(default_factory=list)
    metrics: MetricsScrape | None = None


@dataclass
class MetricsScrape:
    """What polling the round's own /metrics endpoint while it ran yielded."""

    attempts: int = 0
    successes: int = 0
    last_status: str = ""
    last_text: str = ""
    last_at: float | None = None  # time.monotonic() of the last successful scrape


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def end_failed_round(cluster: Cluster, job_name: str, namespace: str, run: PodRun) -> RoundFailed:
    """Leave the Job no retries (the Job controller then marks it Failed); the error to raise."""
    from kubernetes.client.rest import ApiException  # heavy (~1.5 s, the whole client)

    notes = [n for n in run.notes if n.startswith("killed")]  # a timeout, not a refusal
    try:
        cluster.batch.patch_namespaced_job(job_name, namespace, {"spec": {"backoffLimit": 0}})
    except ApiException as exc:  # never mask the descheduler's own error with this one
        notes.append(
            f"could not stop the Job's retries ({exc.status} {exc.reason}); "
            f"delete it: kubectl -n {namespace} delete job {job_name}"
        )
    return RoundFailed(
        namespace, job_name, run.pod, run.exit_code, error_lines(run.log), run.log_path, notes
    )


def failed_pod(cluster: Cluster, job_name: str, namespace: str) -> RoundFailed | None:
    """For Jobs a kubelet runs (kind, existing clusters): the first pod that exited non-zero.

    Same rule as the embedded path: that failure is final for the round (see RoundFailed).
    """
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items
    for p in pods:
        for cs in (p.status.container_statuses or []) if p.status else []:
            term = cs.state.terminated if cs.state else None
            if term is None or not term.exit_code:
                continue
            try:
                log = cluster.core.read_namespaced_pod_log(p.metadata.name, namespace)
            except Exception as exc:  # the container's termination message is the fallback
                log = f"{term.message or ''}\n(logs unreadable: {type(exc).__name__})"
            run = PodRun(
                namespace,
                p.metadata.name,
                p.metadata.uid,
                p.spec.service_account_name or "default",
                [],
                term.exit_code,
                utcnow(),
                utcnow(),
                log,
            )
            return end_failed_round(cluster, job_name, namespace, run)
    return None
