"""config.py: one option name for the release everywhere (`--descheduler`, plugin
`--desched-descheduler`, env `DESCHED_DESCHEDULER`); the old `--descheduler-version`
spellings still work for this release, with a note."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched import cli, config
from pytest_desched.commands import tools
from pytest_desched.config import build_config, config_from_args


@pytest.fixture(autouse=True)
def fresh_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_NOTED", set())
    monkeypatch.delenv("DESCHED_DESCHEDULER", raising=False)
    monkeypatch.delenv("DESCHED_DESCHEDULER_VERSION", raising=False)


def test_new_name_takes_the_release_without_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_config({"--desched-descheduler": "v0.35.1"}, tmp_path).descheduler_version == (
        "v0.35.1"
    )
    assert "deprecated" not in capsys.readouterr().err


def test_old_flag_still_works_with_a_note_and_the_new_one_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = {"--desched-descheduler-version": "v0.35.1"}
    assert build_config(old, tmp_path).descheduler_version == "v0.35.1"
    err = capsys.readouterr().err
    assert "--desched-descheduler-version is deprecated; use --desched-descheduler" in err
    both = {**old, "--desched-descheduler": "v0.36.0"}
    assert build_config(both, tmp_path).descheduler_version == "v0.36.0"


def test_old_environment_variable_still_works_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DESCHED_DESCHEDULER_VERSION", "v0.35.1")
    assert build_config({}, tmp_path).descheduler_version == "v0.35.1"
    assert "DESCHED_DESCHEDULER_VERSION is deprecated; use DESCHED_DESCHEDULER" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("DESCHED_DESCHEDULER", "v0.36.0")
    assert build_config({}, tmp_path).descheduler_version == "v0.36.0"


@pytest.mark.parametrize("command", ["run", "up", "canary", "fidelity"])
def test_every_command_takes_descheduler_and_the_old_spelling(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # `up` claims ./desched-artifacts
    ap = cli.parser()
    art = ["--artifacts", str(tmp_path / "a")] if command != "up" else []
    args = ap.parse_args([command, "--descheduler", "v0.35.1", *art])
    assert config_from_args(args).descheduler_version == "v0.35.1"
    args = ap.parse_args([command, "--descheduler-version", "v0.35.1", *art])
    assert config_from_args(args).descheduler_version == "v0.35.1"
    assert "--desched-descheduler-version is deprecated" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["lint", "replay", "tools"])
def test_the_other_commands_name_it_descheduler_too(command: str) -> None:
    assert (
        "--descheduler" in cli.parser()._subparsers._group_actions[0].choices[command].format_help()
    )  # type: ignore[union-attr]


def test_tools_old_spelling_still_works_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.parser().parse_args(["tools", "--descheduler-version", "v0.35.1"])
    assert tools._old_version(args) == "v0.35.1"
    assert "--descheduler-version is deprecated; use --descheduler" in capsys.readouterr().err
    args = cli.parser().parse_args(["tools", "--descheduler", "v0.35.1"])
    assert tools._old_version(args) is None and args.descheduler == "v0.35.1"
