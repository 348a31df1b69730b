"""Two users (or two CI jobs) on one machine at once: neither sees the other's cluster.

Two `desched run` start together with the same tool cache and $TMPDIR (as two jobs of one
CI runner) and their own evidence folders. Each reaps killed runs' clusters as it starts
while the other's is being created: a reaper that took a live run's cluster for a dead
one's would fail that run. Both must pass, each with its own cluster, neither reaping the
other's, each evidence folder holding only its own run, and nothing left after both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_signal_matrix import _assert_nothing_left, run_cmd  # noqa: F401

pytestmark = pytest.mark.desched_selftest


def test_two_runs_at_once_keep_to_their_own(run_cmd, tmp_path: Path) -> None:  # noqa: F811
    arts = [tmp_path / "art-a", tmp_path / "art-b"]
    cmds = [run_cmd("run", "positive", "--artifacts", str(a)) for a in arts]
    for cmd in cmds:
        cmd.wait(timeout=600)
    for cmd in cmds:
        assert cmd.proc.returncode == 0, cmd.text()
    [a], [b] = (cmd.clusters() for cmd in cmds)
    assert a != b
    for cmd, other in ((cmds[0], b), (cmds[1], a)):
        assert not any("reaping" in line and other in line for line in cmd.err), cmd.text()
        assert f"embedded cluster {other}" not in cmd.text()
        _assert_nothing_left(cmd)
    for art, other in ((arts[0], b), (arts[1], a)):
        assert (art / "run-summary.json").is_file()
        named = [
            p for p in art.rglob("*") if p.is_file() and other in p.read_text(errors="replace")
        ]
        assert not named, f"{art} names the other run's cluster {other}: {named}"
