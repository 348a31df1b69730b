"""Lanes (experiments/lanes.py): the runbook's one-executor-per-pod-set rule, before any change."""

from __future__ import annotations

import os

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.experiments.framework import lab_policy
from pytest_desched.experiments.lanes import (
    check_lanes,
    decide_execution,
    lanes_pay,
    plan_lanes,
    scope_to_lane,
)

WORKERS = ["w1", "w2", "w3", "w4", "w5", "w6"]


def test_lanes_get_disjoint_node_pairs_namespaces_pools_and_releases() -> None:
    lanes = plan_lanes(3, WORKERS, ["a", "b", "c"], "descheduler")
    assert [(ln.source, ln.target) for ln in lanes] == [("w1", "w2"), ("w3", "w4"), ("w5", "w6")]
    assert len({ln.pool for ln in lanes}) == len({ln.release for ln in lanes}) == 3


def test_too_few_workers_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"need 6 workers .* has 3.*--desched-workers 6"):
        plan_lanes(3, WORKERS[:3], ["a", "b", "c"], "descheduler")


def test_unscoped_policies_side_by_side_are_refused() -> None:
    lanes = plan_lanes(2, WORKERS, ["a", "b"], "descheduler")
    policy = lab_policy("pdb-lister-workaround")
    with pytest.raises(ConfigError, match=r"could evict the same pods.*namespaces.include"):
        check_lanes(lanes, [policy, policy])


def test_scoped_policies_pass_and_record_why() -> None:
    lanes = plan_lanes(2, WORKERS, ["a", "b"], "descheduler")
    policies = [scope_to_lane(lab_policy("pdb-lister-workaround"), ln).validate() for ln in lanes]
    check_lanes(lanes, policies)
    for ln, p in zip(lanes, policies, strict=True):
        scoped = [o for o in p.overrides if o["path"].endswith(".namespaces")]
        assert scoped and all(o["new"] == {"include": [ln.namespace]} for o in scoped)
        assert all("one executor per pod set" in o["why"] for o in scoped)


def test_a_lane_may_not_reach_into_another_lanes_namespace() -> None:
    lanes = plan_lanes(2, WORKERS, ["a", "b"], "descheduler")
    wrong = scope_to_lane(lab_policy("pdb-lister-workaround"), lanes[1])  # held to "b"
    right = scope_to_lane(lab_policy("pdb-lister-workaround"), lanes[1])
    with pytest.raises(ConfigError, match="lane0"):
        check_lanes(lanes, [wrong, right])


def test_shared_namespaces_are_refused() -> None:
    lanes = plan_lanes(2, WORKERS, ["a", "a"], "descheduler")
    with pytest.raises(ConfigError, match="share a namespace"):
        check_lanes(lanes, [lab_policy(), lab_policy()])


@pytest.mark.parametrize(
    ("cpus", "load", "pays"),
    [
        (2, 0.0, False),  # 2 idle cores: 1 for the control plane, 1 for 3 lanes
        (4, 0.0, True),  # a core per lane beside the control plane
        (4, 0.5, False),  # the same cores, half of one busy
        (8, 3.0, True),
        (16, 14.0, False),  # many cores, all busy
    ],
)
def test_lanes_pay_only_with_a_spare_core_per_lane(cpus: int, load: float, pays: bool) -> None:
    pay, why = lanes_pay(3, cpus, load)
    assert pay is pays
    assert why.startswith("lanes: " if pays else "sequential: ")
    assert f"{cpus} CPUs, load {load:.2f}" in why


def test_one_experiment_is_never_a_lane() -> None:
    assert lanes_pay(1, 64, 0.0)[0] is False


def test_execution_is_recorded_with_the_machine_facts_and_can_be_forced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.25, 0.0, 0.0))
    auto = decide_execution(3)
    assert auto["mode"] == "sequential" and auto["cpus"] == 2 and auto["load_1m"] == 0.25
    forced = decide_execution(3, "always")
    assert forced["mode"] == "lanes" and forced["why"] == "lanes: asked for"
    with pytest.raises(ConfigError, match="lanes 'sometimes'"):
        decide_execution(3, "sometimes")
