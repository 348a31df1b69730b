"""The canary compares the rebuild window between tracks: capacity, Ready, Pending, skew."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.canary.capacity import (
    CAPACITY_DROPPED,
    CAPACITY_FOLLOWS,
    PENDING_LEFT,
    READY_SLOWER,
    SKEW_WORSE,
    WINDOW_LONGER,
    capacity_diffs,
    time_moved,
)
from pytest_desched.canary.compare import diff_rounds, node_roles, round_figures
from pytest_desched.canary.expectations import TRIGGERS, load_explanations
from pytest_desched.canary.report import FIGURES
from pytest_desched.canary.verdict import changes_of, judge

NS = "descheduler-lab"
B_ROLES = node_roles(["kwok-a-worker-1", "kwok-a-worker-2", "kwok-a-worker-3"])
C_ROLES = node_roles(["kwok-b-worker-1", "kwok-b-worker-2", "kwok-b-worker-3"])
EXP = "rebuild-window-pdb[own-policy]"


def window(min_available: int, below: float, ready: float | None, **kw: Any) -> dict:
    return {
        "owner": "web",
        "desired": 6,
        "available_before": 6,
        "min_available": min_available,
        "min_at_s": 1.0,
        "below_desired_s": below,
        "recovered": kw.pop("recovered", True),
        "recovered_at_s": 1.0 + below,
        "pending_max": 6 - min_available,
        "pending_after": 0,
        "replacements": 6 - min_available,
        "ready_latency_s": ready,
        "window_s": 30.0,
        "series": [[0.0, 6, 0]],
        **kw,
    }


def record(node: str, evictions: int, w: dict, **kw: Any) -> dict:
    """A round of the incident with a PDB: one pod evicted, others refused 429."""
    decs = [
        {
            "namespace": NS,
            "name": f"web-6d9f7b5c4-{i}x2kq",
            "node": node,
            "fate": "evicted" if i < evictions else "refused",
            "layer": "api-server",
            "status_code": None if i < evictions else 429,
        }
        for i in range(3)
    ]
    return {
        "namespace": NS,
        "decisions": decs,
        "evictions": evictions,
        "job": {"succeeded": True, "exit_code": 0},
        "availability": {"web": w},
        "distribution_after": kw.pop("dist", {node: 5, "w2": 1}),
        **kw,
    }


BASE = record("kwok-a-worker-1", 1, window(5, 12.4, 12.3))


def changes(cand: dict) -> list[tuple[Any, str | None]]:
    return changes_of(diff_rounds(EXP, [BASE], [cand], B_ROLES, C_ROLES))


def test_the_same_window_within_slack_is_no_change() -> None:
    cand = record("kwok-b-worker-1", 1, window(5, 14.0, 13.9))  # load moved it 1.6 s
    (rd,) = diff_rounds(EXP, [BASE], [cand], B_ROLES, C_ROLES)
    assert rd.capacity == [] and not rd.changed and changes(cand) == []
    assert round_figures(cand).availability["web"]["min_available"] == 5


def test_less_capacity_at_the_same_evictions_is_a_rollback_trigger() -> None:
    """The candidate evicted the same pods and still left web with less (e.g. its evictions
    no longer wait for the PDB's view): the incident, caught by the canary."""
    cand = record("kwok-b-worker-1", 1, window(4, 12.0, 12.1))
    (rd,) = diff_rounds(EXP, [BASE], [cand], B_ROLES, C_ROLES)
    assert [d.kind for d in rd.capacity] == [CAPACITY_DROPPED] and rd.changed
    verdict = judge(changes(cand), [])
    (j,) = verdict.unexplained
    assert j.trigger and j.change.subject == "web"
    assert "5/6" in j.change.detail and "4/6" in j.change.detail
    assert "rollback trigger capacity-dropped" in verdict.reasons[0]


def test_a_longer_window_slower_ready_and_worse_skew_must_be_explained() -> None:
    cand = record("kwok-b-worker-1", 1, window(5, 30.0, 29.0), dist={"kwok-b-worker-1": 6, "w2": 0})
    got = {(c.kind, c.subject) for c, _ in changes(cand)}
    assert got == {(WINDOW_LONGER, "web"), (READY_SLOWER, "web"), (SKEW_WORSE, "round")}
    verdict = judge(changes(cand), [])
    assert not verdict.ok and not any(j.trigger for j in verdict.unexplained)


def test_a_pod_left_pending_is_a_trigger_whatever_the_evictions() -> None:
    cand = record("kwok-b-worker-1", 2, window(4, 12.0, 12.0), pending_pods=["web-x"])
    kinds = {c.kind for c, _ in changes(cand)}
    assert PENDING_LEFT in kinds and PENDING_LEFT in TRIGGERS
    # the capacity lost to the second eviction follows from it (judged as the pods' change)
    assert CAPACITY_DROPPED not in kinds and CAPACITY_FOLLOWS in kinds
    judged = {j.change.kind: j for j in judge(changes(cand), []).judged}
    assert judged[PENDING_LEFT].status == "unexplained" and judged[PENDING_LEFT].trigger
    assert judged[CAPACITY_FOLLOWS].status == "informative"
    assert judged["continue-evicting"].status == "unexplained"  # a 429 became a 201


def test_better_capacity_is_said_not_failed() -> None:
    cand = record("kwok-b-worker-1", 1, window(5, 3.0, 2.9))  # faster replacements
    verdict = judge(changes(cand), [])
    assert verdict.ok and {j.status for j in verdict.judged} == {"informative"}


def test_an_explanation_names_the_capacity_change(tmp_path: Any) -> None:
    f = tmp_path / "expected.yaml"
    f.write_text(
        "changes:\n"
        f"  - experiment: '{EXP}'\n"
        "    kind: capacity-dropped\n"
        "    reason: the candidate's grace period is shorter, by design\n"
        "    link: https://example.invalid/design\n"
    )
    cand = record("kwok-b-worker-1", 1, window(4, 12.0, 12.1))
    verdict = judge(changes(cand), load_explanations(f))
    assert verdict.ok, verdict.reasons


def test_slack_and_report_row() -> None:
    assert time_moved(12.0, 14.9) == 0 and time_moved(12.0, 18.1) == 1
    assert time_moved(0.03, 2.0) == 0 and time_moved(30.0, 10.0) == -1
    assert time_moved(None, 5.0) == 0
    assert ("min_available", "min available") in FIGURES
    assert round_figures(BASE).min_available == "web 5/6"


@pytest.mark.parametrize("drop", [True, False])
def test_not_recovered_is_a_drop(drop: bool) -> None:
    cand_w = window(5, 12.0, 12.0, recovered=not drop)
    diffs = capacity_diffs(round_figures(BASE), round_figures(record("n", 1, cand_w)))
    assert (CAPACITY_DROPPED in [d.kind for d in diffs]) is drop
