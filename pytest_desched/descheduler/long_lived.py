"""A long-lived descheduler for one experiment: the round Job's process, kept running with
`--descheduling-interval`, its cycles read from its log while it runs, then stopped.

Why a Job and not the chart's `kind: Deployment`: the runbook allows evictions only through
Jobs from the suspended CronJob, and every install here is checked to render exactly that
(render_checks.py, inputs.py refuse `kind`). A Deployment-mode install would be a second,
unsuspended workload beside it. The same binary, policy, ServiceAccount and args run here as
one Job from the suspended CronJob with the interval added, so the only difference from a
Deployment is what is under test: one process whose metrics collector outlives a cycle.

Bounds (validated before anything is created): the interval, the cycles, and so a deadline
(`activeDeadlineSeconds` on the Job and its pod: the Job controller, or the stand-in kubelet,
ends the process there); the dry-run flag is the CronJob's, untouched. Each cycle can evict at
most the policy's caps, so `max_cycles` bounds the run's evictions.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.audit import expected_requests
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.descheduler.rounds import (
    DRY_RUN_ARG,
    RUN_ID,
    RUN_LABEL,
    ensure_suspended,
    job_from_cronjob,
    runbook_job_name,
    stop_round,
)
from pytest_desched.descheduler.utilization_log import Cycle, cycles
from pytest_desched.errors import InputError
from pytest_desched.kube import owned_by_job, wait_for
from pytest_desched.providers.audit_log import AuditWindow, EvictionRequest

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.providers.base import Cluster

INTERVAL_ARG = "--descheduling-interval"
MIN_INTERVAL_S, MAX_INTERVAL_S = 10, 120  # >= two metrics-collector periods (5 s) apart
MIN_CYCLES, MAX_CYCLES = 2, 6  # one cycle is a Job round; each cycle evicts up to the caps
START_MARGIN_S = 60  # process start, informer and collector sync, under load
# Flags the mode sets, or that would make it something else (a Lease, another interval).
CLASHING_ARG = re.compile(r"^--(descheduling-interval|leader-elect)(=.*)?$")


@dataclass(frozen=True)
class LongLivedMode:
    """How long the process lives: a cycle every `interval_s`, at most `max_cycles`."""

    interval_s: int
    max_cycles: int

    def __post_init__(self) -> None:
        for what, value, lo, hi, why in (
            ("interval_s", self.interval_s, MIN_INTERVAL_S, MAX_INTERVAL_S,
             "cycles closer than two metrics-collector periods cannot be told apart, and "
             "each may evict up to the policy's caps"),
            ("max_cycles", self.max_cycles, MIN_CYCLES, MAX_CYCLES,
             "one cycle is a plain Job round; every cycle may evict up to the policy's caps"),
        ):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InputError(
                    "long-lived descheduler",
                    what,
                    f"{value!r} is out of range ({why})",
                    f"give an integer in {lo}..{hi}",
                )

    @property
    def deadline_s(self) -> int:
        """When the process is ended whatever happens (the Job's and pod's deadline)."""
        return START_MARGIN_S + self.interval_s * self.max_cycles


def interval_job(manifest: dict[str, Any], mode: LongLivedMode) -> None:
    """Make a round Job's manifest long-lived: the interval added, its deadline set, no retry.

    Refuses a template that already carries an interval or leader election (the values made
    something else of it). The dry-run flag is left exactly as the CronJob has it.
    """
    spec = manifest["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    args = [str(a) for a in container.get("args") or []]
    clash = [a for a in args if CLASHING_ARG.match(a)]
    if clash:
        raise InputError(
            "long-lived descheduler",
            "CronJob container args",
            f"already has {clash} (the mode sets {INTERVAL_ARG} itself and runs no Lease)",
            "remove them from the chart values' cmdOptions",
        )
    dry_before = [a for a in args if DRY_RUN_ARG.match(a)]
    container["args"] = [*args, f"{INTERVAL_ARG}={mode.interval_s}s"]
    spec["activeDeadlineSeconds"] = mode.deadline_s  # the Job controller ends it there
    pod["activeDeadlineSeconds"] = mode.deadline_s  # and the stand-in kubelet kills it there
    spec["backoffLimit"] = 0  # a process that exits is not started again
    after = [a for a in container["args"] if DRY_RUN_ARG.match(str(a))]
    assert after == dry_before, "the long-lived mode never changes dry-run"


@dataclass
class LongLivedRun:
    """A started long-lived process: its Job, and its log as the kubelet holds it."""

    cluster: Cluster
    release: Release
    name: str
    job_uid: str
    mode: LongLivedMode
    log_dir: Path
    window: AuditWindow | None
    user: str
    started: float = field(default_factory=time.monotonic)
    result: LongLivedResult | None = None  # once stopped

    def _pod_name(self) -> str | None:
        pods = self.cluster.core.list_namespaced_pod(
            self.release.namespace, label_selector=f"job-name={self.name}"
        ).items
        mine = [p for p in pods if owned_by_job(p, self.job_uid)]
        return mine[0].metadata.name if mine else None

    def log_so_far(self) -> str:
        runner = self.cluster.job_runner
        pod = self._pod_name()
        if runner is None or pod is None:
            return ""
        return runner.live_log(self.cluster, pod) or ""  # type: ignore[attr-defined]

    def wait_cycles(
        self, what: str, until: Callable[[list[Cycle]], bool], timeout: float
    ) -> list[Cycle]:
        """The process's cycles so far, once `until` holds; on timeout, what the log showed."""

        def describe(cs: list[Cycle]) -> str:
            return (
                "; ".join(
                    f"cycle {c.number}: classified {sorted(c.classified)}, evicted {list(c.evicted)}"
                    f"{'' if c.end_ms else ' (running)'}"
                    for c in cs
                )
                or "no cycle in the log yet"
            )

        return wait_for(
            f"long-lived descheduler {self.release.namespace}/{self.name}: {what}",
            lambda: cycles(self.log_so_far()),
            until,
            timeout,
            describe=describe,
            max_interval=0.5,
        )

    def stop(self, audit_timeout: float = 10) -> LongLivedResult:
        """The runbook's stop for a Job: deleted with its pod, the process ended (SIGTERM),
        its log kept; then the API server's audit of its eviction requests. Once only."""
        if self.result is not None:
            return self.result
        ns = self.release.namespace
        runs, logs = stop_round(self.cluster, self.name, ns, self.log_dir)
        ended = time.monotonic()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{self.name}.log"
        log_path.write_text(logs)
        requests: list[EvictionRequest] | None = None
        if self.window is not None:
            expected = expected_requests(parse_log(logs, self.release.descheduler_version))
            requests, _, _ = self.window.collect(
                expected, audit_timeout, lambda r: r.user == self.user
            )
        notes = [n for r in runs for n in r.notes]
        self.result = LongLivedResult(
            self.name, self.job_uid, logs, log_path, cycles(logs), requests, notes,
            round(ended - self.started, 1),
        )  # fmt: skip
        return self.result


@dataclass(frozen=True)
class LongLivedResult:
    """What a stopped long-lived process left: its whole log, its cycles, its audit."""

    name: str
    job_uid: str
    logs: str
    log_path: Path
    cycles: list[Cycle]
    audit_requests: list[EvictionRequest] | None  # None: the cluster has no audit log
    notes: list[str]
    duration_s: float

    def requests_in(self, cyc: Cycle, slack_ms: float = 1000) -> list[EvictionRequest] | None:
        """The audited requests answered while `cyc` ran (its log's own times)."""
        if self.audit_requests is None:
            return None
        end = cyc.end_ms if cyc.end_ms is not None else float("inf")

        def ms(t: datetime | None) -> float | None:
            return t.timestamp() * 1000 if t is not None else None

        return [
            r
            for r in self.audit_requests
            if (t := ms(r.stage_ts)) is not None and cyc.start_ms <= t <= end + slack_ms
        ]


def start(
    cluster: Cluster, release: Release, name: str, mode: LongLivedMode, log_dir: Path
) -> LongLivedRun:
    """Create the long-lived Job from the suspended CronJob (refused unless it is suspended,
    and unless the cluster's JobRunner can show a running pod's log)."""
    runner = cluster.job_runner
    if runner is None or not callable(getattr(runner, "live_log", None)):
        raise InputError(
            "long-lived descheduler",
            "provider",
            f"the {cluster.provider} provider cannot show a running round's log (its "
            "JobRunner has no live_log)",
            "run it with --provider embedded",
        )
    ns = release.namespace
    cj = ensure_suspended(release)
    name = runbook_job_name(cluster, ns, name)
    manifest = job_from_cronjob(cj, name, runner.pod_annotations, None, {RUN_LABEL: RUN_ID})
    interval_job(manifest, mode)
    binary = release.binary or cluster.toolchain.path("descheduler")
    runner.register(cluster, release.image, binary)
    window = AuditWindow(cluster.audit_log) if cluster.audit_log is not None else None
    job = cluster.batch.create_namespaced_job(ns, manifest)
    sa = manifest["spec"]["template"]["spec"].get("serviceAccountName", "default")
    return LongLivedRun(
        cluster, release, name, job.metadata.uid, mode, log_dir, window,
        f"system:serviceaccount:{ns}:{sa}",
    )  # fmt: skip


@contextlib.contextmanager
def running(
    cluster: Cluster, release: Release, name: str, mode: LongLivedMode, log_dir: Path
) -> Any:
    """`start` ... `stop`: the process never outlives the block (stopped at its end if the
    caller did not; an error inside is raised after the stop). Yields the run."""
    run = start(cluster, release, name, mode, log_dir)
    try:
        yield run
    except BaseException:
        with contextlib.suppress(Exception):
            run.stop(audit_timeout=0)
        raise
    run.stop()


def check_stopped(result: LongLivedResult) -> str | None:
    """Why the result does not show a process that was stopped and left its log, or None."""
    if not result.logs.strip():
        return f"no log kept for {result.name}"
    if not any("stopped: its pod was deleted" in n or "killed" in n for n in result.notes):
        return f"the kubelet's notes do not say it ended the process: {result.notes}"
    return None


__all__ = [
    "INTERVAL_ARG",
    "LongLivedMode",
    "LongLivedResult",
    "LongLivedRun",
    "check_stopped",
    "interval_job",
    "running",
    "start",
]
