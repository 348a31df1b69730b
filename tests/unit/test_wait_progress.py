"""kube.wait_for's progress: a long wait says what it still awaits (was: silent for the
whole of a 100,000-pod restore's settle, 20 minutes without a line)."""

from __future__ import annotations

from pytest_desched.kube import wait_for


def test_a_wait_reports_what_is_still_awaited_and_not_once_it_is_done() -> None:
    left = iter([3, 2, 0])
    told: list[str] = []
    got = wait_for(
        "the barrier",
        lambda: next(left),
        lambda n: n == 0,
        timeout=10,
        describe=lambda n: f"{n} waiting",
        max_interval=0.01,
        progress=told.append,
        every=0.0,
    )
    assert got == 0
    assert [t.split(" (")[0] for t in told] == ["waiting for the barrier"] * 2
    assert [t.split("): ")[1] for t in told] == ["3 waiting", "2 waiting"]


def test_a_short_wait_stays_quiet() -> None:
    left = iter([1, 0])
    told: list[str] = []
    wait_for("x", lambda: next(left), lambda n: n == 0, 10, max_interval=0.01, progress=told.append)
    assert told == []
