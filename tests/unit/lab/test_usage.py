"""Declared usage: a workload's pods carry the kwok annotations their usage becomes."""

from __future__ import annotations

import pytest

from pytest_desched.lab.inputs import LabConfigError
from pytest_desched.lab.usage_values import USAGE_ANNOTATIONS, parse_cpu_m
from pytest_desched.lab.workloads import Deployment


def test_usage_renders_kwok_annotations_beside_requests() -> None:
    d = Deployment("hot", replicas=2, requests={"cpu": "100m"}, usage={"cpu": "800m"})
    tmpl = d.pod_template()
    assert tmpl["metadata"]["annotations"] == {"kwok.x-k8s.io/usage-cpu": "800m"}
    assert tmpl["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}}
    both = Deployment("b", usage={"cpu": "1", "memory": "1Gi"}, annotations={"team": "x"})
    ann = both.pod_template()["metadata"]["annotations"]
    assert ann == {"team": "x", USAGE_ANNOTATIONS["cpu"]: "1", USAGE_ANNOTATIONS["memory"]: "1Gi"}
    assert "annotations" not in Deployment("plain").pod_template()["metadata"]


@pytest.mark.parametrize(
    ("usage", "annotations", "said"),
    [
        ({"gpu": "1"}, {}, "kwok emulates cpu and memory"),
        ({"cpu": "lots"}, {}, "not a Kubernetes quantity"),
        ("800m", {}, "usage must be a mapping"),
        ({"cpu": "1"}, {USAGE_ANNOTATIONS["cpu"]: "2"}, "set from usage"),
    ],
)
def test_bad_usage_fails_when_declared(usage: object, annotations: dict, said: str) -> None:
    with pytest.raises(LabConfigError, match=said):
        Deployment("x", usage=usage, annotations=annotations)  # type: ignore[arg-type]


def test_cpu_quantities_in_millicores() -> None:
    assert parse_cpu_m("250m") == 250
    assert parse_cpu_m("1") == 1000
    assert parse_cpu_m("3200000000n") == 3200
