"""A failure or a restart count the lab makes holds only where it can: written into the
status on kwok's simulated nodes, made real (or refused) where a kubelet owns the status."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.experiments import lookup
from pytest_desched.lab import Lab
from pytest_desched.lab.inputs import LabConfigError


class _Core:
    """One running pod; a patched activeDeadlineSeconds fails it on the second read, as
    its kubelet would."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.reads = 0

    def patch_namespaced_pod(self, name: str, ns: str, body: dict[str, Any]) -> None:
        self.patches.append(body)

    def read_namespaced_pod(self, name: str, ns: str) -> Any:
        self.reads += 1
        failed = bool(self.patches) and self.reads > 1
        return SimpleNamespace(
            metadata=SimpleNamespace(
                name=name,
                namespace=ns,
                uid="u1",
                labels={},
                owner_references=None,
                creation_timestamp=dt.datetime.now(dt.UTC),
                deletion_timestamp=None,
                annotations={},
            ),
            spec=SimpleNamespace(node_name="w-1", containers=[], init_containers=None),
            status=SimpleNamespace(
                phase="Failed" if failed else "Running",
                conditions=[],
                container_statuses=[],
                init_container_statuses=None,
                reason="DeadlineExceeded" if failed else None,
                start_time=None,
            ),
        )


def _lab(provider: str) -> tuple[Lab, _Core]:
    core = _Core()
    cluster = SimpleNamespace(core=core, workers=["w-1"], capabilities=CAPABILITIES[provider])
    return Lab(cluster, "lab"), core  # type: ignore[arg-type]


def test_only_the_embedded_provider_keeps_a_written_pod_status() -> None:
    assert CAPABILITIES["embedded"].simulated_pods
    assert not CAPABILITIES["kind"].simulated_pods and not CAPABILITIES["existing"].simulated_pods


def test_a_real_kubelet_fails_the_pod_by_its_deadline() -> None:
    lab, core = _lab("kind")
    info = lab.fail_pod("orphan")
    assert core.patches == [{"spec": {"activeDeadlineSeconds": 1}}]
    assert info.phase == "Failed"


def test_restarts_are_refused_where_a_kubelet_owns_the_status() -> None:
    lab, core = _lab("kind")
    with pytest.raises(LabConfigError, match="kind provider's kubelets own"):
        lab.set_restarts("p", 4)
    assert core.patches == []


def test_an_experiment_that_writes_restarts_is_refused_before_its_lab() -> None:
    cls = lookup("too-many-restarts")
    assert cls.refusal(CAPABILITIES["embedded"]) is None
    why = cls.refusal(CAPABILITIES["kind"])
    assert why is not None and "too-many-restarts" in why and "embedded" in why
    assert lookup("failed-pods").refusal(CAPABILITIES["kind"]) is None  # a real failure there
