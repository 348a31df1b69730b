"""Known chart bugs in the canary's static comparison (canary/static/chart_bugs.py): chart
0.35.0's ClusterRole, which cannot list the PersistentVolumeClaims v0.35.0 lists at start
(descheduler#1839), and chart 0.35.1's, which grants them: in a v0.35.0 -> v0.35.1 canary
the widening is a rollback trigger named by #1839. The rules are those of the charts in
../shared/upstream (templates/clusterrole.yaml, default values)."""

from __future__ import annotations

from typing import Any

from pytest_desched.canary.static.chart_bugs import chart_bug_differences, name_fixes
from pytest_desched.canary.static.manifests import compare_manifests


def rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


RULES_0_35_0 = [
    rule("events.k8s.io", ["events"], ["create", "update"]),
    rule("", ["nodes"], ["get", "watch", "list"]),
    rule("", ["namespaces"], ["get", "watch", "list"]),
    rule("", ["pods"], ["get", "watch", "list", "delete"]),
    rule("", ["pods/eviction"], ["create"]),
    rule("scheduling.k8s.io", ["priorityclasses"], ["get", "watch", "list"]),
    rule("policy", ["poddisruptionbudgets"], ["get", "watch", "list"]),
]
RULES_0_35_1 = [*RULES_0_35_0, rule("", ["persistentvolumeclaims"], ["get", "watch", "list"])]
PVC_POLICY = {
    "profiles": [
        {
            "name": "runbook",
            "pluginConfig": [
                {
                    "name": "DefaultEvictor",
                    "args": {"podProtections": {"extraEnabled": ["PodsWithPVC"]}},
                }
            ],
        }
    ]
}


def role(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"kind": "ClusterRole", "metadata": {"name": "descheduler"}, "rules": rules}]


def test_chart_0_35_0_with_v0_35_0_is_1839() -> None:
    [d] = chart_bug_differences("baseline", role(RULES_0_35_0), "0.35.0", "v0.35.0", [PVC_POLICY])
    assert d.rule == "DR009" and d.severity == "rollback"
    assert d.message.startswith("descheduler#1839 on the baseline: chart 0.35.0's ClusterRole")
    assert "get, list, watch on persistentvolumeclaims" in d.message
    assert "descheduler.go:128" in d.message  # the proof names the file and line
    assert "PodsWithPVC" in d.message  # the policy that protects PVC pods reads them too


def test_no_1839_where_the_chart_or_release_is_outside_its_ranges() -> None:
    assert not chart_bug_differences("candidate", role(RULES_0_35_1), "0.35.1", "v0.35.1")
    assert not chart_bug_differences("baseline", role(RULES_0_35_0), "0.33.0", "v0.33.0")
    # a chart 0.35.0 whose values grant the rule anyway: judged as rendered
    assert not chart_bug_differences("baseline", role(RULES_0_35_1), "0.35.0", "v0.35.0")


def test_v0_35_0_to_v0_35_1_widening_is_a_trigger_named_by_1839() -> None:
    diffs = compare_manifests(role(RULES_0_35_0), role(RULES_0_35_1))
    [widened] = [d for d in diffs if d.rule == "DR001"]
    assert widened.severity == "rollback"  # a trigger unless explained
    assert "#1839" not in widened.message
    [named] = name_fixes([widened], "0.35.0", "v0.35.0", [PVC_POLICY])
    assert named.severity == "rollback" and named.path == widened.path
    assert "it is the fix of descheduler#1839" in named.message
    assert "link=https://github.com/kubernetes-sigs/descheduler/issues/1839" in named.message
    # the same widening from a baseline outside the bug is not named
    assert name_fixes([widened], "0.33.0", "v0.33.0") == [widened]


def test_matrix_registry_word_on_a_chart_bug_follows_the_rows_chart() -> None:
    from pytest_desched.canary.matrix_report import registry_says
    from pytest_desched.descheduler.known_bugs import BY_ID

    bug = BY_ID["descheduler#1839"]
    assert registry_says(bug, "v0.35.0", "0.35.0") == "has it"
    assert registry_says(bug, "v0.35.1", "0.35.1") == "does not have it"  # chart 0.35.1 fixed it
    assert registry_says(bug, "v0.33.0", "0.33.0") == "does not have it"
