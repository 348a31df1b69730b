"""The mirror probe's one-shot dry runs as Jobs, where a kubelet runs round pods from images.

On kind (or an existing cluster) there is no local binary beside the cluster to run; the
faithful one-shot dry run there is what the round itself was: a Job created from the release's
suspended CronJob (the same image, the same mounted policy ConfigMap, the same args), dry run
forced on (rounds.run_round(dry_run=True) refuses a suspended-off CronJob and a log that does
not say dry run). Each run's pod log is read, then the Job is deleted with its pods before the
next one starts, so the probe leaves nothing behind and no two probe pods run at once.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_desched.descheduler.decisions import RoundResult
from pytest_desched.descheduler.rounds import delete_round_job, run_round, runbook_job_name
from pytest_desched.fidelity.mirror_probe import OneShot

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.providers.base import Cluster

# What ran, as the probe's `how` says it.
JOBS = "of the same image and mounted policy (Jobs from the suspended CronJob)"
# A run is a pod to schedule and start before the cycle's few seconds: more than a process.
JOB_RUN_TIMEOUT = 90.0
JOB_BUDGET = 240.0  # s: as mirror_probe.BUDGET, for runs that each start a pod first
NAME_ROOM = 63 - len("-probe99") - len("-xxxxx-xxxx")  # a Job name (and its pods' label) <= 63


def probe_job_name(round_name: str, n: int) -> str:
    """The n-th probe Job of a round: its name and `-probeN`, within a Job name's 63
    characters, room left for runbook_job_name's suffixes on a collision."""
    return f"{round_name[:NAME_ROOM].rstrip('-')}-probe{n}"


def job_runs(cluster: Cluster, release: Release, round_name: str, log_dir: Path) -> OneShot:
    """One-shot dry runs of the release's CronJob as Jobs named after `round_name`; each Job
    (and its pods) deleted once read, whatever happened. A Job that did not complete in its
    time names nothing (None; the probe's deadline bounds the loop). A pod that exited
    non-zero (RoundFailed: the same image and policy just ran a round, so rerunning cannot
    help) or a log that does not say dry run raises as for a round, naming the Job."""
    counter = itertools.count(1)

    def run_once(timeout: float) -> RoundResult | None:
        ns = release.namespace
        name = runbook_job_name(cluster, ns, probe_job_name(round_name, next(counter)))
        try:
            rnd = run_round(cluster, release, name, log_dir, timeout, dry_run=True)
        finally:
            delete_round_job(cluster, name, ns)
        return rnd.result if rnd.timed_out is None and rnd.succeeded else None

    return run_once
