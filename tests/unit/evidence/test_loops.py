"""The eviction-loop detector fires on constructed loops and stays silent on one-way moves."""

from __future__ import annotations

from pytest_desched.evidence.compare import identity_of
from pytest_desched.evidence.loops import (
    CycleObs,
    PodAt,
    cycles_from_ledger,
    cycles_from_records,
    detect,
)

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


def test_a_rotation_over_three_nodes_is_a_loop() -> None:
    # A->B, B->C, C->A, A->B: never the exact reverse of an earlier move, yet the owner's pods
    # come back to A (left in cycle 1) and to B (left in cycle 2)
    history = [
        cycle(1, [pod("a", "A")], [pod("b", "B")]),
        cycle(2, [pod("b", "B")], [pod("c", "C")]),
        cycle(3, [pod("c", "C")], [pod("d", "A")]),
        cycle(4, [pod("d", "A")], [pod("e", "B")]),
    ]
    v = detect(history)
    assert not v.silent and not v.proven
    [lp] = v.loops
    assert (lp.kind, lp.cycles, lp.nodes) == ("rotation", [1, 2, 3, 4], ["A", "B", "C"])
    assert [(s["cycle"], s["from"], s["on"]) for s in lp.steps] == [
        (1, "A", "B"),
        (2, "B", "C"),
        (3, "C", "A"),
        (4, "A", "B"),
    ]
    assert "rotation" in v.summary() and "c3: lab/c left C, lab/d landed on A" in v.summary()


def test_a_return_to_a_node_left_earlier_fires_whatever_comes_between() -> None:
    history = [
        cycle(1, [pod("a", "A")], [pod("b", "B")]),
        cycle(2, [], []),
        cycle(3, [pod("b", "B")], [pod("c", "D")]),
        cycle(4, [pod("c", "D")], [pod("d", "A")]),
    ]
    [lp] = detect(history).loops
    assert lp.cycles == [1, 3, 4] and lp.nodes == ["A", "B", "D"]


def test_an_unsettled_cycle_makes_a_silent_run_unproven() -> None:
    # cycle 2's replacement had not arrived by the settle timeout: a return to w1 through it
    # cannot be seen, so "no loop" is not an answer
    history = [
        cycle(1, [pod("a", "w1")], [pod("b", "w2")]),
        CycleObs(2, (pod("b", "w2"),), (), settled=False, note="timed out after 120 s"),
        cycle(3, [], []),
    ]
    v = detect(history)
    assert v.silent and not v.proven
    assert v.unproven == [
        "cycle 2 did not settle: timed out after 120 s; a replacement that arrived after the "
        "settle timeout is not seen, nor a loop through it"
    ]
    assert v.summary().startswith("no eviction loop seen in 3 cycle(s), but not proven: cycle 2")
    assert v.to_dict()["proven"] is False


def test_one_cycle_or_one_that_ran_proves_nothing() -> None:
    # a bounce inside the only cycle: no loop can be seen in one cycle, and silence is no proof
    one = detect([cycle(1, [pod("a", "w1")], [pod("b", "w1")])])
    assert one.silent and not one.proven
    assert "1 cycle(s) ran to their end; a loop is a pod coming back" in one.summary()
    skipped = [
        cycle(1, [pod("a", "w1")], [pod("b", "w2")]),
        CycleObs(2, incomplete="skipped: Skipping descheduling cycle: requires >=2 nodes"),
    ]
    v = detect(skipped)
    assert not v.proven and "cycle 2 skipped: Skipping descheduling cycle" in v.unproven[0]


def test_settled_and_skipped_cycles_proven_only_when_enough_ran() -> None:
    history = [
        CycleObs(1, (pod("a", "src"),), (pod("x", "dst"),), settled=True),
        CycleObs(2, (), (), settled=True),
        CycleObs(3, incomplete="skipped: Skipping descheduling cycle: requires >=2 nodes"),
    ]
    v = detect(history)
    assert v.proven and v.summary() == "no eviction loop in 3 cycle(s)"


def test_records_carry_settled_and_skipped_into_the_verdict() -> None:
    rows = [
        {"cycle": 1, "evicted": [], "arrived": [], "settled": True, "skipped": None},
        {"cycle": 2, "evicted": [], "arrived": [], "settled": False, "note": "pods Pending"},
    ]
    v = detect(cycles_from_records(rows))
    assert not v.proven and "cycle 2 did not settle: pods Pending" in v.unproven[0]


def test_a_ledger_round_the_descheduler_skipped_does_not_count_as_ran() -> None:
    ledger = {
        "rounds": [{"name": "r1"}, {"name": "r2", "skipped": "requires >=2 nodes (found=1)"}],
        "rows": [{"pod": "lab/a", "owner": "ReplicaSet/x", "node": "w1", "fates": []}],
    }
    v = detect(cycles_from_ledger(ledger))
    assert not v.proven and "cycle 2 skipped: requires >=2 nodes (found=1)" in v.unproven[0]


def test_a_ledger_round_whose_replacement_was_not_placed_did_not_settle() -> None:
    ledger = {
        "rounds": [{"name": "r1"}, {"name": "r2"}],
        "rows": [
            {
                "pod": "lab/a",
                "owner": "ReplicaSet/x",
                "node": "w1",
                "fates": [{"fate": "evicted", "replacement": "pending"}, {"fate": "gone"}],
            }
        ],
    }
    v = detect(cycles_from_ledger(ledger))
    assert not v.proven
    assert v.unproven[0].startswith(
        "cycle 1 did not settle: no placed replacement of lab/a by the end of the wait"
    )


def test_a_cycle_whose_descheduler_exited_non_zero_did_not_run_to_its_end() -> None:
    rows = [
        {"cycle": 1, "evicted": [], "arrived": [], "settled": True, "exit_code": 0},
        {"cycle": 2, "evicted": [], "arrived": [], "settled": True, "exit_code": 1},
    ]
    v = detect(cycles_from_records(rows))
    assert not v.proven
    assert v.unproven[0].startswith("1 cycle(s) ran to their end: cycle 2 exited with code 1")


def test_a_departure_whose_replacement_was_not_seen_still_counts_for_a_return() -> None:
    # cycle 1: a left A, its replacement not seen (cycle unsettled); cycle 2: b left B for A
    history = [
        CycleObs(1, (pod("a", "A"),), (), settled=False),
        cycle(2, [pod("b", "B")], [pod("c", "A")]),
    ]
    v = detect(history)
    [lp] = v.loops
    assert (lp.kind, lp.cycles, lp.nodes) == ("return", [1, 2], ["A", "B"])
    assert "c1: lab/a left A, no replacement seen" in v.summary() and not v.proven


def test_a_ledger_pods_owner_is_the_comparison_cores_lineage() -> None:
    """A replacement with a random name shares its owner with the pod it replaced, and a bare
    pod is its own owner once (`lab/a`, not `lab/lab/a`): evidence/compare's Identity.lineage."""
    rs, ev, new = "ReplicaSet/web-7d4f9c8b6", [{"fate": "evicted"}], [{"fate": "new"}]
    rows = [
        {"pod": "lab/web-7d4f9c8b6-x2kq9", "owner": rs, "node": "w1", "fates": ev},
        {"pod": "lab/a", "owner": None, "node": "w1", "fates": ev},
        {"pod": "lab/web-7d4f9c8b6-q8wzt", "owner": rs, "node": "w2", "fates": new},
    ]
    ledger = {"rounds": [{"name": "r1"}], "rows": rows}
    [c1] = cycles_from_ledger(ledger)
    assert [p.owner for p in c1.evicted] == ["lab/ReplicaSet/web-7d4f9c8b6", "lab/a"]
    assert [p.owner for p in c1.arrived] == ["lab/ReplicaSet/web-7d4f9c8b6"]
    assert c1.evicted[1].owner == identity_of("lab/a", bare=True).lineage
