"""The eviction-loop detector fires on constructed loops and stays silent on one-way moves."""

from __future__ import annotations

from pytest_desched.evidence.loops import CycleObs, PodAt, cycles_from_records, detect

RS = "lab/ReplicaSet/spread-demo-7d9f"


def pod(name: str, node: str | None, owner: str = RS) -> PodAt:
    return PodAt(f"lab/{name}", f"uid-{name}", owner, node)


def cycle(n: int, evicted: list[PodAt], arrived: list[PodAt]) -> CycleObs:
    return CycleObs(n, tuple(evicted), tuple(arrived))


def test_bounce_back_to_the_node_it_left_fires_with_pods_nodes_and_cycles() -> None:
    # #1707: evicted from the node that misses the preference, put back on it, evicted again
    history = [
        cycle(1, [pod("a", "w1")], [pod("b", "w1")]),
        cycle(2, [], []),
        cycle(3, [pod("b", "w1")], [pod("c", "w1")]),
    ]
    v = detect(history)
    assert not v.silent
    [lp] = v.loops
    assert (lp.owner, lp.kind, lp.cycles, lp.nodes) == (RS, "bounce", [1, 3], ["w1"])
    assert lp.pods == ["lab/a", "lab/b", "lab/c"]
    assert [(s["cycle"], s["left"], s["from"], s["on"]) for s in lp.steps] == [
        (1, "lab/a", "w1", "w1"),
        (3, "lab/b", "w1", "w1"),
    ]
    assert "cycles 1,3" in v.summary() and RS in v.summary()


def test_alternation_between_two_nodes_fires() -> None:
    history = [
        cycle(1, [pod("a", "w1")], [pod("b", "w2")]),
        cycle(2, [pod("b", "w2")], [pod("c", "w1")]),
    ]
    [lp] = detect(history).loops
    assert (lp.kind, lp.cycles, lp.nodes) == ("alternation", [1, 2], ["w1", "w2"])


def test_one_way_moves_over_five_cycles_stay_silent() -> None:
    # the runbook's positive experiment over 5 cycles: three pods move source -> target, one a
    # cycle (the namespace cap), then nothing is left to evict
    history = [
        cycle(1, [pod("a", "src")], [pod("x", "dst")]),
        cycle(2, [pod("b", "src")], [pod("y", "dst")]),
        cycle(3, [pod("c", "src")], [pod("z", "dst")]),
        cycle(4, [], []),
        cycle(5, [], []),
    ]
    v = detect(history)
    assert v.silent and v.loops == []
    assert v.owners_evicted == {RS: [1, 2, 3]}
    assert v.summary().startswith("no eviction loop in 5 cycle(s)")


def test_a_single_bounce_is_not_a_loop_and_owners_are_kept_apart() -> None:
    other = "lab/ReplicaSet/other-1"
    history = [
        cycle(1, [pod("a", "w1")], [pod("b", "w1")]),  # one wasted eviction, then it moved
        cycle(2, [pod("b", "w1"), pod("o", "w2", other)], [pod("c", "w3"), pod("p", "w1", other)]),
        cycle(3, [pod("p", "w1", other)], [pod("q", "w3", other)]),
    ]
    assert detect(history).silent


def test_records_round_trip_into_the_detector() -> None:
    cycles = [
        {
            "cycle": 1,
            "evicted": [{"key": "lab/a", "uid": "1", "owner_ref": RS, "node": "w1"}],
            "arrived": [{"key": "lab/b", "uid": "2", "owner_ref": RS, "node": "w2"}],
        },
        {
            "cycle": 2,
            "evicted": [{"key": "lab/b", "uid": "2", "owner_ref": RS, "node": "w2"}],
            "arrived": [{"key": "lab/c", "uid": "3", "owner_ref": RS, "node": "w1"}],
        },
    ]
    v = detect(cycles_from_records(cycles))
    assert [lp.cycles for lp in v.loops] == [[1, 2]]
    assert v.to_dict()["silent"] is False
