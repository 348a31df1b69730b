"""SIGINT and SIGTERM at each moment of each `desched` command: nothing is left, and it says so.

Every point waits on something observable (a line on stderr, a folder appearing), sends the
signal the way it comes in real life (SIGINT to the whole process group, as a terminal's
Ctrl-C does; SIGTERM to the process alone, as `timeout` or a CI cancel does), then checks:
exit 130, no process naming the command's clusters, no cluster folder, owner record or
`up/run-*` folder (except a cluster `up` finished and kept), and the last line saying what
was verified. The time from the signal to the exit is recorded (`signal_to_exit_s`).

The commands run as subprocesses with this session's tool cache (nothing is rebuilt), each
with an empty $TMPDIR that must be empty again after (tests/e2e/commands.py).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_desched.tools.toolchain import Toolchain
from tests.e2e.commands import (
    STILL_CLEANING,
    Cmd,
    assert_nothing_left,
    assert_says_verified,
    cluster_processes,
    interrupt,
    round_running,
    up_dirs_of,
    wait_point,
)

# serial: the bounds here are wall-clock seconds, measured with no other test of the run
# beside them (tests/concurrency.py; other workers' clusters would stretch them)
pytestmark = [pytest.mark.desched_selftest, pytest.mark.serial]

# Issue 32: every command honours SIGTERM within 2 s (measured 0.02-0.9 s at load 5-9 on the
# 2-core VM). The one exception is a signal during the normal end-of-run cleanup: it is held
# back until that cleanup (the release's uninstall in the runbook's order, the report) ends.
SIGNAL_TO_EXIT_BOUND_S = 2.0
HELD_BACK_BOUND_S = 10.0  # measured 0.9-4.1 s at load 5-9


def _line(needle: str) -> Callable[[Cmd], bool]:
    return lambda c: c.said(needle) > 0


def _teardown_started(c: Cmd) -> bool:
    """close() says `cleaning up <cluster>` inside its shield, before anything is removed.

    (The HTML report is no such point: it is drawn beside the teardown and may be written
    last, after which the run exits 0 before a second signal.)
    """
    return any(line.startswith("[desched] cleaning up ") for line in c.err)


SIGS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}

# (command point, signal): each point with both signals where it is cheap (bring-up), one
# signal each where a point costs a whole cluster; the two kinds alternate across points.
UP_POINTS = {
    "bring-up": _line("starting embedded cluster"),
    "install": _line("chart render checked"),
}


@pytest.mark.parametrize(
    "point,sig",
    [
        ("bring-up", "SIGINT"),
        ("bring-up", "SIGTERM"),
        ("install", "SIGTERM"),
        ("install", "SIGINT"),
    ],
)
def test_up_interrupted_leaves_nothing(run_cmd, record_property, point: str, sig: str) -> None:
    cmd = run_cmd("up")
    wait_point(cmd, f"desched up's {point}", UP_POINTS[point])
    took = interrupt(cmd, SIGS[sig], record=record_property)
    assert_says_verified(cmd)
    assert_nothing_left(cmd)
    assert "kept embedded cluster" not in cmd.text()
    assert not cmd.out, "no export line for a cluster that is not there"
    assert took < SIGNAL_TO_EXIT_BOUND_S


def test_up_keeps_only_a_finished_cluster_and_down_removes_all_of_it(
    run_cmd, desched_toolchain: Toolchain
) -> None:
    cmd = run_cmd("up")
    cmd.wait(timeout=240)
    assert cmd.proc.returncode == 0, cmd.text()
    [name] = cmd.clusters()
    owner = desched_toolchain.cache_dir / "clusters" / "owners" / f"{name}.json"
    assert json.loads(owner.read_text())["keep"] is True
    assert cluster_processes(name)
    [up_dir] = up_dirs_of(desched_toolchain.cache_dir, cmd.proc.pid)
    down = run_cmd("down", name)
    down.wait(timeout=120)
    assert down.proc.returncode == 0, down.text()
    assert f"deleted embedded cluster {name} (0 processes, folder removed)" in down.text()
    assert not up_dir.exists()
    assert_nothing_left(cmd)


RUN_POINTS = {
    "bring-up": _line("starting embedded cluster"),
    "install": _line("chart render checked"),
    "round": round_running,
    "teardown": _teardown_started,
}


@pytest.mark.parametrize(
    "point,sig,second",
    [
        ("bring-up", "SIGTERM", False),
        ("install", "SIGINT", False),
        ("round", "SIGTERM", False),
        ("round", "SIGINT", True),  # Ctrl-C, then Ctrl-C again while it cleans up
        ("teardown", "SIGINT", True),  # the run ended; Ctrl-C twice during its own cleanup
    ],
)
def test_run_interrupted_leaves_nothing(
    run_cmd, tmp_path: Path, record_property, point: str, sig: str, second: bool
) -> None:
    cmd = run_cmd("run", "positive", "--artifacts", str(tmp_path / "art"))
    wait_point(cmd, f"desched run's {point}", RUN_POINTS[point])
    took = interrupt(cmd, SIGS[sig], second=second, record=record_property)
    assert_says_verified(cmd)
    assert_nothing_left(cmd)
    if second:  # at teardown the first signal too came during the (normal) cleanup
        assert cmd.said(STILL_CLEANING) == (2 if point == "teardown" else 1), cmd.text()
    assert took < (HELD_BACK_BOUND_S if point == "teardown" else SIGNAL_TO_EXIT_BOUND_S)


def test_canary_interrupted_stops_both_tracks(run_cmd, record_property) -> None:
    """SIGINT while both tracks install: the candidate's worker thread stops too, at once."""
    cmd = run_cmd(
        "canary", "--candidate", "version:v0.36.0", "--experiment", "positive", "--no-static"
    )
    wait_point(
        cmd,
        "both tracks' installs",
        lambda c: c.said("[baseline] chart render checked") and c.said("[candidate] chart render"),
    )
    took = interrupt(cmd, signal.SIGINT, record=record_property)
    assert len(cmd.clusters()) == 2, cmd.text()
    assert_says_verified(cmd)
    assert_nothing_left(cmd)
    assert took < SIGNAL_TO_EXIT_BOUND_S


def test_replay_interrupted_mid_round(run_cmd, tmp_path: Path, record_property) -> None:
    from pytest_desched.replay.gen.incidents import label_move

    snap = label_move().snapshot.write(tmp_path / "incident.yaml")
    cmd = run_cmd("replay", str(snap), "--output-file", str(tmp_path / "ledger.md"))
    wait_point(cmd, "the replay's round", round_running)
    took = interrupt(cmd, signal.SIGTERM, record=record_property)
    assert_says_verified(cmd)
    assert_nothing_left(cmd)
    assert not (tmp_path / "ledger.md").exists()
    assert took < SIGNAL_TO_EXIT_BOUND_S


def test_snapshot_interrupted_leaves_no_copy_of_the_kubeconfig(
    run_cmd, desched_cluster, tmp_path: Path, record_property
) -> None:
    """SIGINT while kwokctl exports: its temp folder (a kubeconfig copy) and -o are gone."""
    import yaml

    ctx = yaml.safe_load(desched_cluster.kubeconfig.read_text())["current-context"]
    out = tmp_path / "snap.yaml"
    cmd = run_cmd(
        "snapshot",
        "--context",
        ctx,
        "--kubeconfig",
        str(desched_cluster.kubeconfig),
        "--exporter",
        "kwokctl",
        "--output-file",
        str(out),
    )
    wait_point(cmd, "kwokctl's export folder", lambda c: any(c.tmp.glob("desched-snapshot-*")))
    took = interrupt(cmd, signal.SIGINT, record=record_property)
    assert cmd.proc.returncode == 130, cmd.text()
    assert cmd.err[-1].startswith("[desched] interrupted; "), cmd.text()
    assert not any(cmd.tmp.glob("desched-snapshot-*")), cmd.text()
    assert not out.exists(), "a half-written snapshot"
    assert took < SIGNAL_TO_EXIT_BOUND_S
