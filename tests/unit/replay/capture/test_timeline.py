"""The timeline file (issue 29): format round trip, ordering, and the refusals with numbers."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import key
from pytest_desched.replay.capture.timeline import (
    MAX_WINDOW_S,
    Change,
    Timeline,
    check_speed,
    make_header,
    parse_duration,
    parse_time,
)
from pytest_desched.replay.gen.generator import generate

START = dt.datetime(2026, 12, 1, 14, 0, tzinfo=dt.UTC)


def _timeline(changes: list[Change], window: float = 600) -> Timeline:
    snap = generate(seed=7, nodes=4, pods=20)
    return Timeline(make_header(START, window, "test"), snap, changes)


def _node(tl: Timeline) -> dict:
    return tl.snapshot.nodes[0]


def test_round_trip_keeps_every_change_in_order(tmp_path: Path) -> None:
    tl = _timeline([])
    node = _node(tl)
    name = node["metadata"]["name"]
    moved = {**node, "metadata": {**node["metadata"], "labels": {"pool": "b"}}}
    pod = tl.snapshot.pods[0]
    tl.changes = [
        Change(5.0, "update", "Node", name, None, moved),
        Change(5.0, "patch", "Node", name, None, patch={"spec": {"unschedulable": True}}),
        Change(9.25, "delete", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"]),
    ]
    path = tl.write(tmp_path / "t.jsonl")
    assert path.stat().st_mode & 0o777 == 0o600
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    assert (head["kind"], head["version"], head["windowSeconds"]) == ("Timeline", 1, 600)
    assert "snapshot" in json.loads(lines[1])
    back = Timeline.load(path)
    assert [(c.t, c.verb, c.key, c.line) for c in back.changes] == [
        (5.0, "update", f"Node {name}", 3),
        (5.0, "patch", f"Node {name}", 4),
        (9.25, "delete", f"Pod {key(pod)}", 5),
    ]
    assert back.changes[0].object["metadata"]["labels"] == {"pool": "b"}
    assert back.window_start == START and len(back.snapshot.pods) == len(tl.snapshot.pods)


def test_out_of_order_changes_are_refused_with_the_numbers() -> None:
    tl = _timeline([])
    name = _node(tl)["metadata"]["name"]
    p = {"spec": {"unschedulable": True}}
    tl.changes = [
        Change(10, "patch", "Node", name, patch=p, line=3),
        Change(12, "patch", "Node", name, patch=p, line=4),
        Change(7.5, "patch", "Node", name, patch=p, line=5),
    ]
    with pytest.raises(ConfigError) as e:
        tl.validate("t.jsonl")
    msg = str(e.value)
    assert "1 changes out of order" in msg and "change 3 (line 5) at t=7.5 s" in msg
    assert "after one at t=12" in msg


def test_changes_to_objects_outside_the_snapshot_are_refused() -> None:
    tl = _timeline([])
    ghost = {"metadata": {"name": "ghost"}, "kind": "Node"}
    tl.changes = [
        Change(1, "update", "Node", "ghost", None, ghost),
        Change(2, "create", "Node", "later", None, {**ghost, "metadata": {"name": "later"}}),
        Change(3, "patch", "Node", "later", patch={"metadata": {"labels": {"a": "b"}}}),
        Change(4, "delete", "Node", "later"),
        Change(5, "delete", "Node", "later"),  # deleted already
    ]
    with pytest.raises(ConfigError) as e:
        tl.validate()
    msg = str(e.value)
    assert "2 changes outside the snapshot" in msg
    assert "change 1: update Node ghost" in msg


def test_a_window_longer_than_24h_is_refused() -> None:
    tl = _timeline([], window=MAX_WINDOW_S + 1)
    with pytest.raises(ConfigError, match=r"86401 s \(24.0 h\) is longer than the 24 h"):
        tl.validate()
    _timeline([], window=MAX_WINDOW_S).validate()  # exactly 24 h is fine


def test_changes_past_the_window_end_or_before_its_start_are_refused() -> None:
    tl = _timeline([], window=60)
    name = _node(tl)["metadata"]["name"]
    p = {"spec": {"unschedulable": True}}
    tl.changes = [Change(61, "patch", "Node", name, patch=p)]
    with pytest.raises(ConfigError, match=r"1 changes after the window's end \(60 s\)"):
        tl.validate()
    tl.changes = [Change(-1, "patch", "Node", name, patch=p)]
    with pytest.raises(ConfigError, match="before the window's start"):
        tl.validate()


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ({"t": "x", "verb": "update", "kind": "Node", "name": "n"}, "not a number"),
        ({"t": 1, "verb": "replace", "kind": "Node", "name": "n"}, "verb 'replace'"),
        ({"t": 1, "verb": "create", "kind": "Secret", "name": "s", "namespace": "a"}, "Secret"),
        ({"t": 1, "verb": "create", "kind": "Widget", "name": "w"}, "kind 'Widget'"),
        ({"t": 1, "verb": "delete", "kind": "Pod", "name": "p"}, "has no namespace"),
        ({"t": 1, "verb": "update", "kind": "Node", "name": "n"}, "carries no object"),
        ({"t": 1, "verb": "patch", "kind": "Node", "name": "n"}, "carries no patch"),
    ],
)
def test_malformed_change_lines_name_the_line(tmp_path: Path, line: dict, match: str) -> None:
    text = _timeline([]).dump() + json.dumps(line) + "\n"
    with pytest.raises(ConfigError, match=match) as e:
        Timeline.parse(text, "t.jsonl")
    assert "line 3" in str(e.value)


def test_a_file_that_is_not_a_timeline_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a timeline"):
        Timeline.parse('{"a": 1}\n', "x")
    text = _timeline([]).dump().replace('"version":1', '"version":9', 1)
    with pytest.raises(ConfigError, match="timeline version 9"):
        Timeline.parse(text, "x")
    with pytest.raises(ConfigError, match="no such file"):
        Timeline.load(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "fast"])
def test_speed_must_be_a_finite_number_above_zero(bad: object) -> None:
    with pytest.raises(ConfigError, match="--speed"):
        check_speed(bad)  # type: ignore[arg-type]
    assert check_speed(10) == 10.0 and check_speed("0.5") == 0.5


def test_durations_and_times() -> None:
    assert parse_duration("90s", "--until") == 90
    assert parse_duration("30m", "--until") == 1800
    assert parse_duration("1h30m", "--until") == 5400
    assert parse_duration("12", "--until") == 12
    for bad in ("", "soon", "-5", "0s"):
        with pytest.raises(ConfigError, match="--until"):
            parse_duration(bad, "--until")
    assert parse_time("30m", "--since", START, -1) == START - dt.timedelta(minutes=30)
    assert parse_time("2026-12-01T15:00:00Z", "--until", START, 1) == START + dt.timedelta(hours=1)
    assert parse_time("now", "--since", START, -1) == START
    with pytest.raises(ConfigError, match="RFC 3339"):
        parse_time("2026-13-45T99:00:00Z", "--until", START, 1)
