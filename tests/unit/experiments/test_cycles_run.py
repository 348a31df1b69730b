"""`no_loop` is a check that can fail even where no cycle ran (experiments/cycles.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pytest_desched.experiments.cycles import NO_LOOP, run_cycles


class Runner:
    def __init__(self, **ctx: Any) -> None:
        self.ctx = SimpleNamespace(**ctx)
        self.result = SimpleNamespace()
        self.views: list[Any] = []
        self.checks: list[tuple[str, str, bool, str]] = []

    def check(self, id: str, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append((id, name, ok, detail))
        return ok


def test_no_loop_with_no_cycle_run_fails_as_not_proven() -> None:
    r = Runner(cycles=3, no_loop=True)
    run_cycles(r, SimpleNamespace(default_cycles=1))  # type: ignore[arg-type]
    [(cid, name, ok, detail)] = r.checks
    assert (cid, ok) == (NO_LOOP, False) and "in 3 cycle(s)" in name
    assert detail == "not proven: the experiment ran no descheduling cycle"


def test_without_no_loop_nothing_is_judged() -> None:
    r = Runner(cycles=3, no_loop=False)
    run_cycles(r, SimpleNamespace(default_cycles=1))  # type: ignore[arg-type]
    assert r.checks == []
