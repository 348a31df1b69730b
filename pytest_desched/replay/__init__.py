"""Incident replay: snapshot a cluster, restore it on a fresh embedded cluster, explain every
pod's fate at any descheduler version.

    from pytest_desched.replay import take_snapshot, replay, ledger_from_log

    snap = take_snapshot("~/.kube/prod.yaml", "prod", redact=True)   # read-only, no Secrets
    snap.write("snap.yaml")
    result = replay("snap.yaml", descheduler="v0.36.0", rounds=2, log="incident.log")
    print(result.markdown())                 # per pod: fate and deciding layer, per round

One job per module: `format` (the file), `trim` (what an object keeps), `snapshot` (taking
one), `redact` (consistent renaming), `etcd` (bulk writes into the replay cluster), `restore`
(the driver) with `plan` (what to write, pure), `writes` (through the API), `etcd_restore`
and `api_restore` (the two methods), `ledger` (fates, from any log, record or replay;
judged through `outcome/identity.py`), `rows` (every pod a round saw, with its origin),
`log_compare` (round 1 against `--log`), `genbase` and `generator` (realistic clusters), `incidents` (the two incidents), `engine`
(`replay()`), `cli` (`desched snapshot`, `record`, `replay`). In time: `timeline` (the file),
`record` (watching a window: `replay.record.record`) and `audit_changes` (a window from an audit log), `clock` (window
time), `apply` (one change onto the replay), `timeline_run` (`replay_timeline()`), `repeat`
(N replays compared).
"""

from __future__ import annotations

from typing import Any

_PUBLIC = {
    "Snapshot": "pytest_desched.replay.format",
    "take_snapshot": "pytest_desched.replay.snapshot",
    "SnapshotError": "pytest_desched.replay.snapshot",
    "redact_snapshot": "pytest_desched.replay.redact",
    "restore": "pytest_desched.replay.restore",
    "plan_restore": "pytest_desched.replay.plan",
    "RestoreResult": "pytest_desched.replay.restore",
    "RestoreError": "pytest_desched.replay.writes",
    "Ledger": "pytest_desched.replay.ledger",
    "ledger_from_log": "pytest_desched.replay.ledger",
    "ledger_from_record": "pytest_desched.replay.ledger",
    "generate": "pytest_desched.replay.generator",
    "Shape": "pytest_desched.replay.generator",
    "label_move": "pytest_desched.replay.incidents",
    "pdb_drain": "pytest_desched.replay.incidents",
    "replay": "pytest_desched.replay.engine",
    "ReplayResult": "pytest_desched.replay.engine",
    "Timeline": "pytest_desched.replay.timeline",
    "replay_timeline": "pytest_desched.replay.timeline_run",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """The public API, imported on first use."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'pytest_desched.replay' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_PUBLIC[name]), name)
