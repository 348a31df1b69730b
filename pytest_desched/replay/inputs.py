"""A replay's inputs, every one checked before a cluster exists: the snapshot (format,
restorability, this machine's capacity), the rounds, the policy (the descheduler's own
policy check), the incident log, the client limits. `Replay.check` and each use that checks
before its own clusters (the snapshot canary, snapshot fidelity, a host replay) call it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_desched.bounds import check_client_rate, check_cycles
from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.lint_metrics import sources_read
from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.log_compare import read_log
from pytest_desched.replay.rebuild.capacity import check_capacity
from pytest_desched.replay.rebuild.plan import plan_restore
from pytest_desched.replay.rebuild.usage import check_assumption

CANDIDATE_PREFIXES = ("source:", "binary:", "version:")


@dataclass
class ReplayInputs:
    """The checked inputs; a use may narrow them (a host replay: its policy, its scope)."""

    snap: Snapshot
    path: Path
    policy: Policy
    version: str | None  # None: the pinned descheduler
    candidate: str | None
    rounds: int
    incident_log: str | None
    incident_version: str | None
    client: dict[str, float | int] = field(default_factory=dict)
    # a host replay's own namespaces: a pod in any other (the host's, kwok's) is no row
    scope: frozenset[str] | None = None
    # the metrics sources the policy reads (lint_metrics.sources_read), and the user's stated
    # assumption for a snapshot without usage (rebuild/usage.py: `requests`)
    metrics_sources: tuple[str, ...] = ()
    assume_usage: str | None = None

    @property
    def serves_usage(self) -> bool:
        """The replay cluster starts metrics-server: the policy reads actual utilization, the
        snapshot recorded usage, or the user stated an assumption."""
        return bool(self.metrics_sources or self.snap.usage or self.assume_usage)


def check_inputs(
    snapshot_path: str | Path | Snapshot,
    descheduler: str | None,
    policy: Any,
    rounds: int,
    log: str | Path | None,
    max_rounds: int | None = None,
    source: str | None = None,
    client: dict[str, Any] | None = None,
    policy_checked: bool = False,
    capacity: bool = True,
    assume_usage: str | None = None,
) -> ReplayInputs:
    """Everything a replay needs, checked; ConfigError/PolicyError before any change.

    `policy_checked`: the caller checked the policy with the release that will run it (the
    snapshot canary, per track), so it is not checked again with the snapshot's version.

    `snapshot_path` may be a Snapshot already loaded (a timeline's start); `source` then
    names it in messages and results. `rounds` follows the K rule of `--cycles` (1..50,
    experiments/cycles.py) unless `max_rounds` is given (a timeline's rounds come from its
    window and --every, not from K).
    """

    if isinstance(snapshot_path, Snapshot):
        path, snap = Path(source or "<snapshot>"), snapshot_path
    else:
        path = Path(snapshot_path)
        snap = Snapshot.load(path)
    client_rate = check_client_rate(**(client or {}))
    if max_rounds is None:
        rounds = check_cycles(rounds, "rounds")
    elif not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= max_rounds:
        raise ConfigError(f"rounds={rounds!r}: an integer from 1 to {max_rounds}")
    if capacity:  # a host replay: the host's control plane holds it, not this machine
        check_capacity(snap, str(path))  # one this machine cannot hold: before the slow plan
    plan_restore(snap)  # a snapshot the restore would refuse is refused now
    text = None
    if log is not None:
        text = read_log(log, "--log")
    candidate = descheduler if descheduler and descheduler.startswith(CANDIDATE_PREFIXES) else None
    version = None if candidate else (descheduler or snap.descheduler_version)
    if policy is not None:
        pol = Policy.coerce(
            Path(policy) if isinstance(policy, str) and Path(policy).is_file() else policy
        )
    elif snap.policy:
        pol = Policy.from_yaml(snap.policy, source=f"{path}:policy (the incident's ConfigMap)")
    else:
        raise ConfigError(
            f"{path} holds no descheduler policy (no descheduler found when it was taken); "
            "pass one with --policy FILE"
        )
    if not policy_checked:
        pol.validate(version if version and not candidate else None)
    sources = tuple(sources_read(pol.to_dict()))
    check_usage(snap, path, sources, check_assumption(assume_usage))
    return ReplayInputs(
        snap,
        path,
        pol,
        version,
        candidate,
        rounds,
        text,
        snap.descheduler_version or version,
        client_rate,
        metrics_sources=sources,
        assume_usage=assume_usage,
    )


def check_usage(snap: Snapshot, path: Path, sources: tuple[str, ...], assume: str | None) -> None:
    """A policy on actual utilization needs the usage it read: refused (one line, before any
    cluster) for a snapshot that recorded none, unless the user states an assumption."""
    if not sources or snap.usage or assume:
        return
    why = str((snap.header.get("usage") or {}).get("why") or "taken before usage was recorded")
    raise ConfigError(
        f"{path}: the policy reads actual utilization ({', '.join(sources)}) but the snapshot "
        f"has no usage ({why}); take it where metrics.k8s.io is served, or state an "
        "assumption: --assume-usage requests"
    )
