"""Lanes (experiments/lanes.py): the runbook's one-executor-per-pod-set rule, before any change."""

from __future__ import annotations

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.experiments.framework import lab_policy
from pytest_desched.experiments.lanes import check_lanes, plan_lanes, scope_to_lane

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
