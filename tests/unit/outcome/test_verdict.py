"""One verdict: pass 0, fail 1, no verdict 3, and a failure outranks no verdict."""

from __future__ import annotations

from pytest_desched.errors import EXIT_FAILED, EXIT_INFRA, EXIT_OK
from pytest_desched.outcome.verdict import Outcome, Verdict, combine


def test_the_exit_code_follows_the_outcome() -> None:
    assert Verdict(Outcome.PASS).exit_code == EXIT_OK == 0
    assert Verdict(Outcome.FAIL, ("x",)).exit_code == EXIT_FAILED == 1
    assert Verdict(Outcome.NO_VERDICT).exit_code == EXIT_INFRA == 3
    assert Verdict("fail").outcome is Outcome.FAIL  # a word reads as the outcome


def test_a_failure_outranks_no_verdict() -> None:
    v = Verdict.of(["round 1: its Job did not complete"], ["nothing compared"])
    assert (v.outcome, v.reasons) == (Outcome.FAIL, ("round 1: its Job did not complete",))
    assert Verdict.of([], ["nothing compared"]).outcome is Outcome.NO_VERDICT
    assert Verdict.of().ok and Verdict.of().reasons == ()


def test_combined_runs_keep_the_reasons_of_the_outcome_they_reach() -> None:
    runs = [Verdict(Outcome.PASS), Verdict(Outcome.NO_VERDICT, ("a",)), Verdict(Outcome.FAIL)]
    both = combine(runs)
    assert both.outcome is Outcome.FAIL and both.reasons == ("fail",)  # a fail with no reason
    assert combine(runs[:2]).reasons == ("a",) and combine(runs[:2]).exit_code == EXIT_INFRA
    assert combine([]).outcome is Outcome.PASS
    assert combine(runs).to_dict() == {"outcome": "fail", "reasons": ["fail"], "exit": 1}
