"""A stand-in for DeschedSession in a replay's unit tests: it announces a given policy (as a
real one renders and lints --values) and records how each session was made."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest


@dataclass
class StandIn:
    """`made`: each session's keyword arguments; `entered`: one True per session entered;
    `checked`: the inputs a session on --values announces (its policy `announced`)."""

    checked: Any
    made: list[dict[str, Any]] = field(default_factory=list)
    entered: list[bool] = field(default_factory=list)


def stand_in_sessions(monkeypatch: pytest.MonkeyPatch, announced: Any) -> StandIn:
    """Patch `pytest_desched.session.DeschedSession` with the stand-in; a session handed
    `inputs=` keeps them, as the real one does."""
    box = StandIn(SimpleNamespace(policy=announced))

    class Session(SimpleNamespace):
        def __enter__(self) -> Any:
            box.entered.append(True)
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def session(*a: Any, **kw: Any) -> Session:
        box.made.append(kw)
        return Session(inputs=kw.get("inputs") or box.checked, timings={})

    monkeypatch.setattr("pytest_desched.session.DeschedSession", session)
    return box
