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
from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.log_compare import read_log
from pytest_desched.replay.rebuild.capacity import check_capacity
from pytest_desched.replay.rebuild.plan import plan_restore

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
    )
