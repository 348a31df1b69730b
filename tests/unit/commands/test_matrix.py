"""`desched matrix` as a command: bad input is one line and exit 2 before anything (no run
folder left), the releases are arguments (`--release` stays the Helm release's name), the
matrix's exit code is the command's, and -o picks the form."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_desched import cli
from pytest_desched.canary import matrix as engine
from pytest_desched.canary.matrix_report import NOT_RUN, Cell, Matrix, Row
from pytest_desched.commands.matrix import command_line


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for key in list(os.environ):
        if key.startswith("DESCHED_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "needs at least one RELEASE"),
        (["version:v0.35"], "release 'version:v0.35': 'v0.35' is not a Go module tag"),
        (["pinned", "--chart", "v0.35.1=x.tgz"], "--chart 'v0.35.1=x.tgz': write RELEASE=CHART"),
        (["pinned", "--experiment", "nodefit[x]"], "variant 'x' not in"),
        (["pinned", "--values", "missing.yaml"], "--values missing.yaml: no such file"),
        (["pinned", "--workers", "1"], "--workers / DESCHED_WORKERS must be an integer >= 2"),
        (["pinned", "--kubernetes", "v1.31.0"], "--kubernetes v1.31.0: not served here"),
        (
            ["pinned", "--kubernetes", "v1.37.2", "--kubernetes", "1.37.2"],
            "--kubernetes: a version is given twice",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(
    argv: list[str], said: str, clean: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["matrix", *argv, "--provider", "embedded"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
    assert not (clean / "desched-artifacts").exists()
    assert not (clean / "cache").exists()  # nothing built or fetched


def test_the_helm_release_name_keeps_its_flag_and_descheduler_is_not_taken(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = cli.parser().parse_args(["matrix", "pinned", "--release", "d2"])
    assert args.releases == ["pinned"] and getattr(args, "--desched-release") == "d2"
    with pytest.raises(SystemExit) as ei:
        cli.parser().parse_args(["matrix", "pinned", "--descheduler", "v0.35.1"])
    assert ei.value.code == 2


def test_command_line_is_the_one_typed() -> None:
    typed = ["version:v0.35.1", "pinned", "--chart", "version:v0.35.1=/a b/c.tgz"]
    typed += ["--experiment", "nodefit[runbook]", "--values", "v.yaml", "--provider", "embedded"]
    args = cli.parser().parse_args(["matrix", *typed])
    assert command_line(args) == (
        "desched matrix version:v0.35.1 pinned '--chart=version:v0.35.1=/a b/c.tgz' "
        "'--experiment=nodefit[runbook]' --values=v.yaml --provider=embedded"
    )


def _fake(exit_row_error: str | None) -> Any:
    def run(config: Any, releases: Any, charts: Any, **kw: Any) -> Matrix:
        cell = Cell("negative-nodefit[runbook]", "negative-nodefit", "pass", "evicted", 1)
        if exit_row_error:
            cell = Cell(cell.label, cell.experiment, NOT_RUN)
        row = Row("1-v0.36.0", "pinned", version="v0.36.0", cells=[cell], error=exit_row_error)
        return Matrix([row], [cell.label], kw["command"])

    return run


@pytest.mark.parametrize(("error", "code"), [(None, 0), ("kube-apiserver never became ready", 3)])
def test_the_matrix_exit_code_is_the_commands(
    error: str | None,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(engine, "run_matrix", _fake(error))
    assert cli.main(["matrix", "pinned", "--provider", "embedded", "-o", "json"]) == code
    doc = json.loads(capsys.readouterr().out)
    assert (
        doc["exit_code"] == code and doc["command"] == "desched matrix pinned --provider=embedded"
    )
    assert cli.main(["matrix", "pinned", "--provider", "embedded", "-o", "md"]) == code
    assert capsys.readouterr().out.startswith("# Release matrix")


def test_every_kubernetes_reaches_the_grid_in_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--kubernetes` more than once is a grid: each version reaches run_matrix (the last one
    alone did, as a single-valued option, and run_matrix was never given it)."""
    seen: dict[str, Any] = {}
    fake = _fake(None)

    def run(config: Any, releases: Any, charts: Any, **kw: Any) -> Matrix:
        seen.update(kw, config=config)
        return fake(config, releases, charts, **kw)

    monkeypatch.setattr(engine, "run_matrix", run)
    argv = ["matrix", "version:v0.35.1", "pinned", "--provider", "embedded"]
    argv += ["--kubernetes", "v1.35.4", "--kubernetes", "v1.36.3", "--kubernetes", "1.37.2"]
    assert cli.main([*argv, "-o", "json"]) == 0
    assert seen["kubernetes"] == ["v1.35.4", "v1.36.3", "1.37.2"]
    assert seen["config"].kubernetes is None  # each cell sets its own; no run-wide version
    assert "--kubernetes=v1.35.4 --kubernetes=v1.36.3 --kubernetes=1.37.2" in seen["command"]
    capsys.readouterr()


def test_round_timeout_reaches_every_row_and_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--round-timeout: each row's rounds are stopped and read after it (a release that hangs
    at start, #1839, costs it per round); a bad value is one line, exit 2."""
    seen: dict[str, Any] = {}

    def run(config: Any, releases: Any, charts: Any, **kw: Any) -> Matrix:
        seen["timeout"] = config.round_timeout
        return _fake(None)(config, releases, charts, **kw)

    monkeypatch.setattr(engine, "run_matrix", run)
    argv = ["matrix", "pinned", "--round-timeout", "45", "--provider", "embedded", "-o", "json"]
    assert cli.main(argv) == 0
    assert seen["timeout"] == 45.0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "desched matrix pinned --round-timeout=45 --provider=embedded"
    with pytest.raises(SystemExit) as ei:
        cli.parser().parse_args(["matrix", "pinned", "--round-timeout", "-1"])
    assert ei.value.code == 2
