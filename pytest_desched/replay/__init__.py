"""Incident replay: snapshot a cluster, restore it on a fresh embedded cluster, explain every
pod's fate at any descheduler version.

    from pytest_desched.replay import take_snapshot, replay, ledger_from_log

    snap = take_snapshot("~/.kube/prod.yaml", "prod", redact=True)   # read-only, no Secrets
    snap.write("snap.yaml")
    result = replay("snap.yaml", descheduler="v0.36.0", rounds=2, log="incident.log")
    print(result.markdown())                 # per pod: fate and deciding layer, per round

By stage, one folder each: `capture/` (the snapshot file `format` and its `schema`, the
window file `timeline`; `snapshot`, `record` and `audit_changes` take them, `trim` and `redact`
shape them), `rebuild/` (`restore`, the driver, with `plan`, `capacity`, `writes`, `etcd`,
`etcd_restore`, `api_restore`, `settled`), `timeline/` (`run`: `replay_timeline()`, `clock`,
`apply`), `gen/` (`genbase`, `generator`, `incidents`, `timeline_gen`) and `host/` (a replay on
an existing cluster). Beside them: `run` (the `Replay` class, whose methods are the hooks a
timeline, a host replay, the snapshot canary and snapshot fidelity override, and `replay()`),
`inputs` (checked before any cluster), `rows`, `aftermath` and `log_compare` (the ledger a
round makes), `ledger` (fates, from any log, record or replay), `repeat` (N replays
compared), `kubeapi` and `objects` (raw JSON requests and the one object model at the API
boundary), `cli` (`desched snapshot`, `record`, `replay`).
"""

from __future__ import annotations

from typing import Any

_PUBLIC = {
    "Snapshot": "pytest_desched.replay.capture.format",
    "take_snapshot": "pytest_desched.replay.capture.snapshot",
    "SnapshotError": "pytest_desched.replay.capture.snapshot",
    "redact_snapshot": "pytest_desched.replay.capture.redact",
    "restore": "pytest_desched.replay.rebuild.restore",
    "plan_restore": "pytest_desched.replay.rebuild.plan",
    "RestoreResult": "pytest_desched.replay.rebuild.restore",
    "RestoreError": "pytest_desched.replay.rebuild.writes",
    "Ledger": "pytest_desched.replay.ledger",
    "ledger_from_log": "pytest_desched.replay.ledger",
    "ledger_from_record": "pytest_desched.replay.ledger",
    "generate": "pytest_desched.replay.gen.generator",
    "Shape": "pytest_desched.replay.gen.generator",
    "label_move": "pytest_desched.replay.gen.incidents",
    "pdb_drain": "pytest_desched.replay.gen.incidents",
    "replay": "pytest_desched.replay.run",
    "Replay": "pytest_desched.replay.run",
    "ReplayOptions": "pytest_desched.replay.run",
    "ReplayResult": "pytest_desched.replay.run",
    "Timeline": "pytest_desched.replay.capture.timeline",
    "replay_timeline": "pytest_desched.replay.timeline.run",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """The public API, imported on first use."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'pytest_desched.replay' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_PUBLIC[name]), name)
