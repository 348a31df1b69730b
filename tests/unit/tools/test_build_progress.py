"""Tool builds show progress with a total: `go list -deps` counts what `go build -v` prints."""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import pytest

from pytest_desched.tools import gobuild
from pytest_desched.tools.groups import Group


def _fake_go(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(f"#!/bin/sh\n{body}\n")
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_dep_count_counts_go_list_lines_and_gives_none_on_failure(tmp_path: Path) -> None:
    env = _fake_go(tmp_path, 'printf "fmt\\nos\\nk8s.io/x\\n"')
    assert gobuild.dep_count(["k8s.io/x"], tmp_path, env) == 3
    (tmp_path / "failing").mkdir()
    bad = _fake_go(tmp_path / "failing", "exit 1")
    assert gobuild.dep_count(["k8s.io/x"], tmp_path, bad) is None


def test_progress_line_has_a_bar_with_the_total_and_caps_at_it() -> None:
    assert gobuild.progress_line("kubernetes", 50, 200, 12.4) == (
        "  kubernetes: [#####...............] 50/200 packages, 12s"
    )
    assert "[####################] 200/200" in gobuild.progress_line("k", 230, 200, 1)
    assert gobuild.progress_line("k", 7, None, 3) == "  k: 7 packages compiled, 3s"


def test_the_build_reports_progress_against_the_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gobuild, "dep_count", lambda *a: 4)
    said: list[str] = []
    group = Group("fake", "example.com/x", "v1.0.0", {"x": "example.com/x"})
    # a "build" that prints two packages, then waits for a progress line before it ends
    flag = tmp_path / "reported"
    script = (
        "import pathlib, sys, time\n"
        "print('a', flush=True); print('b', flush=True)\n"
        f"p = pathlib.Path({str(flag)!r})\n"
        "end = time.monotonic() + 10\n"
        "while not p.exists() and time.monotonic() < end: time.sleep(0.01)\n"
    )

    def report(line: str) -> None:
        said.append(line)
        flag.touch()

    gobuild.run_logged(
        [sys.executable, "-c", script], tmp_path, dict(os.environ), io.StringIO(),
        tmp_path / "log", group, report, interval=0.05,
    )  # fmt: skip
    assert said, "no progress line within the build"
    assert any("/4 packages" in line and "fake: [" in line for line in said), said
