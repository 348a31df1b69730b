"""The one utilization policy build the metrics experiments and the incident share."""

from __future__ import annotations

from typing import Any

from pytest_desched.descheduler.policy.lint_rules import runbook_numbers
from pytest_desched.experiments.rebuild import INCIDENT_CAPS, RebuildWindow
from pytest_desched.experiments.strategies.base import SAFETY_CAP
from pytest_desched.experiments.utilization import LOW, TARGET, Utilization

SCOPE = {"evictableNamespaces": {"exclude": ["default", "kube-system"]}}


def _policy(cls: type) -> dict[str, Any]:
    exp = cls.__new__(cls)  # no runner: the policy reads only the class and the lab's scope
    exp.lab_scope = lambda: SCOPE  # type: ignore[method-assign]
    return exp.policy().to_dict()


def _args(doc: dict[str, Any]) -> dict[str, Any]:
    (profile,) = doc["profiles"]
    return {c["name"]: c["args"] for c in profile["pluginConfig"]}


def test_both_read_usage_from_metrics_server_in_the_lab_scope() -> None:
    for cls in (Utilization, RebuildWindow):
        doc = _policy(cls)
        assert doc["metricsProviders"] == [{"source": "KubernetesMetrics"}], cls
        assert _args(doc)["LowNodeUtilization"] == {
            **SCOPE,
            "thresholds": {"cpu": LOW},
            "targetThresholds": {"cpu": TARGET},
            "metricsUtilization": {"source": "KubernetesMetrics"},
        }, cls
        assert _args(doc)["DefaultEvictor"] == {}, cls


def test_each_declares_its_own_caps() -> None:
    lab = _policy(Utilization)
    assert {k: lab.get(k) for k in runbook_numbers().caps} == runbook_numbers().caps
    incident = _policy(RebuildWindow)
    assert {k: incident.get(k) for k in INCIDENT_CAPS} == INCIDENT_CAPS
    # the incident has no per-namespace cap: only the lab's safety total bounds it
    assert "maxNoOfPodsToEvictPerNamespace" not in incident
    assert incident["maxNoOfPodsToEvictTotal"] == SAFETY_CAP
