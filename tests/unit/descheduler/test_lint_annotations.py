"""`desched lint -o github|junit`: findings as GitHub workflow-command annotations (inline on
a pull request) and as a JUnit report, escaped as GitHub's toolkit escapes them, never carrying
a secret; the verdict and the exit code are the text output's."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_desched.cli import main as cli_main
from pytest_desched.descheduler.policy.lint import Finding
from pytest_desched.descheduler.policy.lint_output import (
    github_data,
    github_property,
    render_github,
    render_junit,
)

REPO = Path(__file__).resolve().parents[3]
RECKLESS = "examples/quickstart/reckless-values.yaml"
FAKE_TOKEN = "eyJhbGciOiJSUzI1NiJ9.ZmFrZS1wcm9tZXRoZXVzLXRva2Vu.c2lnbmF0dXJlLW5vdC1yZWFs"


def finding(**kw: object) -> Finding:
    base: dict[str, object] = {
        "rule": "DL009",
        "severity": "warning",
        "file": "values.yaml",
        "path": "deschedulerPolicy.maxNoOfPodsToEvictTotal",
        "message": "no cap",
        "fix": "set it",
        "line": 3,
    }
    return Finding(**(base | kw))  # type: ignore[arg-type]


def test_each_severity_is_its_workflow_command_and_a_line_is_optional() -> None:
    shown = render_github(
        [
            finding(rule="DL001", severity="error"),
            finding(),
            finding(rule="DL019", severity="note", line=None, origin="chart default"),
        ]
    ).splitlines()
    path = "deschedulerPolicy.maxNoOfPodsToEvictTotal"
    assert shown == [
        f"::error file=values.yaml,line=3,title=DL001 rejected-by-descheduler::{path}: no cap"
        "%0Afix: set it",
        f"::warning file=values.yaml,line=3,title=DL009 no-eviction-cap::{path}: no cap"
        "%0Afix: set it",
        f"::notice file=values.yaml,title=DL019 will-run::{path} (chart default): no cap"
        "%0Afix: set it",
    ]


def test_escaping_is_the_toolkits_and_no_value_can_start_a_command() -> None:
    assert github_data("100% a\r\nb: c, d") == "100%25 a%0D%0Ab: c, d"
    assert github_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    hostile = finding(
        file="dir,x:y/v%.yaml",
        message="bad\n::error file=forged.yaml::owned\x1b[2J",
    )
    (line,) = render_github([hostile]).splitlines()  # one finding, one line
    assert line.startswith("::warning file=dir%2Cx%3Ay/v%25.yaml,line=3,title=DL009 ")
    assert "%0A::error file=forged.yaml::owned\\x1b[2J%0Afix: set it" in line


def test_absolute_paths_are_made_relative_to_the_workspace(tmp_path: Path) -> None:
    inside, outside = str(tmp_path / "ci" / "v.yaml"), "/elsewhere/v.yaml"
    shown = render_github([finding(file=inside), finding(file=outside)], root=str(tmp_path))
    assert [ln.split(",")[0] for ln in shown.splitlines()] == [
        "::warning file=ci/v.yaml",
        "::warning file=/elsewhere/v.yaml",
    ]


@pytest.mark.policycheck
def test_the_quickstart_values_as_annotations(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's reckless values: one annotation a finding, at the line the text names."""
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    assert cli_main(["lint", "-f", RECKLESS, "-o", "text"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert cli_main(["lint", "-f", RECKLESS, "-o", "github"]) == 0  # warnings: the same gate
    got = capsys.readouterr()
    lines = got.out.splitlines()
    assert got.err.splitlines()[-1] == text[-1] == "SAFE (9 warning(s) below --fail-on error)"
    assert len(lines) == (len(text) - 2) // 2 == 10
    assert all(ln.startswith(("::warning file=", "::notice file=")) for ln in lines)
    assert (
        f"::warning file={RECKLESS},line=12,title=DL016 short-pod-lifetime::"
        "deschedulerPolicy.profiles[0].pluginConfig[1].args.maxPodLifeTimeSeconds: PodLifeTime "
        "evicts every pod older than 60s, under the runbook's minPodAge 10m: pods are evicted "
        "and replaced in a loop%0Afix: raise maxPodLifeTimeSeconds to at least 600"
    ) in lines
    assert (
        f"::notice file={RECKLESS},line=13,title=DL019 will-run::deschedulerPolicy.profiles[0]"
        ".plugins: with chart descheduler-0.36.0, profile 'everything' runs PodLifeTime"
        "%0Afix: check this is what you meant to run"
    ) in lines
    assert cli_main(["lint", "-f", RECKLESS, "-o", "github", "--fail-on", "warning"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "UNSAFE: 9 findings"


@pytest.mark.policycheck
def test_a_planted_token_never_reaches_an_annotation_or_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    Path("v.yaml").write_text(
        "deschedulerPolicy:\n"
        "  maxNoOfPodsToEvictPerNode: 1\n"
        "  maxNoOfPodsToEvictPerNamespace: 1\n"
        "  maxNoOfPodsToEvictTotal: 2\n"
        "podAnnotations:\n"
        f"  prometheus-token: {FAKE_TOKEN}\n"
    )
    assert cli_main(["lint", "-f", "v.yaml", "-o", "github"]) == 1  # DL023 is an error
    got = capsys.readouterr()
    got_out = got.out
    assert FAKE_TOKEN not in got.out + got.err
    assert (
        "::error file=v.yaml,line=6,title=DL023 prometheus-token-in-plain-text::"
        "podAnnotations.prometheus-token: <redacted> (a credential in plain text in the values,"
        " value not shown)"
    ) in got.out
    assert got.err.splitlines()[-1] == "UNSAFE: 1 finding"
    # the same findings written to files, in each format that takes one
    for fmt in ("sarif", "junit", "github"):
        assert cli_main(["lint", "-f", "v.yaml", "-o", fmt, "--output-file", f"r.{fmt}"]) == 1
        got = capsys.readouterr()
        assert got.out == "" and f"wrote r.{fmt}" in got.err
        assert FAKE_TOKEN not in Path(f"r.{fmt}").read_text()
    results = json.loads(Path("r.sarif").read_text())["runs"][0]["results"]
    assert [r["ruleId"] for r in results if r["level"] == "error"] == ["DL023"]
    assert Path("r.github").read_text() == got_out  # the file holds what stdout showed
    suite = ET.parse("r.junit").getroot()  # still XML once scrubbed
    assert (suite.get("tests"), suite.get("failures")) == (str(len(results)), "1")
    (failure,) = suite.findall("testcase/failure")
    assert failure.get("message", "").startswith("podAnnotations.prometheus-token: <redacted> ")


def test_junit_fails_what_the_gate_fails_and_passes_the_rest() -> None:
    found = [
        finding(rule="DL001", severity="error", message='token: "x" <b> & c'),
        finding(),
        finding(rule="DL019", severity="note", line=None),
    ]
    for fail_on, failures in (("error", 1), ("warning", 2)):
        suite = ET.fromstring(render_junit(found, "v0.36.0", fail_on))
        cases = suite.findall("testcase")
        assert (suite.get("tests"), suite.get("failures")) == ("3", str(failures))
        assert [c.find("failure") is not None for c in cases] == [True, fail_on == "warning", False]
        assert cases[0].get("name") == (
            "DL001 rejected-by-descheduler values.yaml:3 deschedulerPolicy.maxNoOfPodsToEvictTotal"
        )
    empty = ET.fromstring(render_junit([], "v0.36.0"))
    assert (empty.get("tests"), empty.get("failures")) == ("1", "0")
    verdict = empty.find("properties/property[@name='verdict']")
    assert verdict is not None and verdict.get("value") == "SAFE"


def test_list_rules_refuses_a_findings_only_format(capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("sarif", "github", "junit"):
        assert cli_main(["lint", "--list-rules", "-o", fmt]) == 2
        assert f"not -o {fmt}" in capsys.readouterr().err
