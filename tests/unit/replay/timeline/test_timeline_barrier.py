"""A timeline round starts only on the state due by its moment (issue 39 case 6): it waits for
the changes already due, says which it could not get, and a replay that could not keep its
speed, or whose changes failed to apply, says so and exits non-zero."""

from __future__ import annotations

import argparse
import datetime as dt
import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.commands.replay import finish_replays
from pytest_desched.replay.capture.timeline import Change, Timeline, make_header
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.ledger import Ledger, RoundFigures
from pytest_desched.replay.run import ReplayResult
from pytest_desched.replay.timeline import apply as apply_mod
from pytest_desched.replay.timeline.run import TimelineDriver, check_timeline, kept_up, lateness

START = dt.datetime(2026, 12, 1, 14, 0, tzinfo=dt.UTC)


class Cluster:
    api_client = object()
    kubeconfig = "kc"


def driver_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apply: Any, **kw: Any
) -> TimelineDriver:
    """20 node patches due at t=1..20 s of a 60 s window, rounds every 20 s, at 100x."""
    snap = generate(seed=3, nodes=4, pods=12)
    node = snap.nodes[0]["metadata"]["name"]
    changes = [
        Change(float(t), "patch", "Node", node, None, patch={"metadata": {"labels": {"s": str(t)}}})
        for t in range(1, 21)
    ]
    path = Timeline(make_header(START, 60, "test"), snap, changes).write(tmp_path / "t.jsonl")
    tl, plan = check_timeline(path, 100, every="20s")
    monkeypatch.setattr(apply_mod, "apply_change", apply)
    return TimelineDriver(tl, plan, report=lambda m: None, **kw)


def test_a_round_waits_for_every_change_due_by_its_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a machine slower than 100x: the first change lands only after the round's moment (t=20)
    rounds_seen: list[int] = []

    def slow(api: object, c: Change) -> str:
        if c.t == 1.0:
            d.clock.wait_until(20.5)
        rounds_seen.append(len(d.rounds))  # rounds started when this change was applied
        return "applied"

    d = driver_for(tmp_path, monkeypatch, slow)
    extra = d.before_round(1, Cluster())
    assert rounds_seen == [0] * 20  # every due change was in before round 1 started
    assert (extra["changes_due"], extra["stale"]) == (20, [])
    assert extra["window_t"] >= 20.5  # it started once the last due change had landed
    done = d.finish()
    assert done["failures"] == []
    speed = done["speed_check"]
    assert not speed["kept_up"] and speed["max_change_lag_s"] >= 19
    assert speed["why"].startswith("--speed 100 is more than this machine kept up with")


def test_changes_the_barrier_could_not_get_mark_the_round_stale_and_fail_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()

    def stuck(api: object, c: Change) -> str:
        if c.t == 5.0:
            assert gate.wait(30)  # the API server does not answer for this one
        return "applied"

    d = driver_for(tmp_path, monkeypatch, stuck, barrier_s=0.3)
    extra = d.before_round(1, Cluster())
    gate.set()
    stale = extra["stale"]
    assert [m["t"] for m in stale] == [float(t) for t in range(5, 21)]
    assert all(m["late_by_s"] >= 20 - m["t"] for m in stale)
    done = d.finish()
    [failure] = done["failures"]
    assert failure.startswith(
        "round 1: ran on a stale state: 16 of 20 change(s) due by its moment t=20 s had not "
        "been applied when it started"
    )
    assert "patch Node node-" in failure
    led = Ledger("replay", rounds=[RoundFigures("descheduler-replay-1", extra=extra)])
    assert "**run on a stale state**: 16 due change(s) missing" in led.to_markdown()


def test_a_change_that_failed_to_apply_fails_the_replay_with_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(api: object, c: Change) -> str:
        return "failed: Forbidden" if c.t == 3.0 else "applied"

    d = driver_for(tmp_path, monkeypatch, forbidden)
    d.before_round(1, Cluster())
    done = d.finish()
    [failure] = done["failures"]
    assert failure.startswith("change at t=3 s (patch Node ") and failure.endswith(
        "failed to apply: Forbidden"
    )
    result = ReplayResult({}, "v0.36.0", {}, Ledger("replay"), timeline=done)
    args = argparse.Namespace(repeat=1, output="json", output_file=str(tmp_path / "out.json"))
    assert finish_replays(args, lambda i: result) == 1
    done["failures"] = []
    assert finish_replays(args, lambda i: result) == 0


def test_kept_up_reads_the_lags_and_names_a_speed_that_would_keep_them() -> None:
    fast = [{"t": 1.0, "applied_t": 1.4}]
    assert kept_up(10, fast, [{"late_s": 0.3, "ahead": 0}]) == {
        "kept_up": True,
        "max_change_lag_s": 0.4,
        "max_round_late_s": 0.3,
        "why": "",
    }
    slow = [{"t": 1.0, "applied_t": 20.5}]
    v = kept_up(100, slow, [{"late_s": 4.0, "ahead": 3}])
    assert not v["kept_up"] and v["max_change_lag_s"] == 19.5
    assert v["why"] == (
        "--speed 100 is more than this machine kept up with: changes were applied up to 19.5 "
        "window s after their moments, rounds started up to 4.0 window s late (1 of them saw 3 "
        "change(s) due after their moments); replay at --speed 5.1 or less to keep the "
        "incident's timing"
    )


def test_lateness_reads_every_outcome_and_the_changes_that_held_a_round() -> None:
    # 1,000 changes (more than the 500 outcomes the record keeps), rounds at t=10 and t=20:
    # ten land 0.5 s late, one 3.5 s late (1.5 s after round 1's moment), one at 25.5 s
    # (after round 2's moment t=20, due by it), one beyond the last round (no round needs it)
    outs = [{"t": 1.0, "started_t": 1.0, "applied_t": 1.0} for _ in range(987)]
    outs += [{"t": 2.0, "started_t": 2.0, "applied_t": 2.5} for _ in range(10)]
    outs.append({"t": 8.0, "started_t": 8.0, "applied_t": 11.5})
    outs.append({"t": 19.5, "started_t": 25.0, "applied_t": 25.5})
    outs.append({"t": 21.0, "started_t": 21.0, "applied_t": 30.0})
    v = lateness(outs, [10.0, 20.0], speed=10)
    assert v == {
        "changes": 1000,
        "late": 3,
        "late_over_s": 1.0,
        "p50_s": 0.0,
        "p99_s": 0.5,
        "max_s": 9.0,
        "after_round_moment": 2,
        "after_round_moment_max_s": 5.5,
        "apply_wall_ms": {"p50": 0.0, "p99": 50.0, "max": 900.0},  # 9 window s at 10x
    }
    assert lateness([], [10.0], speed=10)["max_s"] == 0.0


def test_finish_reports_the_lateness_of_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = driver_for(tmp_path, monkeypatch, lambda api, c: "applied")
    d.before_round(1, Cluster())
    done = d.finish()
    assert done["lateness"]["changes"] == 20
    # the same lag speed_check reads (at 100x a wall ms is 0.1 window s: no fixed figure)
    assert done["lateness"]["max_s"] == done["speed_check"]["max_change_lag_s"]


def lanes_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apply: Any, picks: list[tuple[float, str]]
) -> TimelineDriver:
    """Patches at (t, node index or 'ns') over a generated cluster's 8 nodes, at 100x."""
    snap = generate(seed=3, nodes=8, pods=12)
    names = [n["metadata"]["name"] for n in snap.nodes]
    label = {"metadata": {"labels": {"s": "1"}}}
    changes = [
        Change(t, "patch", "Namespace", "default", None, patch=label)
        if who == "ns"
        else Change(t, "patch", "Node", names[int(who)], None, patch=label)
        for t, who in picks
    ]
    path = Timeline(make_header(START, 60, "test"), snap, changes).write(tmp_path / "t.jsonl")
    tl, plan = check_timeline(path, 100, every="20s")
    monkeypatch.setattr(apply_mod, "apply_change", apply)
    return TimelineDriver(tl, plan, report=lambda m: None)


@pytest.mark.parametrize("lanes", [4, 8])
def test_changes_to_different_objects_apply_at_once_and_land_in_timeline_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lanes: int
) -> None:
    # `lanes` nodes' changes due within a few window hundredths: each apply answers only once
    # all are in flight (one at a time, the first would wait for the others forever: a 5 s
    # timeout). 8 since issue 42: with a round's lists and the descheduler on the same two
    # cores one apply took 75-500 ms, and four lanes queued changes a wall second behind.
    together = threading.Barrier(lanes, timeout=5)

    def apply(api: object, c: Change) -> str:
        together.wait()
        return "applied"

    picks = [(1.0 + i / 100, str(i)) for i in range(lanes)]
    d = lanes_driver(tmp_path, monkeypatch, apply, picks)
    d.before_round(1, Cluster())
    done = d.finish()
    assert [o["outcome"] for o in done["outcomes"]] == ["applied"] * lanes
    assert [o["t"] for o in done["outcomes"]] == [t for t, _ in picks]


def test_one_objects_changes_apply_in_order_and_a_namespace_change_runs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = threading.Lock()
    active: list[str] = []
    log: list[tuple[str, float, list[str]]] = []  # (object, t, in flight with it)

    def apply(api: object, c: Change) -> str:
        with lock:
            log.append((c.key, c.t, list(active)))
            active.append(c.key)
        threading.Event().wait(0.05)  # an API round trip
        with lock:
            active.remove(c.key)
        return "applied"

    picks = [(1.0, "0"), (1.0, "0"), (1.0, "1"), (1.0, "0"), (1.0, "ns"), (1.0, "2"), (1.0, "0")]
    d = lanes_driver(tmp_path, monkeypatch, apply, picks)
    d.before_round(1, Cluster())
    d.finish()
    node0 = [x for x in log if x[0].endswith(d.tl.changes[0].name)]
    assert len(node0) == 4 and all(d.tl.changes[0].key not in x[2] for x in node0)
    ns = next(x for x in log if x[0] == "Namespace default")
    assert ns[2] == []  # nothing before it still in flight
    after = log[log.index(ns) + 1 :]
    assert after and all("Namespace default" not in x[2] for x in after)
    assert any(x[2] for x in log)  # different nodes did overlap


def test_a_change_waiting_for_its_objects_earlier_one_holds_no_other_object_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # node 0's first change is slow; its second waits for it, and node 1's change (due after
    # both) goes out meanwhile: before, the dispatcher waited for node 0's first change itself,
    # so node 1's waited too (here for ever: node 0's first answers only once node 1's landed)
    other_landed = threading.Event()
    order: list[tuple[str, float]] = []

    def apply(api: object, c: Change) -> str:
        if c.t == 1.0:
            assert other_landed.wait(5), "node 1's change was held behind node 0's"
        order.append((c.name, c.t))
        if c.t == 1.02:
            other_landed.set()
        return "applied"

    d = lanes_driver(tmp_path, monkeypatch, apply, [(1.0, "0"), (1.01, "0"), (1.02, "1")])
    d.before_round(1, Cluster())
    done = d.finish()
    n0, n1 = d.tl.changes[0].name, d.tl.changes[2].name
    assert order == [(n1, 1.02), (n0, 1.0), (n0, 1.01)]  # node 0's two in their order
    assert [o["t"] for o in done["outcomes"]] == [1.0, 1.01, 1.02]  # the timeline's order
    assert [o["outcome"] for o in done["outcomes"]] == ["applied"] * 3


def test_a_change_is_never_recorded_as_started_before_its_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock read just after the moment (0.3814 s for t=0.381 s): 2 decimals recorded it
    as started at 0.38, before its moment (a kind run's failure); milliseconds never do."""
    d = driver_for(tmp_path, monkeypatch, lambda api, c: "applied")
    reads = iter([0.3814, 0.7304])
    monkeypatch.setattr(d.clock, "window_t", lambda *a: next(reads))
    c = Change(0.381, "create", "PodDisruptionBudget", "pdb", "ns", object={})
    d._apply_one(lambda api, ch: "applied", object(), 0, c)
    (o,) = d.outcomes
    assert o["started_t"] >= o["t"] == 0.381 and o["applied_t"] == 0.73, o
