"""Experiment.checks reads the check ids from the code: helpers count, comments do not."""

from __future__ import annotations

from pytest_desched.experiments import REGISTRY
from pytest_desched.experiments.checks_made import checks_in, matches
from pytest_desched.experiments.declared import Experiment, round_checks
from pytest_desched.experiments.framework import Runner

OWN = "own-check"


class _Helpers:
    def shared(self) -> None:
        self.check("made-by-a-helper", "", True)

    def unused(self) -> None:
        self.check("made-by-no-step", "", True)

    def check(self, *_a: object) -> None: ...


class _Probe:
    # "only-in-a-comment" is named here and in the docstring below, never made
    def assess(self) -> None:
        """Not "only-in-a-docstring"."""
        self.r.check(OWN, "", True)
        self.r.shared()
        self.r.check(f"dynamic:{self}", "", True)


def test_a_helpers_check_counts_and_text_alone_does_not() -> None:
    made = checks_in([_Probe.assess], (_Helpers,))
    assert made == {"own-check", "made-by-a-helper", "dynamic:*"}
    assert matches("dynamic:hot", made) and not matches("only-in-a-comment", made)


def test_the_fail_closed_helpers_checks_are_the_callers() -> None:
    missing = REGISTRY["utilization-missing"].checks()
    for c in ("uids-unchanged", "no-replacement", "no-eviction-succeeded", "no-eviction-request"):
        assert c in missing, c
    # the positive experiment calls no fail-closed helper: none of its checks is claimed
    assert "no-eviction-request" not in REGISTRY["utilization"].checks()


def test_the_runner_makes_round_finished_in_every_experiment() -> None:
    assert {"round-finished", "job-completed", "watches-complete"} <= round_checks()
    assert all(round_checks() <= cls.checks() for cls in REGISTRY.values())
    assert Experiment.checks() == round_checks()
    assert "starts-on-source" in checks_in([Runner.arrange_violation], (Runner,))
