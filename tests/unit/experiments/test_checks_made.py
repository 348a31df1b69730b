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


SAYS = "constant-says"


class _IdHelpers:
    def check(self, *_a: object) -> None: ...

    def absent(self, node: str, says_id: str, idle_id: str = "default-idle") -> None:
        self.check(says_id, node, True)
        self.check(idle_id, node, True)

    def relay(self, cid: str) -> None:
        self.absent("n", cid, idle_id="relayed-idle")

    def not_an_id(self, label: str) -> None:
        self.check("fixed", label, True)


class _Caller:
    r: _IdHelpers

    def assess(self) -> None:
        self.r.absent("w-1", "positional-says")
        self.r.absent("w-1", says_id=SAYS, idle_id=f"kw-idle:{self}")
        self.r.relay("relayed-says")
        self.r.not_an_id("not-an-id")


def test_an_id_passed_to_a_helper_is_the_callers_check() -> None:
    """Positional, keyword, a module constant, an f-string, the parameter's default, and an
    id handed on through a second helper all count; an argument that is no id does not."""
    made = checks_in([_Caller.assess], (_IdHelpers,))
    assert made == {
        "positional-says",
        "default-idle",
        "constant-says",
        "kw-idle:*",
        "relayed-says",
        "relayed-idle",
        "fixed",
    }


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


def test_the_shared_absent_node_helper_gives_each_experiment_its_own_ids() -> None:
    """utilization_checks.check_absent_node takes the ids: each caller is seen to make its
    own (the registry's entries name them), not the other's."""
    absent = REGISTRY["utilization-absent"].checks()
    long_lived = REGISTRY["utilization-long-lived-absent"].checks()
    assert {"source-absent-node", "descheduler-says-node-missing", "no-node-read-as-idle"} <= absent
    assert {"ll-source-absent-node", "job-says-node-missing", "job-no-node-read-as-idle"} <= (
        long_lived
    )
    assert not {"ll-source-absent-node", "job-says-node-missing"} & absent
    assert not {"source-absent-node", "descheduler-says-node-missing"} & long_lived
