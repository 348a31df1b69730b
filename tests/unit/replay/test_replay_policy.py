"""`replay()` runs the policy its session announces: the configuration's, else the snapshot's.

Regression (issue 51): the session announces the configuration's policy (`--policy`, or
`--values` with deschedulerPolicy) before the cluster; the replay applied the snapshot's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_desched.config import build_config
from pytest_desched.descheduler.policy import Policy
from pytest_desched.replay import run as engine
from pytest_desched.replay.gen.incidents import label_move
from tests.unit.replay.stand_in_session import stand_in_sessions

DEDUP_ONLY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "dedup",
            "pluginConfig": [{"name": "DefaultEvictor"}, {"name": "RemoveDuplicates"}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}},
        }
    ],
}


class _Stop(Exception):
    """Raised where the rounds would start: what they were given is all the test needs."""


def _applied(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    announced: Policy | None,
    given: Any = None,
    snapshot: Path | None = None,
) -> Policy:
    """The policy `replay()` hands the rounds, its session (on --values) announcing
    `announced`."""

    seen: list[Policy] = []

    def rounds(self: Any, session: Any, inp: Any) -> Any:
        seen.append(inp.policy)
        raise _Stop

    sessions = stand_in_sessions(monkeypatch, announced)
    monkeypatch.setattr(engine.Replay, "run_on", rounds)
    snap = snapshot or label_move().snapshot.write(tmp_path / "snap.yaml")
    (tmp_path / "prod-values.yaml").write_text("deschedulerPolicy: {}\n")
    config = build_config(
        {
            "--desched-provider": "embedded",
            "--desched-artifacts": str(tmp_path),
            "--desched-values": [str(tmp_path / "prod-values.yaml")],
        }
    )
    with pytest.raises(_Stop):
        engine.replay(snap, policy=given, config=config, report=lambda _line: None)
    if given is None:  # rendered and linted once: the session is handed those
        assert [kw.get("inputs") for kw in sessions.made] == [None, sessions.checked], sessions.made
    return seen[0]


def test_the_policy_the_session_announces_is_the_one_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dedup = Policy.from_dict(DEDUP_ONLY, source="prod-values.yaml (deschedulerPolicy)")
    applied = _applied(tmp_path, monkeypatch, dedup)
    assert applied.digest() == dedup.digest()
    assert "RemovePodsViolatingNodeAffinity" not in applied.to_yaml()


def test_no_policy_announced_runs_the_snapshot_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied = _applied(tmp_path, monkeypatch, None)
    assert "the incident's ConfigMap" in applied.source
    assert "RemovePodsViolatingNodeAffinity" in applied.to_yaml()


def test_a_policy_given_to_replay_is_the_one_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library caller's explicit policy stands (the command passes the configuration's)."""
    applied = _applied(tmp_path, monkeypatch, None, given=DEDUP_ONLY)
    assert applied.digest() == Policy.from_dict(DEDUP_ONLY).digest()


def test_a_snapshot_without_a_policy_runs_the_values_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No descheduler when the snapshot was taken: --values' deschedulerPolicy runs (it was
    refused with "holds no descheduler policy" though the values held one)."""
    from pytest_desched.replay.capture.snapshot import Snapshot

    snap = label_move().snapshot
    snap.policy = None
    bare = snap.write(tmp_path / "bare.yaml")
    assert not Snapshot.load(bare).policy
    dedup = Policy.from_dict(DEDUP_ONLY, source="prod-values.yaml (deschedulerPolicy)")
    applied = _applied(tmp_path, monkeypatch, dedup, snapshot=bare)
    assert applied.digest() == dedup.digest()


def test_a_snapshot_without_a_policy_and_values_without_one_are_refused_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_desched.errors import ConfigError

    snap = label_move().snapshot
    snap.policy = None
    bare = snap.write(tmp_path / "bare.yaml")
    with pytest.raises(ConfigError, match="holds no descheduler policy"):
        _applied(tmp_path, monkeypatch, None, snapshot=bare)
