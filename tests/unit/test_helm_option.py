"""The Helm a run uses: `--desched-helm`, `DESCHED_HELM`, the ini key `desched_helm`, and `--helm`
on every `desched` subcommand that renders or installs (docs/helm.md). Nothing is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.config import CONFIG_COMMANDS, build_config, config_from_args
from pytest_desched.errors import ConfigError
from pytest_desched.tools.cache_key import cache_key
from pytest_desched.tools.toolchain import Toolchain


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DESCHED_HELM", raising=False)


def test_helm_4_by_default_then_ini_env_and_flag_in_that_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert build_config({}, tmp_path).helm == "4"
    assert build_config({}, tmp_path, ini={"--desched-helm": "3"}).helm == "3"
    monkeypatch.setenv("DESCHED_HELM", "3")
    assert build_config({}, tmp_path, ini={"--desched-helm": "4"}).helm == "3"
    assert build_config({"--desched-helm": "4"}, tmp_path).helm == "4"
    monkeypatch.setenv("DESCHED_HELM", "2")
    with pytest.raises(ConfigError, match=r"DESCHED_HELM='2': choose from \['4', '3'\]"):
        build_config({}, tmp_path)


@pytest.mark.parametrize("command", CONFIG_COMMANDS)
def test_every_configured_command_takes_helm(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `up` claims ./desched-artifacts
    art = ["--artifacts", str(tmp_path / "a")] if command not in ("up",) else []
    argv = [command, "--helm", "3", *art]
    if command == "replay":
        argv.insert(1, str(tmp_path / "snap.yaml"))
    if command == "matrix":
        argv.insert(1, "v0.36.0")
    args = cli.parser().parse_args(argv)
    assert config_from_args(args).helm == "3"


@pytest.mark.parametrize("command", ["lint", "tools"])
def test_lint_and_tools_take_helm_and_refuse_another_major(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.parser().parse_args([command, "--helm", "3"]).helm == "3"
    with pytest.raises(SystemExit) as exited:
        cli.parser().parse_args([command, "--helm", "2"])
    assert exited.value.code == 2 and "invalid choice: '2'" in capsys.readouterr().err


def test_the_ci_cache_key_follows_the_helm(tmp_path: Path) -> None:
    """A CI cache saved for Helm 4 is not restored for a Helm 3 job (and back)."""
    four, three = Toolchain(cache_dir=tmp_path), Toolchain(cache_dir=tmp_path, helm="3")
    k4 = cache_key(four.groups.values(), four.versions, "linux", "x86_64")
    k3 = cache_key(three.groups.values(), three.versions, "linux", "x86_64")
    assert k4 != k3 and k4.startswith("desched-tools-linux-x86_64-")
