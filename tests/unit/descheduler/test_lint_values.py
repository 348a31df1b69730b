"""`desched lint` lints what will run: Helm values rendered by the pinned chart, and the rules
the runbook is clear about, each shown to fire and to stay quiet on the runbook's own policy.

Every values case goes through the real pinned helm and chart (``helm template -f``) and the
real policycheck helper; nothing here merges values or fakes a render.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from pytest_desched import __version__
from pytest_desched.cli import main as cli_main
from pytest_desched.descheduler.policy.checker import checker_for
from pytest_desched.descheduler.policy.lint import (
    Finding,
    go_seconds,
    lint_files,
    lint_targets,
    load_targets,
    runbook_numbers,
)
from pytest_desched.descheduler.policy.lint_output import render_sarif, verdict
from pytest_desched.tools.resources import manifest_path

pytestmark = pytest.mark.policycheck

RUNBOOK = manifest_path("policy-safe-rebalance.yaml")
CAPS_ONLY = "deschedulerPolicy:\n  maxNoOfPodsToEvictPerNode: 1\n  maxNoOfPodsToEvictTotal: 1\n"
RECKLESS = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: reckless
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: false
      minPodAge: 10m
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: 60
  plugins:
    deschedule:
      enabled: [PodLifeTime]
"""
NEW_RULES = {"DL014", "DL015", "DL016", "DL017"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def by_rule(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


# -- values are linted as the chart renders them -------------------------------------------


def test_caps_only_values_lint_as_the_chart_renders_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = write(tmp_path, "caps.yaml", CAPS_ONLY)
    rc = cli_main(["lint", str(values)])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0  # warnings only, and --fail-on error is the default
    text = "\n".join(out)
    assert "DL007" not in text  # the chart's default profile runs: not "nothing enabled"
    will_run = next(line for line in out if " DL019 " in line)
    assert will_run.startswith(f"{values} (chart default): note DL019 will-run:")
    assert "LowNodeUtilization" in will_run and "RemoveDuplicates" in will_run
    lowered = next(line for line in out if " DL008 " in line)
    assert lowered.startswith(f"{values} (chart default): warning DL008")
    assert "PodsWithLocalStorage" in lowered
    fix = out[out.index(lowered) + 1]  # how to change a default the user never wrote
    assert "set deschedulerPolicy.profiles in your values to replace it" in fix
    # The caps the file sets are not reported; the missing one is, at the file's own block.
    caps = [line for line in out if " DL009 " in line]
    assert caps == [
        f"{values}:1: warning DL009 no-eviction-cap: "
        "deschedulerPolicy.maxNoOfPodsToEvictPerNamespace: no maxNoOfPodsToEvictPerNamespace: "
        "one round may evict without bound per namespace"
    ]
    assert out[-1].startswith("SAFE (") and out[-1].endswith("below --fail-on error)")
    assert cli_main(["lint", str(values), "--fail-on", "warning"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("UNSAFE: ")
    # The old reading (the deschedulerPolicy block alone) says the opposite: nothing runs.
    block = yaml.safe_load(CAPS_ONLY)["deschedulerPolicy"]
    alone = write(
        tmp_path,
        "block.yaml",
        yaml.safe_dump(
            {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **block}
        ),
    )
    assert "DL007" in {f.rule for f in lint_files([alone])}


def test_values_files_are_coalesced_by_helm_in_helms_order(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "deschedulerPolicy:\n  maxNoOfPodsToEvictTotal: 2\n")
    runbook = yaml.safe_load(RUNBOOK.read_text())
    profiles = runbook["profiles"]
    profiles[0]["pluginConfig"][0]["args"]["nodeFit"] = False
    b = write(
        tmp_path,
        "b.yaml",
        yaml.safe_dump(
            {"deschedulerPolicy": {"maxNoOfPodsToEvictPerNode": 1, "profiles": profiles}},
            sort_keys=False,
        ),
    )
    found = by_rule(lint_files([], values=[a, b]))
    # Each file sets one cap; only the render of both has both, so only PerNamespace is missing.
    assert [f.path for f in found["DL009"]] == ["deschedulerPolicy.maxNoOfPodsToEvictPerNamespace"]
    [fit] = found["DL015"]  # nodeFit off comes from b.yaml, at its own line
    assert (fit.file, fit.origin) == (str(b), "")
    assert b.read_text().splitlines()[fit.line - 1].strip() == "nodeFit: false"
    assert "DL008" not in found  # b.yaml's profiles replace the chart's list (helm, not Python)
    # The later file wins: a third file restoring nodeFit clears the finding.
    profiles[0]["pluginConfig"][0]["args"]["nodeFit"] = True
    c = write(tmp_path, "c.yaml", yaml.safe_dump({"deschedulerPolicy": {"profiles": profiles}}))
    assert "DL015" not in by_rule(lint_files([], values=[a, b, c]))


def test_another_chart_tree_is_rendered_with_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_desched.descheduler.chart_source import obtain_chart
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain()
    with tarfile.open(obtain_chart(tc, tc.versions).path) as tf:
        tf.extractall(tmp_path / "tree", filter="data")
    chart = tmp_path / "tree" / "descheduler"
    defaults = chart / "values.yaml"
    doc = yaml.safe_load(defaults.read_text())
    evictor = doc["deschedulerPolicy"]["profiles"][0]["pluginConfig"][0]["args"]
    del evictor["podProtections"]["defaultDisabled"]  # this tree protects local storage
    defaults.write_text(yaml.safe_dump(doc, sort_keys=False))
    values = write(tmp_path, "caps.yaml", CAPS_ONLY)
    assert cli_main(["lint", str(values)]) == 0
    assert " DL008 " in capsys.readouterr().out  # the pinned chart lowers the protection
    assert cli_main(["lint", str(values), "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    assert " DL008 " not in out and " DL019 " in out


def test_values_that_turn_the_first_install_flags_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    caps = write(tmp_path, "caps.yaml", CAPS_ONLY)
    off = write(tmp_path, "off.yaml", "suspend: false\ncmdOptions:\n  dry-run: false\n  v: 3\n")
    on = write(tmp_path, "on.yaml", "suspend: true\ncmdOptions:\n  dry-run: true\n")
    assert cli_main(["lint", "-f", str(caps), "-f", str(off)]) == 1
    out = capsys.readouterr().out
    assert f"{off}:1: error DL018 safety-flag-off: suspend: false turns it off" in out
    assert f"{off}:3: error DL018 safety-flag-off: cmdOptions.dry-run: false turns it off" in out
    assert cli_main(["lint", "-f", str(caps), "-f", str(off), "-f", str(on)]) == 0  # last wins
    assert "DL018" not in capsys.readouterr().out


def test_a_values_key_the_chart_never_reads_is_dl021(tmp_path: Path) -> None:
    """Helm ignores a key no template reads: a typo of cmdOptions is a warning at its line with
    the nearest key; a key commented out of the chart's values.yaml but read by a template
    (startingDeadlineSeconds) is not."""
    values = write(
        tmp_path,
        "typo.yaml",
        CAPS_ONLY + "cmdOption:\n  v: 4\nstartingDeadlineSeconds: 100\nglobal: {}\n",
    )
    found = by_rule(lint_files([values]))
    [unread] = found["DL021"]
    assert (unread.path, unread.line, unread.severity) == ("cmdOption", 4, "warning")
    assert unread.fix == 'did you mean "cmdOptions"? rename it'
    assert "DL021" not in by_rule(lint_files([write(tmp_path, "caps.yaml", CAPS_ONLY)]))


# -- the runbook's rules: each fires, and stays quiet on the runbook's own policy -----------


def test_runbook_policy_triggers_none_of_the_new_rules() -> None:
    rules = {f.rule for f in lint_files([RUNBOOK])}
    assert rules == {"DL012"} and not rules & NEW_RULES


def test_reckless_policy_fires_each_rule_and_fails_on_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = write(tmp_path, "reckless.yaml", RECKLESS)
    found = by_rule(lint_files([p]))
    assert {"DL009", "DL014", "DL015", "DL016"} <= set(found)
    assert [f.path for f in found["DL009"]] == [
        "maxNoOfPodsToEvictPerNode",
        "maxNoOfPodsToEvictPerNamespace",
        "maxNoOfPodsToEvictTotal",
    ]
    assert "PodLifeTime may evict any pod in any namespace" in found["DL014"][0].message
    assert found["DL016"][0].path == "profiles[0].pluginConfig[1].args.maxPodLifeTimeSeconds"
    assert found["DL016"][0].line == 12
    assert cli_main(["lint", str(p)]) == 0  # warnings pass the default gate...
    capsys.readouterr()
    assert cli_main(["lint", str(p), "--fail-on", "warning"]) == 1  # ...not this one
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"UNSAFE: {sum(len(v) for v in found.values())} findings"


@pytest.mark.parametrize(
    ("rule", "bad", "good"),
    [
        ("DL015", "nodeFit: false", "nodeFit: true"),
        ("DL016", "maxPodLifeTimeSeconds: 60", "maxPodLifeTimeSeconds: 600"),
        ("DL017", "minPodAge: 10m", "minPodAge: 9m59s"),
        (
            "DL014",
            "nodeFit: false",
            'nodeFit: false\n      labelSelector: {matchLabels: {"a": "b"}}',
        ),
        (
            "DL014",
            "maxPodLifeTimeSeconds: 60",
            "maxPodLifeTimeSeconds: 60\n      namespaces: {include: [lab]}",
        ),
    ],
)
def test_each_rule_fires_and_can_clear(tmp_path: Path, rule: str, bad: str, good: str) -> None:
    """Each case's `bad` text in the reckless policy decides the rule (DL017: the good side
    is the reckless one, 9m59s being under the runbook's 10m)."""
    checker = checker_for()
    fixed = RECKLESS.replace(bad, good)
    assert fixed != RECKLESS
    before = {
        f.rule for f in lint_targets(load_targets(write(tmp_path, "a.yaml", RECKLESS)), checker)
    }
    after = {f.rule for f in lint_targets(load_targets(write(tmp_path, "b.yaml", fixed)), checker)}
    if rule == "DL017":
        before, after = after, before
    assert rule in before and rule not in after


def test_runbook_numbers_come_from_the_runbook_policy() -> None:
    doc = yaml.safe_load(RUNBOOK.read_text())
    numbers = runbook_numbers()
    assert numbers.caps == {
        k: doc[k]
        for k in (
            "maxNoOfPodsToEvictPerNode",
            "maxNoOfPodsToEvictPerNamespace",
            "maxNoOfPodsToEvictTotal",
        )
    }
    assert numbers.caps["maxNoOfPodsToEvictTotal"] == 2 and numbers.min_pod_age_s == 600
    assert [go_seconds(d) for d in ("10m0s", "1h0m0s", "-5m0s", "1.5s", "500ms")] == [
        600,
        3600,
        -300,
        1.5,
        0.5,
    ]
    assert go_seconds("10 minutes") is None and go_seconds("") is None


# -- bad input: exit 2, one line naming the file (and line), nothing linted ----------------


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("missing.yaml", None, "missing.yaml: no such file"),
        ("broken.yaml", "deschedulerPolicy: [\n", "broken.yaml:2: not valid YAML"),
        (
            "refused.yaml",
            "kind: Deployment\nreplicas: 2\n",
            "refused.yaml: helm refuses these values (execution error at "
            "(descheduler/templates/deployment.yaml",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str | None, said: str
) -> None:
    good = write(tmp_path, "good.yaml", RUNBOOK.read_text())
    bad = tmp_path / name
    if text is not None:
        bad.write_text(text)
    for argv in (["lint", str(good), str(bad)], ["lint", "-f", str(bad)]):
        assert cli_main(argv) == 2
        cap = capsys.readouterr()
        assert cap.out == ""  # refused before any finding
        [line] = cap.err.strip().splitlines()
        assert line.startswith(f"[desched] error: {tmp_path}/{said}"), line
    if name == "refused.yaml":
        assert "leaderElection" in line  # helm's own reason


def test_missing_chart_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = write(tmp_path, "caps.yaml", CAPS_ONLY)
    assert cli_main(["lint", str(values), "--chart", str(tmp_path / "nochart")]) == 2
    assert "nochart: no such chart directory or .tgz" in capsys.readouterr().err


# -- output --------------------------------------------------------------------------------


def test_sarif_names_the_linter_and_the_chart_default(tmp_path: Path) -> None:
    values = write(tmp_path, "caps.yaml", CAPS_ONLY)
    findings = lint_files([values])
    run = json.loads(render_sarif(findings, "v0.36.0"))["runs"][0]
    assert run["tool"]["driver"]["version"] == __version__ != "v0.36.0"
    assert run["properties"]["deschedulerVersion"] == "v0.36.0"
    dl008 = next(r for r in run["results"] if r["ruleId"] == "DL008")
    assert dl008["properties"]["origin"] == "chart default"
    assert "region" not in dl008["locations"][0]["physicalLocation"]
    assert verdict(findings, "warning").startswith("UNSAFE: ")
    assert verdict([f for f in findings if f.severity == "note"], "warning") == "SAFE"


def test_values_that_render_no_policy_are_an_error(tmp_path: Path) -> None:
    """`profiles: null` deletes the chart's profiles (helm), leaving deschedulerPolicy empty:
    the chart renders no ConfigMap while its CronJob still mounts one."""
    for name, text in (
        ("null.yaml", "deschedulerPolicy: null\n"),
        ("noprof.yaml", "deschedulerPolicy:\n  profiles: null\n"),
    ):
        [f] = lint_files([write(tmp_path, name, text)])
        assert (f.rule, f.severity, f.line) == ("DL000", "error", 1)
        assert "renders no policy ConfigMap" in f.message
    kept = write(tmp_path, "kept.yaml", "deschedulerPolicy:\n  maxNoOfPodsToEvictTotal: 2\n")
    assert "DL000" not in {f.rule for f in lint_files([kept])}


# helm's reason as each Helm writes it (helm template of `image: a-string`, chart 0.36.0)
HELM4_ERROR = """Error: descheduler/templates/cronjob.yaml:105:32
  executing "descheduler/templates/cronjob.yaml" at <.Values.image.repository>:
    can't evaluate field repository in type interface {}

Use --debug flag to render out invalid YAML
"""
HELM3_ERROR = (
    'Error: template: descheduler/templates/cronjob.yaml:105:32: executing "descheduler/'
    "templates/cronjob.yaml\" at <.Values.image.repository>: can't evaluate field repository "
    "in type interface {}\n\nUse --debug flag to render out invalid YAML\n"
)


@pytest.mark.parametrize("said", [HELM4_ERROR, HELM3_ERROR], ids=["helm4", "helm3"])
def test_helms_reason_keeps_the_why_on_both_helms(said: str) -> None:
    from pytest_desched.descheduler.policy.values import helm_error

    reason = helm_error(said, 1)
    assert reason.endswith(
        "<.Values.image.repository>: can't evaluate field repository in type interface {}"
    )
    assert "cronjob.yaml:105:32" in reason and "--debug" not in reason
    assert helm_error("", 3) == "exit 3" and helm_error("no prefix\n", 1) == "no prefix"
