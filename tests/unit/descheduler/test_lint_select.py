"""`desched lint` rule selection: --select/--ignore, [tool.desched.lint] in pyproject.toml,
inline `# desched: ignore[CODE] reason`, --list-rules, SARIF helpUri."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_desched.cli import main as cli_main
from pytest_desched.descheduler.policy.lint import Finding
from pytest_desched.descheduler.policy.lint_output import RULES, render_sarif
from pytest_desched.descheduler.policy.lint_select import (
    apply_inline,
    list_rules,
    parse_codes,
    selection,
)
from pytest_desched.errors import ConfigError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "lint.md"


def finding(rule: str, file: str, line: int | None) -> Finding:
    return Finding(rule, RULES[rule].severity, file, "p", "m", "f", line)


def test_unknown_code_names_it_and_the_nearest() -> None:
    with pytest.raises(
        ConfigError, match=r"--select: unknown lint rule 'DL07'; did you mean DL007"
    ):
        parse_codes("DL009,DL07", "--select")
    with pytest.raises(ConfigError, match=r"'NOPE'; did you mean D[A-Z]\d{3}"):
        parse_codes(["NOPE"], "x")


def test_cli_refuses_an_unknown_code_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["lint", "missing.yaml", "--ignore", "DL0099"]) == 2
    assert "'DL0099'; did you mean DL009?" in capsys.readouterr().err


def test_select_and_ignore_from_the_command_line(tmp_path: Path) -> None:
    s = selection("DL007,DL009", "DL009", tmp_path)
    kept = s.apply([finding(r, "a", 1) for r in ("DL007", "DL009", "DL011")])
    assert [f.rule for f in kept] == ["DL007"]
    assert selection(None, None, tmp_path).keeps("DL011")  # no config: every rule


def test_config_file_and_command_line_override(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.desched.lint]\nignore = ["DL011"]\n')
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    assert not selection(None, None, sub).keeps("DL011")  # found above the working directory
    assert selection(None, "DL007", sub).keeps("DL011")  # the command line replaces the file's


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('ignore = ["DL0111"]', "unknown lint rule 'DL0111'; did you mean DL011"),
        ("ignroe = []", "unknown key 'ignroe'; did you mean 'ignore'"),
        ('ignore = "DL011"', "ignore must be a list"),
    ],
)
def test_config_file_errors(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.desched.lint]\n{body}\n")
    with pytest.raises(ConfigError, match=message) as err:
        selection(None, None, tmp_path)
    assert "pyproject.toml [tool.desched.lint]" in str(err.value)


def test_inline_ignore_with_reason_silences_that_finding_only(tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    values.write_text("a: 1  # desched: ignore[DL009] capped by the PDB instead\nb: 2\n")
    found = [finding("DL009", str(values), 1), finding("DL011", str(values), 1)]
    found.append(finding("DL009", str(values), 2))
    kept = apply_inline(found, [str(values)])
    assert [(f.rule, f.line) for f in kept] == [("DL011", 1), ("DL009", 2)]


@pytest.mark.parametrize(
    ("comment", "what"),
    [("# desched: ignore[DL009]", "no reason"), ("# desched: ignore[DL09] why", "unknown")],
)
def test_inline_ignore_without_reason_is_refused(tmp_path: Path, comment: str, what: str) -> None:
    values = tmp_path / "v.yaml"
    values.write_text(f"a: 1  {comment}\n")
    kept = apply_inline([finding("DL009", str(values), 1)], [str(values)])
    assert [f.rule for f in kept] == ["DL009", "DL020"]  # the finding stays, the comment reported
    assert what in kept[1].message and kept[1].line == 1
    # reported even when no finding is on that line
    assert [f.rule for f in apply_inline([], [str(values)])] == ["DL020"]


def test_list_rules_has_every_rule_with_a_link_the_docs_anchor() -> None:
    rows = json.loads(list_rules("json"))
    assert [r["code"] for r in rows] == list(RULES)
    docs = DOCS.read_text()
    for r in rows:
        anchor = r["help"].split("#")[1]
        assert anchor == r["code"].lower() and f'<a id="{anchor}"></a>' in docs, r["code"]
    text = list_rules("text")
    assert all(code in text for code in RULES)


def test_list_rules_needs_no_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["lint", "--list-rules"]) == 0
    assert "DL020" in capsys.readouterr().out


def test_sarif_rules_carry_help_uri() -> None:
    rules = json.loads(render_sarif([], "v0"))["runs"][0]["tool"]["driver"]["rules"]
    assert all(r["helpUri"].endswith("#" + r["id"].lower()) for r in rules)


@pytest.mark.policycheck
def test_real_lint_of_values_honours_inline_ignore_and_select(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pinned chart and policy checker: the findings on line 1 are silenced by the comment
    with a reason; --select keeps one rule of the rest."""
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: the command line alone
    values = tmp_path / "caps.yaml"
    values.write_text(
        "deschedulerPolicy:  # desched: ignore[DL009,DL010] PDBs cap every workload\n"
        "  maxNoOfPodsToEvictPerNode: 1\n  maxNoOfPodsToEvictTotal: 1\n"
    )
    assert cli_main(["lint", str(values), "-o", "json"]) == 0
    rules = [(f["rule"], f["line"]) for f in json.loads(capsys.readouterr().out)["findings"]]
    assert rules and not [r for r in rules if r[1] == 1], rules
    assert cli_main(["lint", str(values), "-o", "json", "--select", "DL011"]) == 0
    rules = [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]]
    assert rules == ["DL011"]
