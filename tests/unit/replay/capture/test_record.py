"""Incident windows (issue 29): the clock, recording state, what is applied, the audit log,
redaction, repeats, and the refusals before anything starts (exit 2 with the numbers)."""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.commands.replay import finish_replays
from pytest_desched.errors import ConfigError
from pytest_desched.evidence.compare import NOT_COMPARABLE
from pytest_desched.replay.capture.audit_changes import (
    changes_from_audit,
    fold,
    merge_patch,
    record_from_audit,
)
from pytest_desched.replay.capture.format import controller_of, key
from pytest_desched.replay.capture.record import State, check_window, redact_timeline
from pytest_desched.replay.capture.timeline import Change, Timeline, make_header
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.ledger import (
    NOT_PICKED,
    Ledger,
    PodFate,
    PodRow,
    RoundFigures,
    compare,
    replacement_origin,
)
from pytest_desched.replay.repeat import markdown, repeat
from pytest_desched.replay.timeline.apply import label_patch, observed_only, update_patch
from pytest_desched.replay.timeline.clock import Stopped, WindowClock
from pytest_desched.replay.timeline.run import check_timeline, eviction_walls, round_times

START = dt.datetime(2026, 12, 1, 14, 0, tzinfo=dt.UTC)


class FakeTime:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _tl(changes: list[Change], window: float = 600) -> Timeline:
    return Timeline(make_header(START, window, "test"), generate(seed=3, nodes=4, pods=12), changes)


def _moved(tl: Timeline, labels: dict[str, str]) -> Change:
    node = copy.deepcopy(tl.snapshot.nodes[0])
    node["metadata"]["labels"] = labels
    return Change(30.0, "update", "Node", node["metadata"]["name"], None, node)


# -- the clock -------------------------------------------------------------------------------
def test_clock_runs_at_speed_and_stands_still_while_paused() -> None:
    now = FakeTime()
    c = WindowClock(10, now=now)
    assert c.window_t() == 0.0
    c.start()
    now.t += 2
    assert c.window_t() == pytest.approx(20.0)
    assert c.pause() == pytest.approx(20.0)
    now.t += 100  # paused: window time stays
    assert c.window_t() == pytest.approx(20.0)
    c.resume()
    now.t += 1
    assert c.window_t() == pytest.approx(30.0)
    # a wall timestamp taken during the pause maps to the pause's moment, before it by speed
    assert c.window_t(1000 + 50) == pytest.approx(20.0)
    assert c.window_t(1001) == pytest.approx(10.0)
    assert c.paused_s() == pytest.approx(100.0)
    assert c.wall_of(30.0) == pytest.approx(1103.0)


def test_a_scheduled_pause_stops_the_clock_at_its_moment_however_late_anyone_looks() -> None:
    """--pause-at 30: a thread that wakes late (here 15 window seconds late) still finds the
    clock stopped at 30, so a change due at 40 cannot slip in before the pause."""
    now = FakeTime()
    c = WindowClock(10, now=now, pause_at=30.0)
    c.start()
    now.t += 4.5  # 45 window seconds of wall time passed unobserved
    assert c.window_t() == pytest.approx(30.0)
    assert c.paused
    assert c.pause() == pytest.approx(30.0)  # the pausing thread gets the scheduled moment
    assert c.window_t(now.t - 4.5 + 2.0) == pytest.approx(20.0)  # before the pause: as ever
    now.t += 100
    c.resume()
    now.t += 1
    assert c.window_t() == pytest.approx(40.0)
    assert c.paused_s() == pytest.approx(101.5)  # from the moment t=30 was reached


def test_clock_wait_returns_when_reached_and_raises_when_stopped() -> None:
    c = WindowClock(1000)
    c.start()
    assert c.wait_until(5.0) >= 5.0  # 5 ms of wall time
    c.stop()
    with pytest.raises(Stopped):
        c.wait_until(1e9)


# -- the replay plan and its refusals --------------------------------------------------------
def test_rounds_follow_the_cadence_within_the_window() -> None:
    assert round_times(600, 120) == [120, 240, 360, 480, 600]
    assert round_times(10, 120) == [10]


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        ({"speed": 0}, "must be > 0"),
        ({"speed": -3}, "must be > 0"),
        ({"speed": "fast"}, "not a number"),
        ({"speed": 10, "pause_at": "700s"}, "after the window's end"),
        ({"speed": 10, "every": "0s"}, "positive duration"),
        ({"speed": 10, "every": "0.1s"}, "at most 1000"),
        ({"speed": 10, "repeat": 0}, "--repeat 0"),
    ],
)
def test_timeline_replay_inputs_are_refused_with_the_numbers(
    tmp_path: Path, kwargs: dict, msg: str
) -> None:
    path = _tl([]).write(tmp_path / "t.jsonl")
    with pytest.raises(ConfigError, match=msg):
        check_timeline(path, **kwargs)


def test_timeline_plan_reads_the_incidents_cadence(tmp_path: Path) -> None:
    tl = _tl([_moved(_tl([]), {"pool": "b"})])
    tl.snapshot.header["descheduler"] = {"kind": "CronJob", "namespace": "kube-system", "name": "d"}
    tl.snapshot.items("cronJobs").append(
        {
            "kind": "CronJob",
            "metadata": {"name": "d", "namespace": "kube-system"},
            "spec": {"schedule": "*/5 * * * *"},
        }
    )
    _, plan = check_timeline(tl.write(tmp_path / "t.jsonl"), 10, "90s")
    assert (plan["every_s"], plan["rounds_at"], plan["pause_at"]) == (300, [300, 600], 90)
    assert plan["wall_s_estimate"] == 60


def test_a_window_longer_than_a_day_or_before_its_start_is_refused() -> None:
    now = START
    with pytest.raises(ConfigError, match=r"90000 s \(25.0 h\)"):
        check_window("25h", None, now, audit_log="a.log")
    with pytest.raises(ConfigError, match="a watch sees only what happens from now on"):
        check_window("30m", None, now)
    with pytest.raises(ConfigError, match="give the window"):
        check_window(None, None, now)
    with pytest.raises(ConfigError, match="the end must come after the start"):
        check_window("2026-12-01T14:00:00Z", "2026-12-01T13:00:00Z", now, audit_log="a.log")
    assert check_window(None, "30m", now) == (now, now + dt.timedelta(minutes=30))


# -- recording state ---------------------------------------------------------------------------
def _raw_node(name: str, labels: dict[str, str], heartbeat: str) -> dict:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "resourceVersion": heartbeat},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]
        },
    }


def test_state_keeps_real_changes_and_drops_heartbeats() -> None:
    s = State(None, set())
    assert s.event("nodes", "ADDED", _raw_node("n1", {"a": "1"}, "1"), 0.5).verb == "create"
    assert s.event("nodes", "MODIFIED", _raw_node("n1", {"a": "1"}, "2"), 1.0) is None
    moved = s.event("nodes", "MODIFIED", _raw_node("n1", {"b": "1"}, "3"), 2.0)
    assert (moved.verb, moved.object["metadata"]["labels"]) == ("update", {"b": "1"})
    assert "resourceVersion" not in moved.object["metadata"]
    gone = s.event("nodes", "DELETED", _raw_node("n1", {"b": "1"}, "4"), 3.0)
    assert (gone.verb, gone.t) == ("delete", 3.0)
    assert s.event("nodes", "DELETED", _raw_node("n1", {}, "5"), 4.0) is None  # unknown
    assert s.dropped_same == 1
    # a namespace scope keeps cluster-scoped kinds and only the scope's namespaced ones
    scoped = State(["lab"], set())
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "other"}, "spec": {}}
    assert scoped.event("pods", "ADDED", pod, 1.0) is None


def test_relisting_after_an_expired_watch_records_the_difference() -> None:
    s = State(None, set())
    s.event("nodes", "ADDED", _raw_node("n1", {}, "1"), 0.0)
    s.event("nodes", "ADDED", _raw_node("n2", {}, "1"), 0.0)
    s.relisted("nodes", [_raw_node("n1", {"x": "y"}, "9")], 5.0)
    assert [(c.verb, c.name) for c in s.changes[2:]] == [("update", "n1"), ("delete", "n2")]


# -- what is applied ------------------------------------------------------------------------
def test_a_node_update_patches_exactly_the_recorded_labels_and_taints() -> None:
    live = {"metadata": {"labels": {"a": "1", "pool": "x"}}, "spec": {"taints": None}}
    want = {"metadata": {"labels": {"a": "1", "zone": "b"}}, "spec": {"unschedulable": True}}
    p = update_patch(Change(1, "update", "Node", "n", None, want), live)
    assert p == {
        "metadata": {"labels": {"zone": "b", "pool": None}},
        "spec": {"unschedulable": True},
    }
    assert label_patch({"a": "1"}, {"a": "1"}) == {}


def test_controller_owned_pods_and_evictions_are_observed_not_applied() -> None:
    snap = generate(seed=3, nodes=4, pods=12)
    owned = next(p for p in snap.pods if controller_of(p))
    c = Change(1, "delete", "Pod", owned["metadata"]["name"], owned["metadata"]["namespace"], owned)
    assert "makes and deletes in the replay too" in observed_only(c)
    assert "descheduler decides" in observed_only(Change(1, "evict", "Pod", "p", "ns"))
    bare = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {}}
    assert observed_only(Change(1, "delete", "Pod", "b", "ns", bare)) is None
    assert observed_only(_moved(_tl([]), {})) is None


def test_eviction_moments_come_from_the_audit_log_then_the_round_log() -> None:
    class Req:
        is_eviction, code, key = True, 201, "ns/a"
        stage_ts = dt.datetime(2026, 12, 1, 14, 0, 5, tzinfo=dt.UTC)

    class Rnd:
        audit_requests = [Req()]
        logs = "\n".join(
            json.dumps({"ts": ts, "msg": "Evicted pod", "pod": {"name": n, "namespace": "ns"}})
            for n, ts in (("a", 1.0e12), ("b", 1764597606000.0))
        )

    walls = eviction_walls(Rnd())
    assert walls == {"ns/a": Req.stage_ts.timestamp(), "ns/b": 1764597606.0}


# -- the audit log ------------------------------------------------------------------------------
def _audit(verb: str, resource: str, name: str, when: str, **kw: object) -> str:
    ev = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "stage": "ResponseComplete",
        "verb": verb,
        "objectRef": {"resource": resource, "name": name, **kw.pop("ref", {})},
        "responseStatus": {"code": kw.pop("code", 200)},
        "stageTimestamp": when,
        **kw,
    }
    return json.dumps(ev)


def test_audit_lines_become_changes_by_their_level(tmp_path: Path) -> None:
    snap = generate(seed=3, nodes=4, pods=12)
    snap.header["takenAt"] = "2026-12-01T13:59:00Z"
    node = copy.deepcopy(snap.nodes[0])
    name = node["metadata"]["name"]
    node["metadata"]["labels"] = {"pool": "b"}
    node["kind"] = "Node"
    pod = snap.pods[0]
    ns, pname = pod["metadata"]["namespace"], pod["metadata"]["name"]
    lines = [
        _audit(
            "patch",
            "nodes",
            name,
            "2026-12-01T13:59:30Z",
            requestObject={"spec": {"unschedulable": True}},
        ),
        _audit("update", "nodes", name, "2026-12-01T14:00:10Z", responseObject=node),
        _audit("get", "secrets", "s", "2026-12-01T14:00:11Z", ref={"namespace": ns}),
        _audit(
            "create",
            "pods",
            pname,
            "2026-12-01T14:00:12Z",
            ref={"namespace": ns, "subresource": "eviction"},
            code=201,
        ),
        _audit(
            "create",
            "pods",
            pname,
            "2026-12-01T14:00:13Z",
            ref={"namespace": ns, "subresource": "eviction"},
            code=429,
        ),
        _audit(
            "update",
            "pods",
            pname,
            "2026-12-01T14:00:14Z",
            ref={"namespace": ns, "subresource": "status"},
        ),
        _audit(
            "patch",
            "deployments",
            "x",
            "2026-12-01T14:00:15Z",
            ref={"apiGroup": "apps", "namespace": ns},
        ),
        _audit("delete", "nodes", name, "2026-12-01T14:30:00Z"),
    ]
    log = tmp_path / "audit.log"
    log.write_text("\n".join(lines) + "\n")
    snapfile = snap.write(tmp_path / "start.yaml")
    end = START + dt.timedelta(minutes=10)
    timed, skipped = changes_from_audit(log.read_text(), str(log), START, end)
    assert [c.verb for _, c in timed] == ["patch", "update", "evict"]
    assert skipped["secrets and serviceaccounts (never read)"] == 1
    assert skipped["refused requests"] == 1 and skipped["after the window"] == 1
    tl = record_from_audit(log, snapfile, START, end)
    # the patch before the window's start is folded into the start snapshot
    assert next(n for n in tl.snapshot.nodes if n["metadata"]["name"] == name)["spec"][
        "unschedulable"
    ]
    assert [(c.t, c.verb, c.key) for c in tl.changes] == [
        (10.0, "update", f"Node {name}"),
        (12.0, "evict", f"Pod {ns}/{pname}"),
    ]
    assert tl.header["recorded"]["left_out"]["no body (Metadata level)"] == 1
    with pytest.raises(ConfigError, match="taken 3600 s after the window's start"):
        record_from_audit(log, snapfile, START - dt.timedelta(minutes=61), end)
    with pytest.raises(ConfigError, match="needs --snapshot"):
        record_from_audit(log, None, START, end)


def test_merge_patch_and_fold() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {
        "a": {"c": 2, "d": 3}
    }
    snap = generate(seed=3, nodes=4, pods=12)
    pod = snap.pods[0]
    out = fold(
        snap, [Change(0, "delete", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])]
    )
    assert key(pod) not in {key(p) for p in out.pods} and key(pod) in {key(p) for p in snap.pods}


# -- redaction --------------------------------------------------------------------------------
def test_redaction_renames_the_snapshot_and_the_changes_with_one_table() -> None:
    tl = _tl([])
    c = _moved(tl, {"example.com/pool": "batch"})
    pod = next(p for p in tl.snapshot.pods if p["metadata"]["namespace"] != "kube-system")
    gone = Change(40.0, "delete", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    tl.changes = [c, gone]
    red = redact_timeline(tl)
    node_alias = red.changes[0].name
    assert node_alias != c.name and node_alias in {
        n["metadata"]["name"] for n in red.snapshot.nodes
    }
    assert red.changes[1].key in {f"Pod {key(p)}" for p in red.snapshot.pods}
    assert red.header["redacted"] and red.snapshot.header["redacted"]
    text = red.dump()
    assert c.name not in text and pod["metadata"]["namespace"] not in text
    red.validate()
    with pytest.raises(ConfigError, match="bare patch"):
        redact_timeline(_tl([Change(1, "patch", "Node", c.name, None, patch={"x": 1})]))


# -- repeats ------------------------------------------------------------------------------------
def _run(i: int, node3: str = "n1", skipped: str | None = None) -> Any:
    """One hand-built 3-round replay: web's original evicted in round 1, its replacement in
    round 2, that one's replacement in round 3; each replacement has run i's random name."""
    ev = PodFate("evicted", "api-server", strategy="PodLifeTime")
    gone, new = PodFate("gone", None), PodFate("new", None)
    r1, r2 = f"prod/web-7c9d-r{i}a", f"prod/web-7c9d-r{i}b"
    rows = [
        PodRow("prod/web-7c9d-aaaaa", "n1", RS, fates=[ev, gone, gone]),
        PodRow(r1, "n1", RS, replacement_origin("prod/web-7c9d-aaaaa"), [new, ev, gone]),
        PodRow(r2, node3, RS, replacement_origin(r1), [new, new, ev]),
        PodRow("prod/db-0", "n2", "StatefulSet/db", fates=[PodFate(NOT_PICKED, "policy")] * 3),
    ]
    done = {"succeeded": True, "exit_code": 0}  # each round's Job completed with exit 0
    rounds = [RoundFigures(f"round-{k}", skipped=skipped, extra=dict(done)) for k in (1, 2, 3)]
    return SimpleNamespace(ledger=Ledger("replay", "v0.36.0", rows, rounds), timeline={})


RS = "ReplicaSet/web-7c9d"


def test_two_identical_three_round_runs_are_the_same() -> None:
    """Issue 39 case 8: the second-generation replacement's identity carried the first
    replacement's random name, so identical runs reported `same: False, distinct: 2`."""
    cmp = repeat(_run, 2, lambda _: None)
    assert cmp["same"] is True and cmp["distinct_sets"] == 1 and cmp["differ"] == []
    assert cmp["per_run"] == [3, 3]
    assert "the same eviction set: yes (compared 2 of 2 runs)" in markdown(cmp)


def test_repeats_name_the_identities_that_differ_and_per_run_counts() -> None:
    runs = [_run(1), _run(2, node3="n9"), _run(3)]
    cmp = repeat(lambda i: runs[i - 1], 3, lambda _: None)
    assert cmp["same"] is False and cmp["distinct_sets"] == 2
    gen2 = "prod ReplicaSet/web-7c9d (replacement gen 2)"
    got = {d["label"]: d["counts"] for d in cmp["differ"]}
    assert got == {
        f"{gen2}@n1: evicted by PodLifeTime (api-server)": [1, 0, 1],
        f"{gen2}@n9: evicted by PodLifeTime (api-server)": [0, 1, 0],
    }
    md = markdown(cmp)
    assert "run 1: 1 (prod/web-7c9d-r1b); run 2: 0 (none); run 3: 1 (prod/web-7c9d-r3b)" in md


def test_a_run_that_measured_nothing_makes_repeats_not_comparable() -> None:
    runs = [_run(1), _run(2, skipped="requires >=2 nodes")]
    cmp = repeat(lambda i: runs[i - 1], 2, lambda _: None)
    assert cmp["same"] == NOT_COMPARABLE
    assert cmp["not_compared"] == [
        {"pod": "run 2", "fate": "", "why": "every round skipped: requires >=2 nodes"}
    ]
    assert "compared 1 of 2 runs: not comparable" in markdown(cmp)


@pytest.mark.parametrize(
    ("runs", "code"),
    [
        ([_run(1), _run(2)], 0),
        ([_run(1), _run(2, skipped="requires >=2 nodes")], 3),
    ],
)
def test_repeats_that_compared_nothing_exit_3(runs: list[Any], code: int) -> None:
    for r in runs:
        r.artifacts = {}
    args = argparse.Namespace(repeat=len(runs), output="md", output_file=None)
    assert finish_replays(args, lambda i: runs[i - 1]) == code


@pytest.mark.parametrize(
    ("incident", "code"),
    [
        ({}, 0),  # the incident evicted and refused nothing: compared, the same
        ({"prod/gone-1": PodFate("evicted", "api-server")}, 3),
        ({"prod/gone-1": PodFate("refused", "api-server", status_code=429)}, 3),
    ],
)
def test_a_log_verdict_that_compared_nothing_exits_3(incident: dict[str, Any], code: int) -> None:
    res = _run(1)
    kept = {"prod/db-0": PodFate(NOT_PICKED, "policy")}
    res.ledger.comparison = compare({**incident, **kept}, kept, {"compare_only": set(kept)})
    res.markdown, res.to_dict, res.artifacts = res.ledger.to_markdown, res.ledger.to_dict, {}
    args = argparse.Namespace(repeat=1, output="md", output_file=None)
    assert finish_replays(args, lambda i: res) == code


# -- the command line: exit 2, one line, before anything starts --------------------------------
@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["replay", "--timeline", "{tl}", "--speed", "0"], "--speed 0"),
        (["replay", "--timeline", "{tl}", "--speed", "10", "--pause-at", "2h"], "--pause-at"),
        (["replay", "--timeline", "{tl}", "--repeat", "0"], "--repeat 0"),
        (["replay", "{tl}", "--speed", "10"], "need --timeline"),
        (["record", "--context", "c", "--since", "30m", "--output-file", "{out}"], "a watch sees"),
        (["record", "--context", "c", "--until", "25h", "--output-file", "{out}"], "24 h"),
    ],
)
def test_bad_window_inputs_exit_2_with_one_line(tmp_path: Path, argv: list[str], msg: str) -> None:
    tl = _tl([]).write(tmp_path / "t.jsonl")
    args = [a.format(tl=tl, out=tmp_path / "o.jsonl") for a in argv]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_desched.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": "/dev/null"},
    )
    assert proc.returncode == 2, proc.stderr
    assert msg in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_the_record_and_replay_options_parse() -> None:
    from pytest_desched.commands.parser import parser

    a = parser().parse_args(["replay", "--timeline", "t", "--speed", "10", "--pause-at", "5m"])
    assert (a.timeline, a.speed, a.pause_at, a.repeat) == ("t", "10", "5m", 1)


# -- the driver: changes in window time, rounds at theirs, a pause stops both -------------------
def test_driver_applies_in_order_waits_for_rounds_and_pauses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from pytest_desched.replay.timeline import apply as apply_mod
    from pytest_desched.replay.timeline.run import TimelineDriver

    base = _tl([])
    node = base.snapshot.nodes[0]["metadata"]["name"]
    changes = [
        Change(t, "patch", "Node", node, None, patch={"metadata": {"labels": {"step": str(t)}}})
        for t in (1.0, 2.0, 40.0)
    ]
    path = _tl(changes, window=60).write(tmp_path / "t.jsonl")
    tl, plan = check_timeline(path, 200, pause_at="30s", every="20s")
    seen: list[tuple[float, float]] = []
    paused = threading.Event()
    release = threading.Event()

    def fake_apply(api: object, c: Change) -> str:
        seen.append((c.t, driver.clock.window_t()))
        return "applied"

    def resume(t: float) -> None:
        paused.set()
        assert release.wait(10)

    monkeypatch.setattr(apply_mod, "apply_change", fake_apply)
    driver = TimelineDriver(tl, plan, report=lambda m: None, resume=resume)

    class Cluster:
        api_client = object()
        kubeconfig = "kc"

    extra = driver.before_round(1, Cluster())
    assert extra["scheduled_t"] == 20 and extra["window_t"] >= 20
    assert paused.wait(10)  # the clock stopped at 30 s: the change at 40 s has not happened
    assert [t for t, _ in seen] == [1.0, 2.0] and driver.clock.window_t() == pytest.approx(
        30, abs=1
    )
    release.set()
    extra = driver.before_round(2, Cluster())
    assert extra["window_t"] >= 40
    done = driver.finish()
    assert [t for t, _ in seen] == [1.0, 2.0, 40.0]
    assert all(at >= t for t, at in seen)  # never before its moment
    assert done["applied_changes"] == {"applied": 3} and done["pauses"][0]["at_s"] == pytest.approx(
        30, abs=1
    )
    assert [r["scheduled_t"] for r in done["rounds"]] == [20, 40]


def test_repeats_keep_their_evidence_under_the_chosen_folder(tmp_path: Path) -> None:
    from pytest_desched.commands.parser import parser
    from pytest_desched.commands.replay import run_config
    from pytest_desched.config import config_from_args

    args = parser().parse_args(["replay", "s.yaml", "--repeat", "3", "--artifacts", str(tmp_path)])
    base = config_from_args(args, provider="embedded")
    runs = [run_config(base, 3, i) for i in (1, 2, 3)]
    assert [c.artifacts for c in runs] == [tmp_path / f"repeat-{i}" for i in (1, 2, 3)]
    assert len({c.run_dir for c in runs}) == 3
    assert run_config(base, 1, 1) is base


@pytest.mark.parametrize("refused", [[], ["watch /api/v1/pods: HTTP 403 Forbidden: no watch"]])
def test_a_refused_watch_makes_record_exit_3_and_names_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    refused: list[str],
) -> None:
    """A window with an unwatched resource would replay as if nothing changed there."""
    import pytest_desched.replay.capture.record as record_mod
    from pytest_desched.commands.record import cmd_record

    header = make_header(START, 60, "watch", recorded={"watch_refused": refused})
    tl = Timeline(header, generate(seed=3, nodes=3, pods=4), [])
    monkeypatch.setattr(record_mod, "record", lambda *a, **k: tl)
    args = argparse.Namespace(
        kubeconfig=None,
        context="c",
        until="1m",
        since=None,
        namespace=None,
        redact=False,
        audit_log=None,
        snapshot=None,
        output_file=str(tmp_path / "w.jsonl"),
    )
    code = cmd_record(args)
    assert (tmp_path / "w.jsonl").exists()
    if refused:
        assert code == 3
        err = capsys.readouterr().err
        assert "/api/v1/pods" in err and "403" in err and "--print-rbac" in err
    else:
        assert code == 0
