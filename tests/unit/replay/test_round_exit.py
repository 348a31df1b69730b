"""A replayed round counts as run only when its Job is proven to have completed with exit 0
(issue 39: an exit code of None counted as success; it is "not measured")."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_desched.commands.replay import failed_rounds
from pytest_desched.outcome.identity import NOT_COMPARABLE
from pytest_desched.replay.repeat import replay_verdict


def _results(*extras: dict) -> list[SimpleNamespace]:
    rounds = [SimpleNamespace(name=f"round-{i}", extra=e) for i, e in enumerate(extras)]
    return [SimpleNamespace(ledger=SimpleNamespace(rounds=rounds))]


def test_an_unmeasured_exit_code_is_not_success() -> None:
    ok = {"succeeded": True, "exit_code": 0}
    assert failed_rounds(_results(ok)) == []
    assert failed_rounds(_results(ok, {"succeeded": True, "exit_code": None})) == [
        "round-1: its exit code was not measured"
    ]
    assert failed_rounds(_results({"succeeded": False, "exit_code": 2})) == [
        "round-0: its Job's pod exited 2"
    ]


def test_the_replay_verdict_is_the_commands_exit_code() -> None:
    """The library's verdict: a round not proven run fails (1) even when a comparison asked
    for compared nothing (3); a timeline change that failed fails; else pass (0)."""
    ok, bad = {"succeeded": True, "exit_code": 0}, {"succeeded": True, "exit_code": None}
    [fine] = _results(ok)
    fine.timeline, fine.ledger.comparison = {}, {"same_evictions": True}
    assert replay_verdict([fine]).exit_code == 0
    fine.ledger.comparison = {"same_evictions": NOT_COMPARABLE}
    assert replay_verdict([fine]).exit_code == 3
    assert replay_verdict([fine], {"same": True}).exit_code == 3
    fine.timeline = {"failures": ["t=3.0s: update Pod ns/p: 404"]}
    assert replay_verdict([fine]).reasons == ("t=3.0s: update Pod ns/p: 404",)
    [failed] = _results(bad)
    failed.timeline, failed.ledger.comparison = {}, {"same_evictions": NOT_COMPARABLE}
    v = replay_verdict([failed])
    assert (v.exit_code, v.reasons) == (1, ("round-0: its exit code was not measured",))
