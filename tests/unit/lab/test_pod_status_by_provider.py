"""A failure or a restart count the lab makes holds only where it can: written into the
status on kwok's simulated nodes, made real where a kubelet owns the status and the provider
reaches its node, refused elsewhere."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.errors import ProviderError
from pytest_desched.experiments import lookup
from pytest_desched.lab import Lab
from pytest_desched.lab.inputs import LabConfigError
from pytest_desched.providers.kind import stop_container


def _container(restarts: int, running: bool) -> Any:
    state = SimpleNamespace(
        running=SimpleNamespace(started_at=None) if running else None,
        waiting=None if running else SimpleNamespace(reason="CrashLoopBackOff"),
        terminated=None,
    )
    return SimpleNamespace(
        name="app",
        container_id=f"containerd://{restarts + 0xABC:064x}",
        restart_count=restarts,
        ready=running,
        state=state,
    )


class _Core:
    """One running pod. A patched activeDeadlineSeconds fails it on the next read, and a
    stopped container is back, one restart more, on the second read after, as its kubelet
    would (after its back-off)."""

    def __init__(self, restarts: int = 0) -> None:
        self.patches: list[dict[str, Any]] = []
        self.reads = 0
        self.restarts = restarts
        self.stopped_at: int | None = None

    def patch_namespaced_pod(self, name: str, ns: str, body: dict[str, Any]) -> None:
        self.patches.append(body)

    def stop(self, node: str, container_id: str) -> None:
        assert node == "w-1" and container_id == f"containerd://{self.restarts + 0xABC:064x}"
        assert self.stopped_at is None, "stopped again before its kubelet restarted it"
        self.stopped_at = self.reads

    def read_namespaced_pod(self, name: str, ns: str) -> Any:
        self.reads += 1
        failed = bool(self.patches) and self.reads > 1
        running = True
        if self.stopped_at is not None:
            if self.reads - self.stopped_at >= 2:
                self.restarts += 1
                self.stopped_at = None
            else:
                running = False
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
                container_statuses=[_container(self.restarts, running)],
                init_container_statuses=None,
                reason="DeadlineExceeded" if failed else None,
                start_time=None,
            ),
        )


def _lab(provider: str, restarts: int = 0) -> tuple[Lab, _Core]:
    core = _Core(restarts)
    cluster = SimpleNamespace(
        core=core,
        workers=["w-1"],
        capabilities=CAPABILITIES[provider],
        restart_container=core.stop if CAPABILITIES[provider].restarts_containers else None,
    )
    return Lab(cluster, "lab"), core  # type: ignore[arg-type]


def test_only_the_embedded_provider_keeps_a_written_pod_status() -> None:
    assert CAPABILITIES["embedded"].simulated_pods
    assert not CAPABILITIES["kind"].simulated_pods and not CAPABILITIES["existing"].simulated_pods


def test_a_real_kubelet_fails_the_pod_by_its_deadline() -> None:
    lab, core = _lab("kind")
    info = lab.fail_pod("orphan")
    assert core.patches == [{"spec": {"activeDeadlineSeconds": 1}}]
    assert info.phase == "Failed"


def test_on_kind_the_kubelet_restarts_the_stopped_container_each_time() -> None:
    lab, core = _lab("kind", restarts=1)
    info = lab.set_restarts("p", 4)
    assert info.restarts == 4 and core.restarts == 4 and core.patches == []
    assert lab.set_restarts("p", 4).restarts == 4  # already there: nothing stopped


def test_a_real_count_is_never_asked_to_shrink() -> None:
    lab, core = _lab("kind", restarts=2)
    with pytest.raises(LabConfigError, match="restarted 2 times already"):
        lab.set_restarts("p", 1)
    assert core.stopped_at is None


def test_restarts_are_refused_where_the_run_cannot_reach_the_nodes() -> None:
    lab, core = _lab("existing")
    with pytest.raises(LabConfigError, match="existing provider's kubelets own"):
        lab.set_restarts("p", 4)
    assert core.patches == [] and core.restarts == 0


def test_an_experiment_that_needs_restarts_is_refused_only_where_none_can_be_made() -> None:
    cls = lookup("too-many-restarts")
    assert cls.refusal(CAPABILITIES["embedded"]) is None
    assert cls.refusal(CAPABILITIES["kind"]) is None
    why = cls.refusal(CAPABILITIES["existing"])
    assert why is not None and "too-many-restarts" in why and "embedded" in why
    assert lookup("failed-pods").refusal(CAPABILITIES["existing"]) is None  # a real failure


@pytest.mark.parametrize(
    ("node", "container"),
    [("-it", "containerd://" + "a" * 64), ("w-1", "containerd://x; rm -rf /"), ("w-1", "")],
)
def test_a_container_stop_takes_only_a_node_name_and_a_container_id(
    node: str, container: str
) -> None:
    with pytest.raises(ProviderError, match="not a kind node name"):
        stop_container(node, container)
