"""The `desched` command's conventions (issue 40): one exit-code table, `-o` takes a format
only, typos get a suggestion, bare `desched` is help and exit 2."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.errors import EXIT_CODES, EXIT_INTERNAL, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]


def test_docs_exit_code_table_is_errors_table() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text()
    rows = dict(re.findall(r"^\| `(\d+)` \| (.*) \|$", doc, re.M))
    assert {int(c): t for c, t in rows.items()} == EXIT_CODES


def test_internal_error_code_is_distinct() -> None:
    assert EXIT_INTERNAL == 70 and list(EXIT_CODES).count(EXIT_INTERNAL) == 1
    assert len(set(EXIT_CODES)) == len(EXIT_CODES)


def test_help_prints_the_table_and_each_subcommand_cites_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    for code in EXIT_CODES:
        assert f" {code} " in top
    assert "docs/cli.md#exit-codes" in top
    for sub in ("lint", "run", "replay", "snapshot", "fidelity"):
        with pytest.raises(SystemExit):
            cli.main([sub, "--help"])
        assert "70 an internal error" in " ".join(capsys.readouterr().out.split()), sub


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["lnt", "x.yaml"], "invalid choice: 'lnt' (choose from"),
        (["lint", "x.yaml", "--fial-on", "warning"], "did you mean --fail-on?"),
        (["lint", "x.yaml", "--fail-on", "warnin"], "did you mean 'warning'?"),
        (["lint", "x.yaml", "-o", "jsno"], "did you mean 'json'?"),
        (["run", "--cycels", "2"], "unrecognized arguments: --cycels; did you mean --cycles?"),
        (["replay", "--from-log", "l", "--rouns", "2"], "did you mean --rounds?"),
    ],
)
def test_a_typo_gets_the_nearest_spelling(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse on 3.11 has no suggest_on_error: commands.parser.Parser adds it (issue 40)."""
    with pytest.raises(SystemExit) as ei:
        cli.main(argv)
    assert ei.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err
    if argv[0] == "lnt":
        assert "did you mean 'lint'?" in err


def test_no_guess_when_nothing_is_near(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["lint", "x.yaml", "--zzzzzz"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzz" in err and "did you mean" not in err


def test_no_go_is_one_line_exit_3_and_no_empty_evidence_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`desched run` on a machine without Go: exit 3, one line, and the run folder it claimed
    is gone again (it left an empty one per attempt)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))
    for env in ("DESCHED_ARTIFACTS", "DESCHED_PROVIDER", "DESCHED_BIN"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "positive", "--provider", "embedded"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no `go` on PATH" in err and "--bin TOOL=PATH" in err
    assert not (tmp_path / "desched-artifacts").exists()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = cli.parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_option_has_help_and_no_default_none_noise() -> None:
    """`--exporter`, `--ages` and `down names` had no help; unset defaults printed
    '(default: None)' on ~50 options (issue 40)."""
    for name, p in _subparsers().items():
        for a in p._actions:
            where = f"desched {name} {'/'.join(a.option_strings) or a.dest}"
            assert a.help, f"{where}: no help"
            assert "(default: None)" not in a.help and "(default: False)" not in a.help, where


def test_pytest_help_has_no_default_none_noise(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    helps = [o.attrs()["help"] for o in config._parser.getgroup("desched").options]
    assert len(helps) > 15 and any("(default: auto)" in h for h in helps)
    for h in helps:
        assert "(default: None)" not in h and "(default: False)" not in h, h


def test_list_descriptions_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines[0].index("DESCRIPTION")
    assert max(len(line[start:]) for line in lines) <= 60  # was up to 230
