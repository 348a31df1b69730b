"""What `make kind-image` starts, the documented sequence stops (issue 54): the engine step
says on its last line what it left running and how to stop it, and `--print-env` tells
`make e2e-kind` the engine is this tool's own even when an earlier target started it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev.kind_node import __main__ as kind_main
from dev.kind_node.engine import ENGINE_HOST


def _engine(monkeypatch: pytest.MonkeyPatch, host: str, started: str) -> None:
    info = {"docker": "26.1", "started": started, "runtime": "runc", "host": host}
    monkeypatch.setattr(kind_main, "ensure_packages", lambda: None)
    monkeypatch.setattr(kind_main, "ensure_engine", lambda cache: dict(info))
    monkeypatch.setattr(kind_main, "Toolchain", lambda: type("T", (), {"cache_dir": Path("/x")})())


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    out = capsys.readouterr()
    return (out.out + out.err).strip().splitlines()


def test_an_engine_started_by_an_earlier_target_is_ours_to_stop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make kind-image` started it; `make e2e-kind` finds it answering (started=no): it is
    still this tool's own, so the sequence stops it (it stopped only one it started)."""
    _engine(monkeypatch, ENGINE_HOST, "no")
    assert kind_main.main(["engine", "--print-env"]) == 0
    lines = _lines(capsys)
    assert "DESCHED_ENGINE_OWN=yes" in lines and "DESCHED_ENGINE_STARTED=no" in lines, lines


def test_someone_elses_engine_is_never_ours(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _engine(monkeypatch, "", "no")
    assert kind_main.main(["engine", "--print-env"]) == 0
    assert "DESCHED_ENGINE_OWN=no" in _lines(capsys)


@pytest.mark.parametrize(("host", "says"), [(ENGINE_HOST, "stop-engine"), ("", "nothing")])
def test_the_engine_step_s_last_line_says_what_it_left(
    host: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _engine(monkeypatch, host, "yes" if host else "no")
    assert kind_main.main(["engine"]) == 0
    last = _lines(capsys)[-1]
    assert "left running" in last and says in last, last


def test_the_makefile_stops_the_tools_own_engine_not_only_one_it_started() -> None:
    from tests.unit import REPO

    text = (REPO / "Makefile").read_text()
    recipe = text.split("\ne2e-kind:", 1)[1].split("\n\n", 1)[0]
    assert 'DESCHED_ENGINE_OWN" = yes' in recipe and "stop-engine" in recipe, recipe
    assert 'DESCHED_ENGINE_STARTED" = yes' not in recipe, recipe
