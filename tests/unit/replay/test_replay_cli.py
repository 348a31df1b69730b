"""`desched snapshot` / `desched replay` wiring: bad input refused before anything runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.cli import add_parsers
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "descheduler-v0.36.0"


def _parse(*argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="desched")
    add_parsers(ap.add_subparsers(dest="command", required=True))
    return ap.parse_args(list(argv))


def test_replay_from_a_log_needs_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse("replay", "--from-log", str(DATA / "pdb-429.log"), "-o", "json")
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == "log"
    assert sum(r["fates"][0]["status_code"] == 429 for r in out["rows"]) == 3


def test_replay_needs_exactly_one_source(tmp_path: Path) -> None:
    args = _parse("replay")
    with pytest.raises(ConfigError, match="exactly one"):
        args.func(args)
    args = _parse("replay", str(tmp_path / "snap.yaml"), "--from-log", str(DATA / "pdb-429.log"))
    with pytest.raises(ConfigError, match="exactly one"):
        args.func(args)


def test_replay_of_a_missing_snapshot_is_bad_input(tmp_path: Path) -> None:
    from pytest_desched.replay.run import check_inputs

    with pytest.raises(ConfigError, match="no such file"):
        check_inputs(tmp_path / "snap.yaml", None, None, 1, None)


def test_replay_rounds_and_log_are_checked_first(tmp_path: Path) -> None:
    from pytest_desched.replay.gen.incidents import label_move
    from pytest_desched.replay.run import check_inputs

    path = label_move().snapshot.write(tmp_path / "snap.yaml")
    with pytest.raises(ConfigError, match="rounds 0: out of range"):
        check_inputs(path, None, None, 0, None)
    with pytest.raises(ConfigError, match="--log"):
        check_inputs(path, None, None, 1, tmp_path / "nope.log")


def test_snapshot_requires_context_and_output() -> None:
    with pytest.raises(SystemExit):
        _parse("snapshot", "-o", "x.yaml")
    args = _parse("snapshot", "--context", "prod")
    with pytest.raises(ConfigError, match="needs --output-file FILE"):
        args.func(args)


def test_snapshot_without_a_kubeconfig_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    args = _parse(
        "snapshot",
        "--context",
        "prod",
        "--exporter",
        "client",
        "--output-file",
        str(tmp_path / "s"),
    )
    with pytest.raises(ConfigError, match="never read implicitly"):
        args.func(args)
    assert not (tmp_path / "s").exists()
