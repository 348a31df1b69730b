"""`Replay`: options in one frozen dataclass, hooks as methods; `replay()` is its function form
with the signature users call, and each use (timeline, host) overrides what it changes."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from pytest_desched.replay import Replay, ReplayOptions
from pytest_desched.replay import replay as public_replay
from pytest_desched.replay.host.replay import HostReplay
from pytest_desched.replay.run import ReplayResult, replay
from pytest_desched.replay.timeline.run import TimelineReplay

REPLAY_PARAMS = [
    "snapshot_path", "descheduler", "policy", "rounds", "log", "config", "report", "ages",
    "method", "round_timeout", "restore_timeout", "before_round", "max_rounds", "source",
    "after_round", "finish", "dry_run", "client", "moment", "assume_usage",
]  # fmt: skip


def test_replay_keeps_its_public_signature() -> None:
    assert public_replay is replay
    assert list(inspect.signature(replay).parameters) == REPLAY_PARAMS


def test_the_function_form_hands_options_and_hooks_to_a_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    got: dict[str, Any] = {}

    def run(self: Replay) -> ReplayResult:
        got["replay"] = self
        return "done"  # type: ignore[return-value]

    monkeypatch.setattr(Replay, "run", run)
    calls: list[Any] = []
    out = replay(
        "snap.yaml",
        "v0.36.0",
        rounds=3,
        dry_run=True,
        client={"qps": 5},
        before_round=lambda i, c: calls.append(("before", i, c)) or {"b": i},
        after_round=lambda i, r, f: {"a": i},
        finish=lambda: {"window": 1},
        moment=lambda wall: wall / 2,
    )
    r = got["replay"]
    assert out == "done" and r.snapshot == "snap.yaml"
    assert r.options == ReplayOptions(
        descheduler="v0.36.0", rounds=3, dry_run=True, client={"qps": 5}
    )
    assert r.before_round(2, "cluster") == {"b": 2} and calls == [("before", 2, "cluster")]
    assert r.after_round(1, None, {}) == {"a": 1} and r.finish() == {"window": 1}
    assert r.windowed and r.moment(10.0) == 5.0


def test_a_plain_replay_adds_nothing_and_has_no_window() -> None:
    r = Replay("s")
    assert (r.before_round(1, None), r.after_round(1, None, {}), r.finish()) == ({}, {}, {})
    assert not r.windowed and r.moment(1.0) is None


def test_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReplayOptions().rounds = 2  # type: ignore[misc]


def test_a_host_replay_restores_without_a_runner_node(monkeypatch: pytest.MonkeyPatch) -> None:
    got: dict[str, Any] = {}

    def fake_restore(cluster: Any, snap: Any, **kw: Any) -> str:
        got.update(kw, cluster=cluster)
        return "restored"

    monkeypatch.setattr("pytest_desched.replay.rebuild.restore.restore", fake_restore)
    out = HostReplay("s", ReplayOptions(method="api")).restore("c", "snap", ages="shift")
    assert out == "restored" and got == {"cluster": "c", "ages": "shift", "runner": False}
    got.clear()
    assert Replay("s").restore("c", "snap", ages="shift") == "restored"
    assert got == {"cluster": "c", "ages": "shift"}  # the embedded replay keeps its runner node


def test_a_timeline_replay_is_windowed_and_its_hooks_are_the_drivers() -> None:
    class Driver:
        def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
            return {"window_t": i * 10}

        def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
            return {"window_t_end": i}

        def finish(self) -> dict[str, Any]:
            return {"changes": 4}

        def moment(self, wall: float) -> float | None:
            return wall - 100

    r = TimelineReplay(Driver(), "tl.jsonl")  # type: ignore[arg-type]
    assert r.windowed
    assert r.before_round(2, None) == {"window_t": 20} and r.after_round(3, None, {}) == {
        "window_t_end": 3
    }
    assert r.finish() == {"changes": 4} and r.moment(130.0) == 30.0
