"""A workload's start-up time: the annotations kwok's pod-ready Stage delays its pods by."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pytest_desched.lab.inputs import LabConfigError
from pytest_desched.lab.startup import (
    STARTUP_ANNOTATION,
    STARTUP_JITTER_ANNOTATION,
    startup_annotations,
)
from pytest_desched.lab.workloads import Deployment, Pod
from pytest_desched.tools.resources import manifest_path


def test_startup_renders_on_every_pod_of_the_workload() -> None:
    d = Deployment("web", replicas=3, startup_seconds=15, usage={"cpu": "600m"})
    ann = d.pod_template()["metadata"]["annotations"]
    assert ann[STARTUP_ANNOTATION] == "15s"
    assert STARTUP_JITTER_ANNOTATION not in ann
    assert ann["kwok.x-k8s.io/usage-cpu"] == "600m"
    # the manifest's template is what the ReplicaSet copies into each replacement
    tmpl = d.manifest("lab")["spec"]["template"]
    assert tmpl["metadata"]["annotations"][STARTUP_ANNOTATION] == "15s"
    bare = Pod("one", startup_seconds=2.5).manifest("lab")
    assert bare["metadata"]["annotations"] == {STARTUP_ANNOTATION: "2500ms"}


def test_jitter_is_kwoks_upper_bound_and_no_startup_renders_nothing() -> None:
    """kwok picks uniformly between durationFrom and jitterDurationFrom (its upper bound)."""
    assert startup_annotations(10, 5) == {
        STARTUP_ANNOTATION: "10s",
        STARTUP_JITTER_ANNOTATION: "15s",
    }
    assert startup_annotations(0, 0) == {}
    assert "annotations" not in Deployment("plain").pod_template()["metadata"]


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"startup_seconds": -1}, "not a number of seconds"),
        ({"startup_seconds": "15s"}, "not a number of seconds"),
        ({"startup_seconds": True}, "not a number of seconds"),
        ({"startup_seconds": float("nan")}, "not a number of seconds"),
        ({"startup_jitter_seconds": -2}, "not a number of seconds"),
        ({"startup_seconds": 500, "startup_jitter_seconds": 200}, "exceeds 600s"),
        ({"startup_seconds": 3, "annotations": {STARTUP_ANNOTATION: "1s"}}, "startup_seconds"),
    ],
)
def test_bad_startup_fails_when_declared(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(LabConfigError, match=said):
        Deployment("x", **kw)


def _stage(name: str) -> dict[str, Any]:
    docs = yaml.safe_load_all(manifest_path("kwok-stages.yaml").read_text())
    return next(d for d in docs if d["metadata"]["name"] == name)


def test_the_pod_ready_stage_reads_the_annotations_it_is_given() -> None:
    """The Stage's delay reads exactly the annotation names the workloads write, and falls
    back to 0 ms (Ready at once) for a pod without them."""
    delay = _stage("pod-ready")["spec"]["delay"]
    assert delay["durationMilliseconds"] == 0
    assert delay["durationFrom"]["jq"]["expression"] == (
        f'.metadata.annotations["{STARTUP_ANNOTATION}"]'
    )
    assert delay["jitterDurationFrom"]["jq"]["expression"] == (
        f'.metadata.annotations["{STARTUP_JITTER_ANNOTATION}"]'
    )
    assert "delay" not in _stage("pod-delete")["spec"]  # an evicted pod still goes at once


def test_termination_grace_renders_the_spec_and_the_opt_in() -> None:
    """`termination_grace_seconds` sets the pod's grace and the annotation the graceful
    pod-delete Stage selects; without it neither, and the plain Stage skips opted-in pods."""
    from pytest_desched.lab.termination import GRACE_ANNOTATION

    tpl = Deployment("web", termination_grace_seconds=20).pod_template()
    assert tpl["spec"]["terminationGracePeriodSeconds"] == 20
    assert tpl["metadata"]["annotations"][GRACE_ANNOTATION] == "true"
    plain = Deployment("web", grace_period=20).pod_template()
    assert GRACE_ANNOTATION not in plain["metadata"].get("annotations", {})
    key = f'.metadata.annotations["{GRACE_ANNOTATION}"]'
    ops = {
        s: {e["key"]: e["operator"] for e in _stage(s)["spec"]["selector"]["matchExpressions"]}
        for s in ("pod-delete", "pod-delete-graceful")
    }
    assert ops["pod-delete"][key] == "DoesNotExist"
    assert ops["pod-delete-graceful"][key] == "Exists"
    graceful = _stage("pod-delete-graceful")["spec"]
    assert graceful["delay"]["durationFrom"]["jq"]["expression"] == ".metadata.deletionTimestamp"
    assert graceful["next"] == {"delete": True}


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"termination_grace_seconds": -1}, "whole seconds"),
        ({"termination_grace_seconds": 2.5}, "whole seconds"),
        ({"termination_grace_seconds": 601}, "whole seconds"),
        ({"termination_grace_seconds": 5, "grace_period": 5}, "both set"),
        (
            {
                "termination_grace_seconds": 5,
                "annotations": {"desched.pytest.io/honour-termination-grace": "x"},
            },
            "termination_grace_seconds",
        ),
    ],
)
def test_bad_termination_grace_fails_when_declared(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(LabConfigError, match=said):
        Deployment("x", **kw)
