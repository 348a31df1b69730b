"""Issue 27 hole 10: every check an experiment uses must be able to fail on that experiment.

Each test feeds a check the counter-example it exists to catch and shows it fails there
(and holds on the run it is meant to pass).
"""

from __future__ import annotations

from pytest_desched.experiments import assertions as A
from pytest_desched.experiments.framework import RolloutBaseline

NS, OTHER = "desched-ns-exclude", "desched-ns-exclude-other"


def _row(ns: str, name: str, fate: str, layer: str, codes: tuple[int, ...], live: bool):
    return A.PodFate(
        fate,
        layer,
        namespace=ns,
        name=name,
        uid=f"uid-{ns}-{name}",
        workload="old",
        owner_kind="ReplicaSet",
        node="w1",
        strategy="PodLifeTime" if fate == "evicted" else None,
        audit_codes=codes,
        live_after=live,
    )


def test_decided_by_policy_fails_for_a_pod_that_was_evicted_without_a_log_line() -> None:
    """namespace-exclude's counter-example, as the issue's run recorded it: the excluded
    namespace's pods were evicted (audit 201, UID gone) but the ledger, scoped to one
    namespace, had no decision for them: `(old-...@w1 not-picked policy gone)`."""
    ledger = A.Ledger.of_round(
        [
            _row(NS, "old-a", "evicted", "api-server", (201,), False),
            _row(OTHER, "old-b", "not-picked", "policy", (201,), False),
            _row(OTHER, "old-c", "not-picked", "policy", (), False),
        ],
        audit_available=True,
        round_name="descheduler-namespace-exclude",
    )
    for pod in ("old-b", "old-c"):  # evicted per the API server; gone with no request
        check = A.decided_by(ledger, "policy", pods=[pod])
        assert not check.ok, check.detail
        assert "gone" in check.detail


def test_decided_by_policy_holds_for_pods_never_picked_and_still_there() -> None:
    ledger = A.Ledger.of_round([_row(OTHER, "old-b", "not-picked", "policy", (), True)], "r", True)
    assert A.decided_by(ledger, "policy", pods=[f"{OTHER}/old-b"]).ok


BASE = RolloutBaseline(
    replicasets={"spread-demo-7d9c6b5f4": "7d9c6b5f4"},
    owners=frozenset({"spread-demo-7d9c6b5f4"}),
    generation=1,
)


def test_no_rollout_fails_when_a_new_replicaset_appears_during_the_experiment() -> None:
    """A rollout started after the label move (a template change: the old check read the
    lab within milliseconds of the move and saw nothing yet): a new ReplicaSet, its pods,
    generation 2."""
    after = {"spread-demo-7d9c6b5f4": "7d9c6b5f4", "spread-demo-58f8d7c9b": "58f8d7c9b"}
    seen = ["spread-demo-7d9c6b5f4", "spread-demo-58f8d7c9b"]
    check = A.no_rollout(BASE, after, 2, seen)
    assert not check.ok
    assert "new: {'spread-demo-58f8d7c9b'" in check.detail and "generation 1 -> 2" in check.detail


def test_no_rollout_fails_on_a_pod_of_another_owner_even_with_the_same_replicasets() -> None:
    check = A.no_rollout(BASE, dict(BASE.replicasets), 1, ["spread-demo-58f8d7c9b"])
    assert not check.ok and "then also by ['spread-demo-58f8d7c9b']" in check.detail


def test_no_rollout_fails_on_a_spec_change_alone_and_on_an_empty_baseline() -> None:
    assert not A.no_rollout(BASE, dict(BASE.replicasets), 2, []).ok
    empty = RolloutBaseline({}, frozenset(), 1)
    assert not A.no_rollout(empty, {}, 1, []).ok


def test_no_rollout_holds_when_replacements_come_from_the_same_replicaset() -> None:
    seen = ["spread-demo-7d9c6b5f4"] * 4
    check = A.no_rollout(BASE, dict(BASE.replicasets), 1, seen)
    assert check.ok, check.detail
