"""Issue 43: a `desched` run removes every temporary folder it made, on every exit path.

Each case points TMPDIR at an empty folder and runs a subcommand without a cluster: a
refusal (exit 2), a pass, an unexpected exception (exit 1), SIGTERM and SIGINT (a child
process, stopped while its work waits) and a kept cluster's folder (which stays).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_desched import cli, scratch
from pytest_desched.config import DeschedConfig

REPO = Path(__file__).resolve().parents[2]


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
    env = {**os.environ, "TMPDIR": str(tmpdir_env), "PYTHONPATH": str(REPO)}
    env["DESCHED_ARTIFACTS"] = str(tmp_path / "arts")
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITS],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the work waits (or the child died)
        assert line.strip() == "waiting", proc.communicate(timeout=60)
        made = _left(tmpdir_env)
        assert any(p.endswith("baseline") for p in made), made  # the folders were there
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == cli.EXIT_INTERRUPTED, err
    assert _left(tmpdir_env) == [], err


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
