"""The host replay's two policy rules: its own descheduler is held to the fake nodes and the
replay's namespaces; the host's descheduler must exclude those namespaces, or no replay."""

from __future__ import annotations

from typing import Any

import yaml

from pytest_desched.descheduler.policy import Policy, check_policy_scope
from pytest_desched.replay.capture.snapshot import find_descheduler
from pytest_desched.replay.host.policy import (
    host_descheduler_problems,
    narrow_policy,
    replay_include,
)

MAPPING = {"team-a": "r-team-a", "team-b": "r-team-b", "kube-system": "r-kube-system"}
POINTS = ("deschedule", "balance")


def _policy(args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {}},
                    {"name": "RemoveDuplicates", "args": args or {}},
                ],
                "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}},
            }
        ],
    }


def test_include_follows_the_incident_s_filters_through_the_mapping() -> None:
    assert replay_include({}, MAPPING) == ["r-kube-system", "r-team-a", "r-team-b"]
    assert replay_include({"exclude": ["kube-system"]}, MAPPING) == ["r-team-a", "r-team-b"]
    assert replay_include({"include": ["team-b", "elsewhere"]}, MAPPING) == ["r-team-b"]


def test_the_replay_s_policy_is_narrowed_to_its_nodes_and_namespaces() -> None:
    pol = Policy.coerce(_policy({"namespaces": {"exclude": ["kube-system"]}}))
    out = narrow_policy(pol, MAPPING, "desched.pytest.io/host-replay-run=run1")
    doc = out.to_dict()
    assert doc["nodeSelector"] == "desched.pytest.io/host-replay-run=run1"
    assert out.plugin_args("RemoveDuplicates", 0)["namespaces"] == {
        "include": ["r-team-a", "r-team-b"]
    }
    assert out.overrides  # each change recorded with its why

    class Scoped:  # the guard Release.apply_policy runs before a non-dry-run upgrade
        lab_node_selector = "desched.pytest.io/host-replay-run=run1"
        provider, name = "existing", "host"

    check_policy_scope(Scoped(), out)  # type: ignore[arg-type]


def _workload(kind: str, args: list[str], suspend: bool = False) -> dict[str, Any]:
    pod = {
        "containers": [
            {
                "name": "descheduler",
                "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
                "args": ["--policy-config-file=/policy-dir/policy.yaml", *args],
                "volumeMounts": [{"name": "policy-volume", "mountPath": "/policy-dir"}],
            }
        ],
        "volumes": [{"name": "policy-volume", "configMap": {"name": "descheduler"}}],
    }
    spec: dict[str, Any] = (
        {"suspend": suspend, "jobTemplate": {"spec": {"template": {"spec": pod}}}}
        if kind == "CronJob"
        else {"replicas": 1, "template": {"spec": pod}}
    )
    return {
        "kind": kind,
        "metadata": {"namespace": "kube-system", "name": "descheduler"},
        "spec": spec,
    }


def _check(policy_args: dict[str, Any] | None, kind: str = "CronJob", **kw: Any) -> Any:
    wl = _workload(kind, kw.pop("args", []), kw.pop("suspend", False))
    entries = find_descheduler([wl])
    assert entries, "the snapshot's own finder sees the host's descheduler"
    text = kw.pop("text", None) or yaml.safe_dump(_policy(policy_args))
    return host_descheduler_problems(
        entries,
        {("kube-system", "descheduler"): text},
        ["r-team-a", "r-team-b"],
        {("kube-system", "descheduler"): wl},
        evicting_points=POINTS,
    )


def test_a_host_descheduler_that_does_not_exclude_the_replay_refuses_it() -> None:
    problems, _ = _check(None)
    assert len(problems) == 1
    assert "r-team-a" in problems[0] and "namespaces.exclude" in problems[0]
    problems, _ = _check({"namespaces": {"exclude": ["r-team-a"]}})  # one of two excluded
    assert problems and "r-team-b" in problems[0] and "r-team-a" not in problems[0]
    problems, _ = _check({"namespaces": {"include": ["prod", "r-team-b"]}}, kind="Deployment")
    assert problems and "r-team-b" in problems[0]


def test_a_host_descheduler_that_excludes_the_replay_or_cannot_evict_is_allowed() -> None:
    assert _check({"namespaces": {"exclude": ["r-team-a", "r-team-b", "x"]}}) == ([], [])
    assert _check({"namespaces": {"include": ["prod"]}})[0] == []
    problems, notes = _check(None, args=["--dry-run"])
    assert not problems and "dry run" in notes[0]
    problems, notes = _check(None, suspend=True)
    assert not problems and "suspended" in notes[0]


def test_a_host_descheduler_whose_policy_cannot_be_read_refuses_the_replay() -> None:
    problems, _ = _check(None, text="not: [a policy")
    assert problems and "could not be read" in problems[0]
    wl = _workload("Deployment", [])
    problems, _ = host_descheduler_problems(
        find_descheduler([wl]), {}, ["r-team-a"], {}, evicting_points=POINTS
    )
    assert problems and "could not be read" in problems[0]
