"""Issue 43: a `desched` run removes every temporary folder it made, on every exit path.

Each case points TMPDIR at an empty folder and runs a subcommand without a cluster: a
refusal (exit 2), a pass, an unexpected exception (exit 1), SIGTERM and SIGINT (a child
process, stopped while its work waits), SIGKILL (the run's keeper removes its folders, and
only its own) and a kept cluster's folder (which stays).
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_desched import cli, scratch
from pytest_desched.config import DeschedConfig
from pytest_desched.kube import wait_for
from pytest_desched.providers.embedded.processes import command_line
from tests.commands import REPO, child_env, start, stop


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR (and tempfile's cached copy of it) pointed at an empty folder."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _left(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))


def test_a_refused_replay_leaves_no_temporary_folder(tmpdir_env: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli.main(["replay", str(bad)]) == cli.EXIT_USAGE
    assert _left(tmpdir_env) == []


def test_a_static_canary_that_passes_leaves_no_temporary_folder(
    tmpdir_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: $TMPDIR/desched-XXXXXXXX/{baseline,candidate}/ after every canary."""
    rc = cli.main(["canary", "--candidate", "version:v0.36.0", "--static-only"])
    assert rc == cli.EXIT_OK, capsys.readouterr().err
    assert _left(tmpdir_env) == []


def test_an_unexpected_exception_leaves_no_temporary_folder(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_desched.canary.engine as engine

    made: list[Path] = []

    def boom(config: DeschedConfig, *a: Any, **k: Any) -> None:
        made.append(config.run_dir)
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "run_canary", boom)
    assert cli.main(["canary", "--candidate", "version:v0.36.0"]) == cli.EXIT_INTERNAL
    assert made and made[0].is_relative_to(tmpdir_env)  # the run had made its folder
    assert _left(tmpdir_env) == []


# A child `desched canary --static-only` whose static comparison waits for a signal.
WAITS = """
import signal, sys
import pytest_desched.canary.engine as engine
def wait(*a, **k):
    print("waiting", flush=True)
    signal.pause()
engine.compare_statically = wait
from pytest_desched import cli
sys.exit(cli.main(["canary", "--candidate", "version:v0.36.0", "--static-only"]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_run_leaves_no_temporary_folder(
    tmpdir_env: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    env = child_env(tmpdir_env, PYTHONPATH=str(REPO), DESCHED_ARTIFACTS=str(tmp_path / "arts"))
    proc = start([sys.executable, "-c", WAITS], env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the work waits (or the child died)
        assert line.strip() == "waiting", proc.communicate(timeout=60)
        made = _left(tmpdir_env)
        assert any(p.endswith("baseline") for p in made), made  # the folders were there
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == cli.EXIT_INTERRUPTED, err
    assert _left(tmpdir_env) == [], err


# A child that makes scratch folders (one removed, one kept), says so, and waits to be killed.
MAKES = """
import signal
from pytest_desched import scratch
gone, kept = scratch.make(), scratch.make()
scratch.make(), scratch.make("desched-existing-")
(kept / "kubeconfig").write_text("")
scratch.keep(kept / "kubeconfig")
scratch.remove(gone)
print(kept.name, flush=True)
signal.pause()
"""


def _keeper_of(pid: int) -> psutil.Process:
    children = psutil.Process(pid).children()
    [keeper] = [c for c in children if "scratch.py" in " ".join(command_line(c))]
    return keeper


def test_a_sigkilled_runs_temporary_folders_go_with_it_and_nothing_else(tmpdir_env: Path) -> None:
    """SIGKILL runs no exit code: before, every folder the run made stayed in $TMPDIR. Its
    keeper removes what the run made and did not keep, and leaves another run's folder."""
    other = tmpdir_env / "desched-otherrun"  # another user's run in the same $TMPDIR
    (other / "baseline").mkdir(parents=True)
    proc = start([sys.executable, "-c", MAKES], child_env(tmpdir_env, PYTHONPATH=str(REPO)))
    try:
        assert proc.stdout is not None
        kept = proc.stdout.readline().strip()
        assert kept, proc.communicate(timeout=60)
        assert len(_left(tmpdir_env)) == 6, _left(tmpdir_env)  # 3 made + kept + other
        keeper = _keeper_of(proc.pid)
        t0 = time.monotonic()
        proc.kill()
        proc.wait(timeout=10)
        left = wait_for(
            "the keeper to remove the killed run's folders",
            lambda: _left(tmpdir_env),
            lambda seen: len(seen) == 4,
            timeout=5,
            max_interval=0.02,
        )
        print(f"SIGKILL -> its temporary folders removed in {time.monotonic() - t0:.2f}s")
    finally:
        stop(proc)
    assert left == sorted([kept, f"{kept}/kubeconfig", other.name, f"{other.name}/baseline"])
    keeper.wait(timeout=5)  # and the keeper itself ends


def test_a_run_that_ends_releases_its_keeper(tmpdir_env: Path) -> None:
    """A normal exit removes the folders itself and says `release`: the keeper ends at once,
    removing nothing (the kept folder stays)."""
    code = MAKES.replace("signal.pause()", "import sys; sys.stdin.readline()")
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=child_env(tmpdir_env, PYTHONPATH=str(REPO)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        kept = proc.stdout.readline().strip()
        keeper = _keeper_of(proc.pid)
        proc.communicate(input="\n", timeout=30)
        assert proc.returncode == 0
        keeper.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _left(tmpdir_env) == [kept, f"{kept}/kubeconfig"]


def test_the_keeper_removes_only_what_it_was_told_of(tmp_path: Path) -> None:
    made, gone, kept = (tmp_path / n for n in ("made", "gone", "kept"))
    for d in (made, gone, kept, tmp_path / "foreign"):
        d.mkdir()
    lines = [
        {"made": str(made)},
        {"made": str(gone)},
        {"gone": str(gone)},
        {"made": str(kept)},
        {"keep": str(kept / "kubeconfig")},
    ]
    stream = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines) + b"junk\n")
    assert scratch.keeper(stream) == [made]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign", "gone", "kept"]
    released = io.BytesIO(json.dumps({"made": str(kept)}).encode() + b'\n{"release": "release"}\n')
    assert scratch.keeper(released) == []


def test_a_kept_clusters_folder_stays_and_others_go(tmpdir_env: Path) -> None:
    before = scratch.made()
    kept, gone = scratch.make(), scratch.make()
    (kept / "desched-x.kubeconfig").write_text("")
    scratch.keep(kept / "desched-x.kubeconfig")
    assert scratch.remove_all(but=before) == []
    assert kept.is_dir() and not gone.exists()
    assert json.dumps(_left(tmpdir_env)) == json.dumps(
        [kept.name, f"{kept.name}/desched-x.kubeconfig"]
    )
