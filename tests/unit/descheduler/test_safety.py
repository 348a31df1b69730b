"""Emergency stop against a recording API double: suspend first, delete only unstarted rounds.

The double answers only the calls emergency_stop is allowed to make; the PodDisruptionBudget
/ policy API and every unexpected verb raise, so "touch nothing else" is checked, not assumed.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.descheduler.cleanup import emergency_stop, round_jobs

NS = "kube-system"


class Forbidden:
    """Any attribute access is a test failure: this API must not be touched."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"emergency_stop touched {self._what}.{name}")


def owner(kind: str, name: str) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, name=name, api_version="batch/v1", controller=True)


def job(name: str, owners: list[SimpleNamespace] | None, **status: Any) -> SimpleNamespace:
    st = {"succeeded": None, "failed": None, "completion_time": None, "active": None, **status}
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, namespace=NS, owner_references=owners),
        status=SimpleNamespace(**st),
    )


def pod(phase: str) -> SimpleNamespace:
    return SimpleNamespace(status=SimpleNamespace(phase=phase))


class FakeBatch:
    def __init__(self, jobs: list[SimpleNamespace], log: list[tuple], patch_error=None) -> None:
        self.jobs, self.log, self.patch_error = jobs, log, patch_error

    def patch_namespaced_cron_job(self, name: str, namespace: str, body: dict) -> None:
        self.log.append(("patch_cronjob", name, namespace, body))
        if self.patch_error is not None:
            raise self.patch_error

    def list_namespaced_job(self, namespace: str) -> SimpleNamespace:
        self.log.append(("list_jobs", namespace))
        return SimpleNamespace(items=list(self.jobs))

    def delete_namespaced_job(self, name: str, namespace: str, **kw: Any) -> None:
        self.log.append(("delete_job", name, namespace, kw))

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected batch call {name}")


class FakeCore:
    def __init__(self, pods: dict[str, list[SimpleNamespace]], log: list[tuple]) -> None:
        self.pods, self.log = pods, log

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> SimpleNamespace:
        self.log.append(("list_pods", namespace, label_selector))
        name = label_selector.removeprefix("job-name=")
        return SimpleNamespace(items=list(self.pods.get(name, [])))

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected core call {name}")


CJ = owner("CronJob", "descheduler")
JOBS = [
    job("pending-round", [CJ]),  # pods exist but none ran
    job("no-pods-round", [CJ]),
    job("succeeded-round", [CJ], succeeded=1),
    job("failed-round", [CJ], failed=1),
    job("completed-round", [CJ], completion_time="2026-01-01T00:00:00Z"),
    job("running-round", [CJ], active=1),
    job("other-cronjob", [owner("CronJob", "nightly-report")]),
    job("deployment-like", [owner("Deployment", "descheduler")]),
    job("orphan", None),
]
PODS = {
    "pending-round": [pod("Pending")],
    "running-round": [pod("Pending"), pod("Running")],
    "other-cronjob": [pod("Pending")],
    "orphan": [],
}


def make(patch_error: Exception | None = None) -> tuple[SimpleNamespace, SimpleNamespace, list]:
    log: list[tuple] = []
    cluster = SimpleNamespace(
        batch=FakeBatch(JOBS, log, patch_error),
        core=FakeCore(PODS, log),
        policy=Forbidden("policy (PodDisruptionBudgets)"),
        rbac=Forbidden("rbac"),
        apps=Forbidden("apps"),
    )
    release = SimpleNamespace(
        namespace=NS,
        name="descheduler",
        cronjob_name="descheduler",
        uninstall=Forbidden("release.uninstall"),
    )
    return cluster, release, log


def test_round_jobs_are_those_owned_by_the_cronjob() -> None:
    cluster, release, _ = make()
    assert [j.metadata.name for j in round_jobs(cluster, release)] == [
        "pending-round",
        "no-pods-round",
        "succeeded-round",
        "failed-round",
        "completed-round",
        "running-round",
    ]


def test_emergency_stop_suspends_then_deletes_only_unstarted_rounds() -> None:
    cluster, release, log = make()
    report = emergency_stop(cluster, release)
    assert report == {
        "suspended": True,
        "deleted_jobs": ["pending-round", "no-pods-round"],
        "kept_started_jobs": [
            "succeeded-round",
            "failed-round",
            "completed-round",
            "running-round",
        ],
    }
    assert log[0] == ("patch_cronjob", "descheduler", NS, {"spec": {"suspend": True}})
    deletes = [c for c in log if c[0] == "delete_job"]
    assert deletes == [
        ("delete_job", "pending-round", NS, {"propagation_policy": "Background"}),
        ("delete_job", "no-pods-round", NS, {"propagation_policy": "Background"}),
    ]
    # nothing about foreign Jobs was even looked at
    assert not [c for c in log if c[0] == "list_pods" and "other-cronjob" in c[2]]
    assert {c[0] for c in log} == {"patch_cronjob", "list_jobs", "list_pods", "delete_job"}


def test_emergency_stop_with_cronjob_already_gone() -> None:
    cluster, release, _ = make(patch_error=ApiException(status=404, reason="Not Found"))
    report = emergency_stop(cluster, release)
    assert report["suspended"] == "absent"
    assert report["deleted_jobs"] == ["pending-round", "no-pods-round"]


def test_emergency_stop_fails_loudly_when_it_cannot_suspend() -> None:
    cluster, release, log = make(patch_error=ApiException(status=403, reason="Forbidden"))
    with pytest.raises(ApiException) as ei:
        emergency_stop(cluster, release)
    assert ei.value.status == 403
    assert [c[0] for c in log] == ["patch_cronjob"]  # no Job deleted while the CronJob may run


def test_emergency_stop_with_no_rounds() -> None:
    log: list[tuple] = []
    cluster = SimpleNamespace(
        batch=FakeBatch([], log), core=FakeCore({}, log), policy=Forbidden("policy")
    )
    release = SimpleNamespace(namespace=NS, name="descheduler", cronjob_name="descheduler")
    assert emergency_stop(cluster, release) == {
        "suspended": True,
        "deleted_jobs": [],
        "kept_started_jobs": [],
    }
