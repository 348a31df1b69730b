"""The metricsCollector -> metricsProviders migration rules (DL026-DL028), static."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.descheduler.policy.lint_metrics_migration import (
    migration_findings,
    rbac_findings,
)
from pytest_desched.descheduler.policy.rule_table import RULES

OLD_TOP = {"metricsCollector": {"enabled": True}}
NEW_TOP = {"metricsProviders": [{"source": "KubernetesMetrics"}]}
OLD_ARGS = {"metricsUtilization": {"metricsServer": True}}
NEW_ARGS = {"metricsUtilization": {"source": "KubernetesMetrics"}}


def policy(args: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        **top,
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20}, **args}}
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
            }
        ],
    }


def codes(doc: dict[str, Any], version: str = "v0.36.0") -> list[tuple[str, str]]:
    return [(h[0], h[1]) for h in migration_findings(doc, version)]


ARGS_PATH = "profiles[0].pluginConfig[0].args.metricsUtilization"


@pytest.mark.parametrize(
    ("args", "top", "version", "want"),
    [
        (OLD_ARGS, OLD_TOP, "v0.36.0", []),  # the old form whole: DL024's, not a migration slip
        (NEW_ARGS, NEW_TOP, "v0.36.0", []),  # migrated
        (OLD_ARGS, OLD_TOP, "v0.32.2", []),  # the only form v0.32 has
        (NEW_ARGS, {**OLD_TOP, **NEW_TOP}, "v0.36.0", [("DL026", "metricsProviders[0]")]),
        (
            {"metricsUtilization": {"metricsServer": True, "source": "KubernetesMetrics"}},
            NEW_TOP,
            "v0.35.1",
            [("DL026", ARGS_PATH)],
        ),
        (OLD_ARGS, NEW_TOP, "v0.36.0", [("DL027", f"{ARGS_PATH}.metricsServer")]),
        (NEW_ARGS, OLD_TOP, "v0.33.0", [("DL027", "metricsCollector")]),
        (
            NEW_ARGS,
            NEW_TOP,
            "v0.32.2",
            [("DL028", "metricsProviders"), ("DL028", f"{ARGS_PATH}.source")],
        ),
        (NEW_ARGS, NEW_TOP, "", []),  # no release named: the version rule cannot tell
    ],
)
def test_migration_findings(
    args: dict[str, Any], top: dict[str, Any], version: str, want: list[tuple[str, str]]
) -> None:
    assert codes(policy(args, top), version) == want


def test_rules_are_in_the_table_with_their_severity() -> None:
    by_id = RULES
    assert by_id["DL026"].severity == "error"
    assert by_id["DL027"].severity == "warning"
    assert by_id["DL028"].severity == "error"


def test_every_finding_says_the_fix() -> None:
    doc = policy(OLD_ARGS, {**OLD_TOP, **NEW_TOP})
    for rule, path, message, fix in migration_findings(doc, "v0.36.0"):
        assert rule.startswith("DL02") and path and message and fix


def clusterrole(metrics: bool) -> dict[str, Any]:
    rules = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "list"]}]
    if metrics:
        rules.append(
            {
                "apiGroups": ["metrics.k8s.io"],
                "resources": ["pods", "nodes"],
                "verbs": ["get", "list"],
            }
        )
    return {"kind": "ClusterRole", "rules": rules}


@pytest.mark.parametrize(
    ("args", "top", "granted", "want"),
    [
        (OLD_ARGS, OLD_TOP, False, ["metricsCollector"]),  # chart 0.33.0+ with the old form
        (NEW_ARGS, NEW_TOP, False, ["metricsProviders"]),
        (OLD_ARGS, OLD_TOP, True, []),  # chart 0.32.2 granted it for metricsCollector
        (NEW_ARGS, NEW_TOP, True, []),
        ({}, {}, False, []),  # reads no metrics
    ],
)
def test_dl029_rbac_for_the_metrics_the_policy_reads(
    args: dict[str, Any], top: dict[str, Any], granted: bool, want: list[str]
) -> None:
    hits = rbac_findings(policy(args, top), [clusterrole(granted)], "descheduler-0.36.0")
    assert [h[1] for h in hits] == want
    assert all(h[0] == "DL029" for h in hits)


def test_dl029_needs_a_rendered_clusterrole() -> None:
    assert rbac_findings(policy(OLD_ARGS, OLD_TOP), [{"kind": "CronJob"}], "c") == []
