"""`desched snapshot --print-rbac` (issue 52): the printed role covers every read of the
capture code, from the same tables (so a new read cannot be left out), with no verb but
get, list and watch, and no credentials."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pytest_desched.commands import main
from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.rbac import parse_service_account
from pytest_desched.replay.capture.snapshot import KWOKCTL_FILTER, RESOURCES


def _printed(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    assert main(["snapshot", "--print-rbac", *extra]) == 0  # no --context: no cluster needed
    return list(yaml.safe_load_all(capsys.readouterr().out))


def _allowed(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule.get("apiGroups", []):
            for res in rule["resources"]:
                out.setdefault((group, res), set()).update(rule["verbs"])
        for url in rule.get("nonResourceURLs", []):
            out.setdefault(("url", url), set()).update(rule["verbs"])
    return out


def _group(prefix: str) -> str:
    """`/api/v1` -> "", `/apis/apps/v1` -> "apps": the path the client requests."""
    return "" if prefix == "/api/v1" else prefix.split("/")[2]


def test_every_read_of_snapshot_and_record_is_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    role, binding = _printed(capsys)
    assert (role["kind"], binding["kind"]) == ("ClusterRole", "ClusterRoleBinding")
    allowed = _allowed(role)
    for section, (prefix, res, _) in RESOURCES.items():  # the snapshot lists, record watches
        assert {"get", "list", "watch"} <= allowed.get((_group(prefix), res), set()), section
    for f in KWOKCTL_FILTER:  # kwokctl's exporter lists the same kinds, in its own spelling
        res, _, group = f.partition(".")
        plural = next(r for g, r in allowed if g == group and r.startswith(res))
        assert "list" in allowed[(group, plural)], f
    assert "get" in allowed[("", "configmaps")]  # the descheduler's policy ConfigMap
    assert "get" in allowed[("url", "/version")]  # the snapshot's header


def test_nothing_but_get_list_watch_and_no_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    role, _ = _printed(capsys)
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"} and "*" not in verbs
    resources = {r for rule in role["rules"] for r in rule.get("resources", [])}
    assert not resources & {"secrets", "serviceaccounts", "serviceaccounts/token", "*"}
    assert all("*" not in rule.get("apiGroups", []) for rule in role["rules"])
    assert allowed_configmap_verbs(role) == {"get"}  # read by name, never listed


def allowed_configmap_verbs(role: dict[str, Any]) -> set[str]:
    return _allowed(role)[("", "configmaps")]


def test_the_binding_names_the_service_account(capsys: pytest.CaptureFixture[str]) -> None:
    role, binding = _printed(capsys)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "namespace": "desched-reader", "name": "desched-snapshot"}
    ]
    _, other = _printed(capsys, "--service-account", "ops/reader")
    assert other["subjects"] == [{"kind": "ServiceAccount", "namespace": "ops", "name": "reader"}]
    assert other["metadata"]["name"] != binding["metadata"]["name"]


@pytest.mark.parametrize("bad", ["reader", "/reader", "ops/", "ops/a/b"])
def test_a_service_account_is_namespace_slash_name(bad: str) -> None:
    with pytest.raises(ConfigError, match="NAMESPACE/NAME"):
        parse_service_account(bad)


def test_without_print_rbac_the_context_is_still_required(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["snapshot", "--output-file", "snap.yaml"])
    assert exc.value.code == 2
    assert "the following arguments are required: --context" in capsys.readouterr().err
