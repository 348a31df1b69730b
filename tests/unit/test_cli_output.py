"""The `desched` command as kubectl users expect it, without a cluster: `--version`, `list`,
`-o text|json|yaml|md` on every subcommand, each subcommand's own options, errors that name
the flag the user typed, and the renderer behind them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched import cli, render
from pytest_desched.config import OPTIONS, cli_flag, commands_of, respell
from pytest_desched.errors import ToolError
from pytest_desched.experiments import REGISTRY, VARIANTS, ExperimentResult
from pytest_desched.experiments.strategies import StrategyExperiment
from pytest_desched.tools.versions import load_versions

DESCHED_SCRIPT = Path(sys.executable).with_name("desched")
SUBCOMMANDS = (
    "version",
    "list",
    "tools",
    "up",
    "down",
    "run",
    "lint",
    "canary",
    "matrix",
    "snapshot",
    "replay",
    "init",
)
POLICY = Path(__file__).parents[2] / "manifests" / "policy-safe-rebalance.yaml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No DESCHED_* from the host; an empty cache dir."""
    for key in list(os.environ):
        if key.startswith("DESCHED_"):
            monkeypatch.delenv(key)
    cache = tmp_path / "cache"
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(cache))
    return cache


def _script(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DESCHED_SCRIPT), *argv], capture_output=True, text=True, timeout=60, check=False
    )


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ei:
        cli.main([*argv, "--help"])
    assert ei.value.code == 0
    return capsys.readouterr().out


# -- the installed entry point -----------------------------------------------------------------
def test_version_from_the_entry_point_names_every_pin() -> None:
    proc = _script("--version")
    assert proc.returncode == 0, proc.stderr
    v = load_versions()
    first, *rest = proc.stdout.splitlines()
    assert first.startswith("desched 0."), first
    pins = dict(line.split(None, 1) for line in rest[2:])  # after the header and its rule
    assert pins["descheduler"] == v.descheduler.version
    assert pins["descheduler_image"] == v.descheduler_image
    assert pins["kubernetes"] == v.kubernetes.version
    assert pins["kwok"] == v.kwok.version
    assert pins["etcd"] == v.etcd.version
    assert pins["helm"] == v.helm.version
    assert pins["chart"] == f"{v.chart_name}-{v.chart_version}"


def test_list_json_from_the_entry_point_is_the_registry() -> None:
    proc = _script("list", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)  # nothing but JSON on stdout
    # Test modules register experiments of their own (the README examples) in this process only.
    shipped = {n: c for n, c in REGISTRY.items() if c.__module__.startswith("pytest_desched.")}
    assert [r["name"] for r in rows] == list(shipped)
    by = {r["name"]: r for r in rows}
    for name in ("positive", "nodefit", "pdb"):
        assert by[name]["variants"] == list(VARIANTS)
        assert by[name]["strategies"] == ["RemovePodsViolatingNodeAffinity"]  # the runbook's
        assert by[name]["title"] == REGISTRY[name].title
    for name, cls in shipped.items():
        assert by[name]["description"], f"{name} has no one-line description"
        if issubclass(cls, StrategyExperiment):
            assert by[name]["strategies"] == [cls.strategy]
            assert by[name]["variants"] == ["own-policy"]


def test_version_subcommand_yaml_is_the_pins(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version", "-o", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["descheduler"] == load_versions().descheduler.version
    assert doc["helm"] == load_versions().helm.version


def test_list_text_and_md_are_tables(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split()[:3] == ["NAME", "VARIANTS", "STRATEGIES"]
    assert any(line.startswith("positive ") for line in text)
    assert cli.main(["list", "-o", "md"]) == 0
    md = capsys.readouterr().out.splitlines()
    assert md[0].startswith("| NAME") and set(md[1]) <= set("|-: ")
    assert len(md) == 2 + len(REGISTRY)
    assert not clean_env.exists()  # no tool resolved or built (it once built policycheck)


# -- -o on every subcommand ------------------------------------------------------------------
@pytest.mark.parametrize("sub", SUBCOMMANDS)
@pytest.mark.parametrize("fmt", render.FORMATS)
def test_every_subcommand_takes_each_output_format(sub: str, fmt: str) -> None:
    positional = {"lint": ["p.yaml"], "snapshot": ["--context", "c"]}.get(sub, [])
    args = cli.parser().parse_args([sub, *positional, "-o", fmt])
    assert args.output == fmt
    args = cli.parser().parse_args([sub, *positional, "--output", fmt])
    assert args.output == fmt


@pytest.mark.parametrize("sub", ["run", "list", "version", "down", "tools"])
def test_a_bad_format_is_a_usage_error(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        cli.parser().parse_args([sub, "-o", "xml"])
    assert ei.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "x.yaml", "-o", "jsno"],
        ["replay", "--from-log", "l", "-o", "jsno"],
        ["snapshot", "--context", "c", "-o", "jsno"],
    ],
)
def test_an_unknown_format_is_refused_where_o_once_took_a_file(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o jsno` was taken as a file name with a deprecation note (issue 40): now exit 2 with
    the valid formats, and the file flag named, as `desched list -o jsno` already did."""
    with pytest.raises(SystemExit) as ei:
        cli.parser().parse_args(argv)
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'jsno' (choose from text, json, yaml, md" in err
    assert "use --output-file jsno" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["canary", "--json"], "--json is retired; use -o json"),
        (["lint", "x.yaml", "--format", "sarif"], "--format is retired; use -o sarif"),
        (["replay", "--from-log", "l", "--format", "json"], "--format is retired; use -o json"),
        (["snapshot", "--context", "c", "-o", "snap.yaml"], "use --output-file snap.yaml"),
    ],
)
def test_retired_spellings_are_refused_naming_the_current_flag(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ei:
        cli.parser().parse_args(argv)
    assert ei.value.code == 2
    assert said in capsys.readouterr().err


def test_output_file_is_the_file_flag() -> None:
    a = cli.parser().parse_args(["lint", "x.yaml", "-o", "sarif", "--output-file", "r.sarif"])
    assert (a.output, a.output_file) == ("sarif", "r.sarif")


def test_run_json_is_the_only_thing_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pytest_desched.session

    class Session:
        failed = False

        def __init__(self, config: Any, report: Callable[[str], None]) -> None:
            report("progress goes to stderr")

        def __enter__(self) -> Session:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def run(self, name: str, variant: str | None, on_record: Any) -> ExperimentResult:
            outcome = "pass" if name == "positive" else "fail"
            return ExperimentResult(REGISTRY[name].title, "runbook", outcome=outcome, message="x")  # type: ignore[arg-type]

    monkeypatch.setattr(pytest_desched.session, "DeschedSession", Session)
    art = tmp_path / "art"
    code = cli.main(["run", "positive", "pdb", "--artifacts", str(art), "-o", "json"])
    o, err = capsys.readouterr()
    assert code == 1
    doc = json.loads(o)
    assert [(e["name"], e["outcome"]) for e in doc["experiments"]] == [
        (REGISTRY["positive"].title, "pass"),
        (REGISTRY["pdb"].title, "fail"),
    ]
    assert doc["failed"] == ["pdb[runbook]"]
    assert doc["artifacts"] == str(art)
    assert "progress goes to stderr" in err


def test_down_json_lists_kept_clusters(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    owners = clean_env / "clusters" / "owners"
    owners.mkdir(parents=True)
    rec = {"pid": 1, "start": "x", "created": 0, "keep": True}
    (owners / "desched-kept-a.json").write_text(json.dumps(rec))
    assert cli.main(["down", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"kept": ["desched-kept-a"]}
    assert cli.main(["down", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {"kept": ["desched-kept-a"]}


@pytest.mark.policycheck
def test_lint_json_yaml_md_and_output_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = os.environ.pop("DESCHED_CACHE_DIR")  # the shared cache: policycheck is built there
    try:
        assert cli.main(["lint", str(POLICY), "-o", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        rules = [f["rule"] for f in doc["findings"]]
        assert "DL012" in rules  # descheduler#1882 on the runbook's policy
        assert cli.main(["lint", str(POLICY), "-o", "yaml"]) == 0
        assert yaml.safe_load(capsys.readouterr().out) == doc
        assert cli.main(["lint", str(POLICY), "-o", "md"]) == 0
        md = capsys.readouterr().out
        assert md.startswith("| FILE") and "| DL012 " in md
        dest = tmp_path / "lint.json"
        assert cli.main(["lint", str(POLICY), "-o", "json", "--output-file", str(dest)]) == 0
        assert json.loads(dest.read_text()) == doc
        assert capsys.readouterr().out == ""
    finally:
        os.environ["DESCHED_CACHE_DIR"] = cache


# -- each subcommand shows its own options ---------------------------------------------------
def test_cluster_options_only_where_a_cluster_starts(capsys: pytest.CaptureFixture[str]) -> None:
    for sub in ("lint", "list", "version", "down", "tools", "snapshot"):
        out = _help(capsys, sub)
        for flag in ("--provider", "--workers", "--keep", "--candidate-chart", "--artifacts"):
            assert flag not in out, f"{flag} on `desched {sub} --help`"
    run = _help(capsys, "run")
    assert "cluster options:" in run and "evidence options:" in run
    assert "--candidate" not in run  # canary-only
    canary = _help(capsys, "canary")
    assert "candidate options:" in canary and "--candidate-chart" in canary


def test_every_option_is_on_some_subcommand_and_the_table_is_honest() -> None:
    subs = cli.parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for flag, _, _ in OPTIONS:
        for sub in commands_of(flag):
            assert cli_flag(flag) in subs[sub]._option_string_actions, (flag, sub)


# -- errors name the flag the user typed -------------------------------------------------------
def test_respell_maps_only_known_plugin_flags() -> None:
    msg = "--desched-workers must be >= 2; see --desched-nosuch and --desched-bin TOOL=PATH"
    got = respell(msg, lambda f: "--" + f.removeprefix("--desched-"))
    assert got == "--workers must be >= 2; see --desched-nosuch and --bin TOOL=PATH"


@pytest.mark.parametrize(
    ("sub", "argv", "named", "not_named"),
    [
        ("lint", ["lint", "p.yaml"], "--bin TOOL=PATH", "--desched-bin"),
        ("down", ["down"], "DESCHED_BIN", "--bin"),  # down takes no --bin: the env var
        ("run", ["run"], "--bin TOOL=PATH", "--desched-bin"),
    ],
)
def test_a_deep_error_names_the_spelling_of_the_subcommand(
    sub: str,
    argv: list[str],
    named: str,
    not_named: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The toolchain's "no `go` on PATH" error says `--desched-bin`; each front end says it
    its own way, and never with a flag the subcommand rejects."""

    def boom(args: argparse.Namespace) -> int:
        raise ToolError("policycheck: not cached and no `go` on PATH; pass --desched-bin TOOL=PATH")

    monkeypatch.setattr(f"pytest_desched.commands.{sub}.cmd_{sub}", boom)
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert named in err and not_named not in err, err


def test_lint_without_go_suggests_a_flag_lint_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `desched lint` with an empty cache and no Go said `--desched-bin`, which
    lint rejects; now lint takes `--bin` (policycheck=PATH) and the error names it."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no go, no policycheck
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.read_text())
    assert cli.main(["lint", str(policy)]) == 3
    err = capsys.readouterr().err
    assert "no `go` on PATH" in err
    assert "--bin TOOL=PATH" in err and "--desched-" not in err
    with pytest.raises(SystemExit):  # and the parser does take it
        cli.main(["lint", str(policy), "--bin", "policycheck=/nonexistent", "--help"])


def test_config_errors_name_the_cli_flag_and_the_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["up", "--namespace", "Bad_NS", "--workers", "3"]) == 2
    err = capsys.readouterr().err
    assert "--namespace / DESCHED_NAMESPACE" in err and "--desched-" not in err
    monkeypatch.setenv("DESCHED_WORKERS", "one")
    assert cli.main(["run", "--artifacts", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "--workers / DESCHED_WORKERS must be an integer >= 2, got 'one'" in err


def test_tools_unknown_name_exits_2_before_any_build(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `desched tools nosuch` died with a KeyError traceback (after resolving the
    names before it); every name is now checked first."""
    assert cli.main(["tools", "kubectl", "nosuch", "-o", "json"]) == 2
    o, err = capsys.readouterr()
    assert "unknown tool(s) ['nosuch']" in err and "'kubectl'" in err
    assert o == ""
    assert not (clean_env / "bin").exists()  # kubectl was not built or resolved first
