"""A replayed round counts as run only when its Job is proven to have completed with exit 0
(issue 39: an exit code of None counted as success; it is "not measured")."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_desched.commands.replay import failed_rounds


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
