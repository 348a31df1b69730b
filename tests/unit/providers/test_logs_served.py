"""A round pod's status turns terminated only once kwok serves its log (`kubectl logs`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from pytest_desched.providers.embedded import pod_run

POD = SimpleNamespace(
    metadata=SimpleNamespace(name="descheduler-positive-x", namespace="kube-system")
)


def _core(answers: list[Any]) -> type:
    class Core:
        calls = 0

        def __init__(self, api_client: Any) -> None:
            pass

        def read_namespaced_pod_log(self, name: str, namespace: str, **kw: Any) -> str:
            Core.calls += 1
            answer = answers.pop(0) if answers else "served"
            if isinstance(answer, Exception):
                raise answer
            return str(answer)

    return Core


def test_waits_until_kwok_serves_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    not_yet = ApiException(status=400, reason="Bad Request")
    not_yet.body = 'no logs found for container "descheduler" in pod "kube-system/x"'
    core = _core([not_yet, not_yet, "{"])
    monkeypatch.setattr(client, "CoreV1Api", core)
    assert pod_run.logs_served(SimpleNamespace(api_client=None), POD, "descheduler") is None
    assert core.calls == 3


def test_says_why_when_never_served(monkeypatch: pytest.MonkeyPatch) -> None:
    not_yet = ApiException(status=400, reason="Bad Request")
    not_yet.body = "no logs found for container"
    core = _core([not_yet] * 1000)
    monkeypatch.setattr(client, "CoreV1Api", core)
    why = pod_run.logs_served(SimpleNamespace(api_client=None), POD, "descheduler", timeout=0.1)
    assert why is not None and "not served within" in why and "400 Bad Request" in why


def test_another_answer_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node the API server cannot reach for logs (a replay's): waiting cannot help."""
    unreachable = ApiException(status=500, reason="Internal Server Error")
    unreachable.body = "no preferred addresses found"
    core = _core([unreachable] * 1000)
    monkeypatch.setattr(client, "CoreV1Api", core)
    why = pod_run.logs_served(SimpleNamespace(api_client=None), POD, "descheduler")
    assert core.calls == 1
    assert why is not None and "no preferred addresses found" in why
