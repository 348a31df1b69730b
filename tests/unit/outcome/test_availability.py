"""Each owner's available replicas over a round's window, replayed from pod watch events."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.outcome.availability import (
    OwnerWindow,
    owner_windows,
    unseen_deletions,
    windows_to_dict,
)
from pytest_desched.outcome.ledger import Ledger, RoundFigures


def ev(t: float, uid: str, phase: str = "Running", ready: bool = True, **kw: Any) -> dict:
    return {
        "t": t,
        "type": kw.pop("type", "MODIFIED"),
        "uid": uid,
        "workload": kw.pop("workload", "web"),
        "phase": phase,
        "ready": ready,
        "deleting": kw.pop("deleting", False),
        "node": kw.pop("node", "n1"),
        **kw,
    }


def incident() -> list[dict]:
    """Three pods Ready before the round (t=10); two evicted at 12, their replacements
    Pending until 20 and 27; a bystander owner untouched."""
    return [
        ev(1, "a", type="ADDED"),
        ev(1, "b", type="ADDED"),
        ev(1, "c", type="ADDED"),
        ev(1, "z", type="ADDED", workload="other"),
        ev(12, "a", deleting=True),
        ev(12.1, "a", type="DELETED", deleting=True),
        ev(12.2, "a2", phase="Pending", ready=False, type="ADDED", node=None),
        ev(12.3, "a2", phase="Pending", ready=False),  # bound, starting
        ev(13, "b", deleting=True),
        ev(13.2, "b2", phase="Pending", ready=False, type="ADDED"),
        ev(20.2, "a2"),
        ev(27.2, "b2"),
    ]


def test_the_dip_is_measured_against_desired() -> None:
    w = owner_windows(incident(), {"web": 3, "other": 1}, start=10, end=30)
    web = w["web"]
    assert (web.available_before, web.min_available, web.desired) == (3, 1, 3)
    assert web.dipped and web.min_at_s == 3.0  # b went at t=13
    # below desired from 12 (a terminating) to 27.2 (b2 Ready)
    assert web.below_desired_s == pytest.approx(15.2)
    assert web.recovered and web.recovered_at_s == pytest.approx(17.2)
    assert (web.pending_max, web.pending_after, web.replacements) == (2, 0, 2)
    assert web.ready_latency_s == pytest.approx(14.0)  # b2: 13.2 -> 27.2
    assert web.window_s == 20
    assert web.series[0] == (0.0, 3, 0) and web.series[-1] == (17.2, 3, 0)
    other = w["other"]
    assert not other.dipped and other.below_desired_s == 0 and other.min_at_s is None
    assert other.replacements == 0 and other.ready_latency_s is None


def test_a_window_that_ends_below_desired_counts_to_its_end() -> None:
    cut = [e for e in incident() if e["t"] < 25]  # b2 never Ready before the window closed
    web = owner_windows(cut, {"web": 3}, start=10, end=25)["web"]
    assert not web.recovered and web.recovered_at_s is None
    assert web.below_desired_s == pytest.approx(13.0)
    assert web.pending_after == 1
    assert "NOT back to desired" in web.line()


def test_no_eviction_no_dip_and_pdb_floor_is_a_minimum() -> None:
    steady = [ev(1, u, type="ADDED") for u in "abcd"]
    w = owner_windows(steady, {"web": 4}, start=5, end=9)["web"]
    assert (w.min_available, w.below_desired_s, w.pending_max) == (4, 0.0, 0)
    one = [*steady, ev(6, "a", deleting=True), ev(6.1, "a2", "Pending", False, type="ADDED")]
    w = owner_windows([*one, ev(8, "a2")], {"web": 4}, start=5, end=9)["web"]
    assert w.min_available == 3 and w.below_desired_s == pytest.approx(2.0)


def test_round_trip_and_bad_window() -> None:
    w = owner_windows(incident(), {"web": 3}, start=10, end=30)
    d = windows_to_dict(w)
    assert OwnerWindow.from_dict(d["web"]) == w["web"]
    assert d["web"]["series_truncated"] is False
    with pytest.raises(ValueError, match="before it starts"):
        owner_windows([], {"web": 1}, start=5, end=4)


def test_round_figures_and_the_experiment_ledger_carry_it() -> None:
    """One model: the ledger's RoundFigures holds the figures in both its JSON forms."""
    figures = windows_to_dict(owner_windows(incident(), {"web": 3}, start=10, end=30))
    f = RoundFigures("r", form="runbook", availability=figures)
    assert f.to_dict()["availability"]["web"]["min_available"] == 1
    led = Ledger.of_round([], "r")
    assert "availability" not in led.to_dict()
    led.rounds[0].availability = figures
    assert led.to_dict()["availability"]["web"]["below_desired_s"] == pytest.approx(15.2)


def test_the_watchs_late_first_listing_is_not_a_dip_or_a_replacement() -> None:
    """The watch re-lists existing pods as ADDED, possibly after the window opened: with the
    snapshot taken before it, they are neither missing capacity nor replacements."""
    before = [{k: v for k, v in ev(0, u).items() if k != "t"} for u in "abc"]
    late = [ev(10.05, u, type="ADDED") for u in "abc"] + incident()[4:]
    w = owner_windows(late, {"web": 3}, start=10, end=30, initial=before)["web"]
    assert (w.available_before, w.min_available, w.replacements) == (3, 1, 2)
    assert w.series[0] == (0.0, 3, 0) and w.below_desired_s == pytest.approx(15.2)
    # without the snapshot the same events read as a dip at the start, and 5 replacements
    blind = owner_windows(late, {"web": 3}, start=10, end=30)["web"]
    assert blind.available_before == 0 and blind.replacements == 5


def test_a_pod_removed_between_two_watch_streams_is_gone_at_the_next_listing() -> None:
    """The recorder's watch re-lists at each stream's start; b was evicted and removed between
    two streams (no event of it), so stream 2's listing, without b, says it is gone."""
    events = [{**e, "stream": 1} for e in incident() if not (e["uid"] == "b" and e["t"] == 13)]
    events = [e for e in events if e["t"] < 13.4]
    listing = [  # the API server lists by name: a genuine ADDED before it changes nothing
        ev(13.5, "a2", "Pending", False, type="ADDED"),
        ev(13.5, "b2", "Pending", False, type="ADDED"),
        ev(13.5, "c", type="ADDED"),
        ev(13.5, "z", type="ADDED", workload="other"),
    ]
    later = [ev(20.2, "a2"), ev(27.2, "b2")]
    events += [{**e, "stream": 2} for e in listing + later]
    gone = unseen_deletions(events)
    assert [(g["uid"], g["t"], g["type"]) for g in gone] == [("b", 13.5, "DELETED")]
    w = owner_windows(events, {"web": 3}, start=10, end=30)["web"]
    assert (w.available_before, w.min_available, w.replacements) == (3, 1, 2)
    assert w.recovered and w.series[-1] == (17.2, 3, 0)
    # without stream numbers nothing is inferred: b stays available, 4 of 3 at the end
    bare = [{k: v for k, v in e.items() if k != "stream"} for e in events]
    assert owner_windows(bare, {"web": 3}, start=10, end=30)["web"].series[-1][1] == 4


def test_new_pods_and_a_half_caught_listing_remove_nothing() -> None:
    first = [ev(1, "a", type="ADDED", stream=1), ev(2, "n1", type="ADDED", stream=1)]
    assert unseen_deletions(first) == []  # stream 1's listing: nothing was alive before it
    half = [*first, ev(3, "n1", type="ADDED", stream=2)]  # the copy ends inside a listing
    assert unseen_deletions(half) == []
    closed = [*half, ev(3.2, "n1", stream=2)]  # stream 2's listing ended without a
    assert [g["uid"] for g in unseen_deletions(closed)] == ["a"]
    other_ns = [*half, ev(3.1, "q", type="ADDED", stream=2, namespace="lab-b")]
    assert unseen_deletions(other_ns) == []  # another namespace's stream lists its own pods


def test_terminating_pods_are_timed_per_owner() -> None:
    """Two pods deleted at 12 and 13 wait out their grace (gone at 32 and 33); their
    replacements are Ready at 20: the dip ends then, the Terminating time runs on."""
    evs = [
        ev(1, "a", type="ADDED"),
        ev(1, "b", type="ADDED"),
        ev(12, "a", deleting=True),
        ev(12.2, "a2", phase="Pending", ready=False, type="ADDED"),
        ev(13, "b", deleting=True),
        ev(13.2, "b2", phase="Pending", ready=False, type="ADDED"),
        ev(20, "a2"),
        ev(20.5, "b2"),
        ev(32, "a", type="DELETED", deleting=True),
        ev(33, "b", type="DELETED", deleting=True),
    ]
    web = owner_windows(evs, {"web": 2}, start=10, end=40)["web"]
    assert web.below_desired_s == pytest.approx(8.5)  # 12 -> 20.5: grace is not the dip
    assert (web.terminating_max, web.terminating_after) == (2, 0)
    assert web.terminating_s == pytest.approx(21.0)  # 12 -> 33, one or two at a time
    assert web.terminating_longest_s == pytest.approx(20.0)
    assert "Terminating max 2 for 21.0 s" in web.line()
    # still terminating at the window's end: counted to the end, and said
    cut = owner_windows(evs[:-2], {"web": 2}, start=10, end=30)["web"]
    assert (cut.terminating_after, cut.terminating_longest_s) == (2, pytest.approx(18.0))
    back = OwnerWindow.from_dict(windows_to_dict({"web": web})["web"])
    assert back == web


def test_an_instant_removal_has_no_terminating_time() -> None:
    evs = [ev(1, "a", type="ADDED"), ev(12, "a", type="DELETED", deleting=True)]
    web = owner_windows(evs, {"web": 1}, start=10, end=20)["web"]
    assert (web.terminating_max, web.terminating_s, web.terminating_longest_s) == (0, 0.0, None)
    assert "Terminating" not in web.line()
