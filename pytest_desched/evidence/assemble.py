"""One round's record, built by one pure function: round -> lab observation -> record.

The runner reads the cluster once after a round (`LabObservation`: the final pods, the PDB,
events, the live policy with the lint `apply_policy` made of it) and knows the run's fixed
facts (`RunFacts`) and how the round ended (`RoundOutcome`). `build_round_record` turns those
three into the `RoundRecord` summaries, the report and the canary read, with no I/O and no
clock: the same inputs give the same record, the inputs are left as they were, and nothing
changes the record after it is built.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.metrics import round_metrics
from pytest_desched.evidence.record import RoundRecord
from pytest_desched.evidence.timeline import pdb_series, round_timeline

if TYPE_CHECKING:
    from pytest_desched.descheduler.rounds import Round
    from pytest_desched.lab.snapshot import Snapshot


@dataclass(frozen=True)
class LabObservation:
    """What the lab showed after the round, read once by the runner (Runner.observe)."""

    pending_pods: tuple[str, ...]  # the final snapshot's Pending pods
    distribution_after: Mapping[str, int]  # node -> live pods, final snapshot
    pdb_after: Mapping[str, Any] | None  # the PDB's status after the round
    pdb_min_disruptions_allowed_seen: int | None  # lowest disruptionsAllowed the watch saw
    events: tuple[Mapping[str, Any], ...]  # the lab's events
    policy_applied: str  # the live ConfigMap's policy YAML
    policy_digest: str  # its canonical digest (== Policy.digest())
    policy_lint: tuple[str, ...]  # the lint apply_policy made of it (or of the chart default)
    effective_policy: Mapping[str, Any]  # after that descheduler's own defaults
    # The round's watches: pod transitions (the timeline's replacements) and PDB statuses.
    pod_events: tuple[Mapping[str, Any], ...]
    pdb_statuses: tuple[tuple[float, int, int, int], ...]  # (t, current, desired, allowed)
    # wall clock - monotonic clock when read: puts the audit's and the round pods' wall-clock
    # stamps on the experiment's monotonic axis.
    clock_offset_s: float
    # The Helm that wrote the release and who owns its fields (Release.helm_evidence).
    helm: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RunFacts:
    """What every round of one experiment run shares: who ran, what ran, with which inputs."""

    label: str  # experiment[variant]
    provider: str
    namespace: str  # the lab's first namespace
    namespaces: tuple[str, ...]  # every namespace the lab owns
    versions: Mapping[str, str]
    chart: Mapping[str, Any]  # ChartRef.evidence()
    policy_overrides: tuple[Mapping[str, Any], ...]  # the lab's deviations: path/old/new/why
    caps: Mapping[str, int | None]  # Policy.limits
    preflight: Mapping[str, Any] | None
    inputs: Mapping[str, Any] | None  # UserInputs.evidence()
    run_label: str  # "label=value" on every Job of this run (emergency stop: delete -l)
    t0: float  # the experiment's start (time.monotonic()): every *_s counts from it


@dataclass(frozen=True)
class RoundOutcome:
    """How the round ended, as the experiment closed it: the settled Job and the assessment."""

    round: Round  # settled (Round.settle): its conditions are the Job controller's
    before: Snapshot  # the lab just before the Job
    audit: Mapping[str, Any]  # AuditView.to_dict() for the round
    replacement: str | None = None  # set by the assess step: ready | missing | pending
    # The assess step's own record fields (cycle, fidelity, notes, events_delivered, ...).
    extra: Mapping[str, Any] = field(default_factory=dict)
    known_bugs: Mapping[str, str] = field(default_factory=dict)  # bug id -> evidence, so far
    log_path: str | None = None  # the redacted copy of the round's log


def _dict(m: Mapping[str, Any] | None) -> Any:
    """A deep copy as a dict (None stays None): the record shares nothing with its inputs."""
    return None if m is None else {k: copy.deepcopy(v) for k, v in m.items()}


def build_round_record(outcome: RoundOutcome, obs: LabObservation, run: RunFacts) -> RoundRecord:
    """The round's record from its outcome, the lab's observation and the run's facts; pure."""
    rnd, before = outcome.round, outcome.before
    return RoundRecord.from_round(
        run.label,
        rnd.name,
        run.provider,
        rnd.result,
        namespace=run.namespace,
        namespaces=run.namespaces,
        replacement=outcome.replacement,
        versions=_dict(run.versions),
        chart=_dict(run.chart),
        policy_digest=obs.policy_digest,
        policy_applied=obs.policy_applied,
        policy_lint=list(obs.policy_lint),
        effective_policy=_dict(obs.effective_policy),
        timeline=round_timeline(rnd, obs.pod_events, before.uids, run.t0, obs.clock_offset_s),
        pdb_series=pdb_series(obs.pdb_statuses, run.t0),
        policy_overrides=[_dict(o) for o in run.policy_overrides],
        job={
            "name": rnd.name,
            "uid": rnd.job_uid,
            "namespace": rnd.namespace,
            "succeeded": rnd.succeeded,
            "exit_code": rnd.exit_code,
            "service_account": rnd.service_account,
            "executor": rnd.executor,
            "run_label": run.run_label,
            # stopped at its timeout (rounds.stop_round): its Job was deleted, no cycle ran
            **({"timed_out": rnd.timed_out} if rnd.timed_out else {}),
        },
        started_s=round(rnd.started - run.t0, 3),
        ended_s=round(rnd.ended - run.t0, 3),
        caps=_dict(run.caps),
        pdb_before=_dict(before.pdb),
        pdb_after=_dict(obs.pdb_after),
        pdb_min_disruptions_allowed_seen=obs.pdb_min_disruptions_allowed_seen,
        events=[_dict(e) for e in obs.events],
        pending_pods=list(obs.pending_pods),
        distribution_before=before.by_node(),
        distribution_after=_dict(obs.distribution_after),
        metrics=round_metrics(rnd),
        audit=_dict(outcome.audit),
        known_bugs=_dict(outcome.known_bugs),
        log_path=outcome.log_path,
        preflight=_dict(run.preflight),
        inputs=_dict(run.inputs),
        helm=_dict(obs.helm),
        **_dict(outcome.extra),
    )
