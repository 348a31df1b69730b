"""Runner.availability: every round's window, measured once, and never fatal to the record."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from pytest_desched.experiments.framework import Runner


def view(events: list[dict[str, Any]]) -> Any:
    before = [NS(uid="a", workload="web", phase="Running", ready=True)]
    return NS(
        extra={},
        rec=NS(pod_events=events),
        rnd=NS(started=10.0, name="r1"),
        before=NS(pods=before),
    )


def test_the_window_is_filed_once_and_read_back() -> None:
    runner: Any = NS(lab=NS(desired_replicas=lambda: {"web": 1}))
    v = view([{"t": 11.0, "type": "MODIFIED", "uid": "a", "workload": "web", "deleting": True}])
    got = Runner.availability(runner, v)
    assert got["web"].min_available == 0 and v.extra["availability"]["web"]["desired"] == 1
    v.rec.pod_events.clear()  # a second call (record after assess) keeps the first figures
    assert Runner.availability(runner, v)["web"] == got["web"]


def test_owners_that_cannot_be_read_leave_a_note_not_an_error() -> None:
    def dead() -> dict[str, int]:
        raise ConnectionRefusedError("the API server is gone")

    runner: Any = NS(lab=NS(desired_replicas=dead))
    v = view([])
    assert Runner.availability(runner, v) == {}
    assert v.extra["availability"] == {}
    assert "availability not measured" in v.extra["notes"][0]
    assert "ConnectionRefusedError" in v.extra["notes"][0]
