"""The metrics lint rules (DL022-DL025), static: each on policies written the way users do."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from pytest_desched.descheduler.policy import lint
from pytest_desched.descheduler.policy.lint_metrics import (
    metrics_findings,
    query_names_no_node,
    values_token_paths,
)
from pytest_desched.descheduler.policy.rule_table import RULES
from pytest_desched.descheduler.policy.values import ValuesFile

FAKE_TOKEN = "eyJhbGciOiJSUzI1NiJ9.ZmFrZS1wcm9tZXRoZXVzLXRva2Vu.c2lnbmF0dXJlLW5vdC1yZWFs"


def policy(args: dict[str, Any], top: dict[str, Any] | None = None, enabled: bool = True) -> dict:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        **(top or {}),
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "LowNodeUtilization", "args": args}],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"] if enabled else []}},
            }
        ],
    }


def rules(doc: dict) -> list[str]:
    return [h[0] for h in metrics_findings(doc)]


KM = {"metricsUtilization": {"source": "KubernetesMetrics"}}
PROM_Q = 'avg by (instance) (1 - rate(node_cpu_seconds_total{mode="idle"}[1m]))'


def test_a_source_the_policy_never_configures_is_an_error() -> None:
    [hit] = metrics_findings(policy(KM))
    assert hit[0] == "DL022" and hit[1] == "profiles[0].pluginConfig[0].args.metricsUtilization"
    assert "KubernetesMetrics" in hit[2] and "metricsProviders" in hit[3]
    assert rules(policy(KM, {"metricsProviders": [{"source": "KubernetesMetrics"}]})) == []
    # the deprecated collector configures it too (and is said as deprecated, not missing)
    assert rules(policy(KM, {"metricsCollector": {"enabled": True}})) == ["DL024"]
    # a plugin configured but not enabled reads nothing
    assert rules(policy(KM, enabled=False)) == []
    prom = {"metricsUtilization": {"source": "Prometheus", "prometheus": {"query": PROM_Q}}}
    assert rules(policy(prom, {"metricsProviders": [{"source": "KubernetesMetrics"}]})) == ["DL022"]
    no_url = policy(prom, {"metricsProviders": [{"source": "Prometheus", "prometheus": {}}]})
    assert [(h[0], h[1]) for h in metrics_findings(no_url)] == [
        ("DL022", "metricsProviders[0].prometheus")
    ]


def test_a_plain_text_prometheus_token_is_an_error_and_never_shown() -> None:
    def provider(auth: Any) -> dict:
        return {
            "metricsProviders": [
                {"source": "Prometheus", "prometheus": {"url": "https://p:9090", "authToken": auth}}
            ]
        }

    prom = {"metricsUtilization": {"source": "Prometheus", "prometheus": {"query": PROM_Q}}}
    for auth in (FAKE_TOKEN, {"token": FAKE_TOKEN}, {"secretReference": {}, "raw": FAKE_TOKEN}):
        found = metrics_findings(policy(prom, provider(auth)))
        assert [h[0] for h in found] == ["DL023"], found
        assert found[0][1] == "metricsProviders[0].prometheus.authToken"
        assert FAKE_TOKEN not in json.dumps(found)
    ref = {"secretReference": {"namespace": "kube-system", "name": "prom-token"}}
    assert rules(policy(prom, provider(ref))) == []


def test_a_token_anywhere_in_the_values_is_found_by_path_never_by_value(tmp_path: Path) -> None:
    doc = {
        "deschedulerPolicy": {"metricsProviders": [{"source": "Prometheus"}]},
        "extraEnv": [{"name": "PROM_TOKEN", "value": f"Bearer {FAKE_TOKEN}"}],
        "podAnnotations": {"prometheus-token": FAKE_TOKEN},
        "cmdOptions": {"v": 4},
    }
    paths = values_token_paths(doc)
    assert paths == ["extraEnv[0].value", "podAnnotations.prometheus-token"]
    text = yaml.safe_dump(doc)
    f = tmp_path / "values.yaml"
    f.write_text(text)
    vf = ValuesFile(f, doc, yaml.compose(text))
    rendered = SimpleNamespace(files=[vf], reads=frozenset())
    found = lint._safety_findings(rendered)  # type: ignore[arg-type]
    dl023 = [x for x in found if x.rule == "DL023"]
    assert [x.path for x in dl023] == paths
    assert all(x.line for x in dl023) and all(x.severity == "error" for x in dl023)
    assert FAKE_TOKEN not in json.dumps([x.__dict__ for x in found], default=str)
    # as printed (each line scrubbed whole): the path survives, the value never appears
    from pytest_desched.descheduler.policy.lint_output import render_text
    from pytest_desched.redaction import scrub_secrets

    shown = scrub_secrets(render_text(dl023))
    assert "DL023 prometheus-token-in-plain-text: podAnnotations.prometheus-token:" in shown
    assert "extraEnv[0].value: <redacted> (a credential in plain text" in shown
    assert FAKE_TOKEN not in shown


def test_the_deprecated_collector_and_metrics_server_flag_are_warnings() -> None:
    doc = policy(
        {"metricsUtilization": {"metricsServer": True}}, {"metricsCollector": {"enabled": True}}
    )
    found = metrics_findings(doc)
    assert [(h[0], h[1]) for h in found] == [
        ("DL024", "metricsCollector"),
        ("DL024", "profiles[0].pluginConfig[0].args.metricsUtilization.metricsServer"),
    ]
    assert "metricsProviders: [{source: KubernetesMetrics}]" in found[0][3]
    assert RULES["DL024"].severity == "warning" and RULES["DL022"].severity == "error"


@pytest.mark.parametrize(
    ("query", "names_no_node"),
    [
        ('sum(rate(node_cpu_seconds_total{mode!="idle"}[1m]))', True),
        ("sum by (node) (rate(x[1m]))", True),
        ("avg(rate(x[1m])) by (job)", True),
        ("max without (instance) (x)", True),
        ("scalar(x)", True),
        ("0.5", True),
        (PROM_Q, False),
        ("avg(rate(x[1m])) by (instance, job)", False),
        ("sum without (cpu) (x)", False),
        ("instance:node_cpu:ratio", False),  # a recording rule: cannot be told statically
        ("1 - avg(x)", False),  # not an aggregation at the top: left alone
    ],
)
def test_queries_that_cannot_name_nodes(query: str, names_no_node: bool) -> None:
    assert (query_names_no_node(query) is not None) is names_no_node
    doc = policy({"metricsUtilization": {"source": "Prometheus", "prometheus": {"query": query}}})
    assert ("DL025" in rules(doc)) is names_no_node


def test_a_token_secret_reference_names_the_rbac_the_chart_lacks() -> None:
    """DL030: the chart's ClusterRole grants no secrets; the finding names the namespace the
    informer lists (kube-system called out) and never a value (a reference has none)."""
    from pytest_desched.descheduler.policy.lint_prometheus import secret_findings

    def doc(ns: str, name: str = "prom-token") -> dict:
        ref = {"secretReference": {"namespace": ns, "name": name}}
        top = {
            "metricsProviders": [
                {"source": "Prometheus", "prometheus": {"url": "http://p", "authToken": ref}}
            ]
        }
        return policy({"metricsUtilization": {"source": "Prometheus"}}, top)

    [hit] = secret_findings(doc("monitoring"))
    assert hit[0] == "DL030" and hit[1].endswith("authToken.secretReference")
    assert "monitoring/prom-token" in hit[2] and "Role in monitoring" in hit[3]
    assert "system components" in secret_findings(doc("kube-system"))[0][2]
    assert secret_findings(doc("", "x")) == []  # refused at start: another finding's job
    assert (
        secret_findings(policy({}, {"metricsProviders": [{"source": "KubernetesMetrics"}]})) == []
    )
    assert "DL030" in RULES
