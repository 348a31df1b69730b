"""The fault injector's and the fail-closed helpers' parts that need no cluster.

Real processes and real files stand in for components and round pods (a Python sleeper whose
command line names a fake cluster directory; a log file as its stdout; an audit log line);
no API server is faked: what talks to one is covered by tests/e2e/test_faults_e2e.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from pytest_desched.errors import RoundError
from pytest_desched.kube import (
    UnscheduledGuard,
    api_failure,
    api_unavailable,
    bound_requests,
    owned_by_job,
    unscheduled_why,
)
from pytest_desched.providers.base import Cluster
from pytest_desched.providers.embedded.faults import FaultError, Faults, Trigger
from pytest_desched.providers.embedded.kubelet import state_dir
from pytest_desched.providers.embedded.processes import running as _running
from tests.unit.processes import start_sleeper


# -- api_failure: which errors are the API server's -----------------------------------------
def _refused() -> urllib3.exceptions.MaxRetryError:
    conn = urllib3.exceptions.NewConnectionError(
        None, "Failed to establish a new connection: [Errno 111] Connection refused"
    )
    return urllib3.exceptions.MaxRetryError(None, "/api/v1/pods", conn)


@pytest.mark.parametrize(
    ("exc", "want"),
    [
        (_refused(), "connection refused (NewConnectionError)"),
        (
            urllib3.exceptions.ReadTimeoutError(None, "/x", "Read timed out. (read timeout=10)"),
            "request timed out (ReadTimeoutError)",
        ),
        (
            urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError()),
            "connection aborted (ProtocolError)",
        ),
        (ApiException(status=504, reason="Gateway Timeout"), "HTTP 504 Gateway Timeout"),
        (ApiException(status=500, reason="Internal Server Error"), "HTTP 500"),
    ],
)
def test_api_failure_names_server_side_failures(exc: BaseException, want: str) -> None:
    assert want in (api_failure(exc) or "")


@pytest.mark.parametrize("status", [403, 404, 409, 429])
def test_api_failure_leaves_answers_alone(status: int) -> None:
    """A 4xx is the API server working (RBAC, PDB, conflicts): not an outage."""
    assert api_failure(ApiException(status=status, reason="x")) is None
    assert api_failure(ValueError("engine bug")) is None


def test_api_unavailable_wraps_only_server_failures() -> None:
    cluster: Any = SimpleNamespace(api_client=None)  # api_health fails: said, never raised
    with pytest.raises(RoundError) as err, api_unavailable(cluster, "creating round Job x/y"):
        raise _refused()
    msg = str(err.value)
    assert "the API server failed while creating round Job x/y: connection refused" in msg
    assert "failing closed" in msg
    with pytest.raises(ApiException), api_unavailable(cluster, "x"):
        raise ApiException(status=404, reason="Not Found")
    with pytest.raises(RoundError, match="not suspended"), api_unavailable(cluster, "x"):
        raise RoundError("CronJob kube-system/d is not suspended")  # the engine's own: as is


# -- bound_requests: a deadline for every call but watches ---------------------------------
def test_bound_requests_sets_deadlines_but_not_on_watches() -> None:
    api = client.ApiClient(client.Configuration(host="https://127.0.0.1:1"))
    seen: list[tuple[str, Any]] = []
    api.rest_client.request = lambda method, url, **kw: seen.append(  # the inner call
        (url, kw.get("_request_timeout"))
    )
    bound_requests(api, connect=2, read=7)
    bound_requests(api, connect=9, read=9)  # idempotent: wrapped once
    api.rest_client.request("GET", "https://h/api/v1/namespaces/x/pods")
    api.rest_client.request("GET", "https://h/api/v1/namespaces/x/pods?watch=True&timeoutSeconds=1")
    api.rest_client.request("GET", "https://h/api/v1/pods/p/log?follow=true")
    api.rest_client.request("GET", "https://h/api/v1/pods", _request_timeout=3)
    assert seen == [
        ("https://h/api/v1/namespaces/x/pods", (2, 7)),
        ("https://h/api/v1/namespaces/x/pods?watch=True&timeoutSeconds=1", None),
        ("https://h/api/v1/pods/p/log?follow=true", None),
        ("https://h/api/v1/pods", 3),
    ]
    retries = api.rest_client.pool_manager.connection_pool_kw["retries"]
    assert retries.read == 0  # a timed-out read is not tried three more times


# -- a round pod nobody schedules ---------------------------------------------------------------
def _pod(name: str, node: str | None = None, conditions: list[Any] | None = None) -> Any:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="kube-system", uid=f"uid-{name}"),
        spec=client.V1PodSpec(containers=[], node_name=node),
        status=client.V1PodStatus(phase="Pending", conditions=conditions),
    )


def test_unscheduled_why_tells_no_scheduler_from_no_fit() -> None:
    assert "no scheduler has acted on it" in unscheduled_why(_pod("a"))
    unfit = client.V1PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message="0/3 nodes fit"
    )
    assert unscheduled_why(_pod("b", conditions=[unfit])) == (
        "the scheduler cannot place it (Unschedulable: 0/3 nodes fit)"
    )


def test_unscheduled_guard_ends_the_wait_after_its_limit() -> None:
    now = [100.0]
    guard = UnscheduledGuard("round Job kube-system/descheduler-positive", limit=20)
    guard.clock = lambda: now[0]
    guard.check([_pod("p"), _pod("q", node="w1")])  # first seen
    now[0] = 119.0
    guard.check([_pod("p")])  # still within the limit
    now[0] = 120.5
    with pytest.raises(RoundError) as err:
        guard.check([_pod("p")])
    assert "pod kube-system/p is still unscheduled after 20s" in str(err.value)
    assert "no scheduler has acted on it" in str(err.value)


def test_a_pod_of_an_earlier_job_of_the_same_name_is_not_this_rounds() -> None:
    """The CronJob's history limit deletes old round Jobs; their names come back before the
    garbage collector removed their pods, which carry the same job-name label."""

    def owned(*uids: str) -> Any:
        refs = [client.V1OwnerReference(api_version="batch/v1", kind="Job", name="j", uid=u)
                for u in uids]  # fmt: skip
        return SimpleNamespace(metadata=client.V1ObjectMeta(name="p", owner_references=refs))

    assert owned_by_job(owned("new"), "new")
    assert not owned_by_job(owned("old"), "new")
    assert owned_by_job(owned(), "new")  # owner unknown: kept
    assert owned_by_job(owned("old"), None)  # the Job's uid unknown: kept


# -- Faults on real processes in a fake cluster directory ----------------------------------------
@pytest.fixture
def cdir(tmp_path: Path) -> Path:
    d = tmp_path / "root" / "clusters" / "c1"
    (d / "pids").mkdir(parents=True)
    return d


def _cluster(cdir: Path, provider: str = "embedded") -> Cluster:
    return Cluster(
        name=cdir.name,
        provider=provider,
        kubeconfig=cdir / "kubeconfig.yaml",
        toolchain=None,  # type: ignore[arg-type]
        workdir=cdir,
        audit_unavailable_why="unit test",
    )


def _sleeper(cdir: Path, **kw: Any) -> subprocess.Popen[bytes]:
    """A process whose command line names the cluster directory, like a component's."""
    return start_sleeper(str(cdir), **kw)


def test_faults_refuse_a_cluster_they_do_not_own(cdir: Path) -> None:
    with pytest.raises(FaultError, match="embedded provider"):
        Faults(_cluster(cdir, provider="kind"))


def test_stop_kills_the_component_as_kwokctl_does(cdir: Path) -> None:
    proc = _sleeper(cdir)
    try:
        (cdir / "pids" / "kube-scheduler.pid").write_text(str(proc.pid))
        (cdir / "pids" / "etcd.pid").write_text(str(proc.pid + 10_000_000))  # no such pid
        f = Faults(_cluster(cdir))
        assert f.pid("kube-scheduler") == proc.pid and f.pid("etcd") is None
        assert f.stop("kube-scheduler") == proc.pid  # SIGKILL, as kwokctl's ForkExecKill
        assert not _running(proc.pid)  # gone, and reaped (this process is their subreaper)
        assert not (cdir / "pids" / "kube-scheduler.pid").exists()  # as kwokctl stop
        assert f._create_lock is not None  # no cluster creation may take its ports now
        assert [(e.fault, e.action) for e in f.events] == [("kube-scheduler", "inject")]
        with pytest.raises(FaultError, match="not running"):
            f.stop("kube-scheduler")
        f.release()
        assert f._create_lock is None
    finally:
        proc.kill()
        proc.wait()


def test_pid_ignores_a_recycled_pid(cdir: Path) -> None:
    """A pid file naming a process of another command line is not the component."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (cdir / "pids" / "etcd.pid").write_text(str(other.pid))
        assert Faults(_cluster(cdir)).pid("etcd") is None
    finally:
        other.kill()
        other.wait()


def test_kill_descheduler_finds_the_round_process_by_its_log(cdir: Path) -> None:
    logs = state_dir(cdir) / "logs"
    logs.mkdir(parents=True)
    with open(logs / "descheduler-positive-abcde.log", "w") as out:
        proc = _sleeper(cdir, stdout=out)
    bystander = _sleeper(cdir)
    try:
        f = Faults(_cluster(cdir))
        assert f.round_processes() == {proc.pid: "descheduler-positive-abcde"}
        with pytest.raises(FaultError, match="no running descheduler"):
            f.kill_descheduler("descheduler-negative")
        assert f.kill_descheduler("descheduler-positive") == [proc.pid]
        assert proc.wait(timeout=5) == -9
        assert bystander.poll() is None
    finally:
        for p in (proc, bystander):
            p.kill()
            p.wait()


# -- Trigger: a fault at a point of a round ---------------------------------------------------
def test_trigger_checks_its_point_and_heal_time() -> None:
    with pytest.raises(ValueError, match="point"):
        Trigger(None, "mid-cycle", inject=lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="heal_at"):
        Trigger(None, "before-job", inject=lambda: None, heal_at="never")  # type: ignore[arg-type]


def test_trigger_before_job_heals_at_round_end_and_looks_before_healing() -> None:
    calls: list[str] = []
    t = Trigger(
        None,  # type: ignore[arg-type]
        "before-job",
        inject=lambda: calls.append("inject"),
        heal=lambda: calls.append("heal"),
        heal_at="round-ended",
        on_before_job=lambda: calls.append("watch"),
        on_teardown=lambda: calls.append("look"),
    )
    for point in ("before-job", "round-ended", "before-job", "round-ended", "teardown"):
        t(point)  # a second round gets no second fault
    assert calls == ["watch", "inject", "heal", "look"]
    assert t.fired is not None and t.healed is not None and not t.errors


def test_trigger_fires_when_the_round_pod_logs(cdir: Path) -> None:
    logs = state_dir(cdir) / "logs"
    logs.mkdir(parents=True)
    (logs / "old-round.log").write_text("an earlier round's line\n")
    fired = threading.Event()
    faults: Any = SimpleNamespace(cdir=cdir)
    t = Trigger(faults, "descheduler-running", inject=fired.set, timeout=10)
    t("before-job")
    time.sleep(0.05)  # the watcher has polled a few times over the old log: not it
    assert not fired.is_set()
    (logs / "descheduler-positive-x.log").write_text('{"msg":"starting"}\n')
    assert fired.wait(5)
    t("round-ended")
    assert t.fired is not None and not t.errors


def test_trigger_fires_on_the_first_audited_eviction(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    audit.write_text("")
    fired = threading.Event()
    faults: Any = SimpleNamespace(cluster=SimpleNamespace(audit_log=audit))
    t = Trigger(faults, "after-eviction", inject=fired.set, timeout=10)
    t("before-job")

    def entry(code: int) -> str:
        return json.dumps(
            {
                "stage": "ResponseComplete",
                "verb": "create",
                "objectRef": {"resource": "pods", "subresource": "eviction", "name": "p"},
                "responseStatus": {"code": code},
                "user": {"username": "system:serviceaccount:kube-system:descheduler"},
            }
        )

    with audit.open("a") as fh:
        fh.write(entry(429) + "\n")  # refused by the PDB: not an eviction yet
        fh.flush()
        assert not fired.wait(0.1)
        fh.write(entry(201) + "\n")
    assert fired.wait(5)
    t("teardown")
    assert not t.errors


def test_trigger_says_when_its_point_never_came(cdir: Path) -> None:
    (state_dir(cdir) / "logs").mkdir(parents=True)
    faults: Any = SimpleNamespace(cdir=cdir)
    t = Trigger(faults, "descheduler-running", inject=lambda: None, timeout=10)
    t("before-job")
    t("round-ended")  # the round ended first (e.g. the Job was never scheduled)
    assert t.fired is None
    assert t.errors == ["descheduler-running never came (the round ended): fault not injected"]


# -- the framework's on_point hook: optional, and never in the way of the lab's teardown --------
def _ctx(on_point: Any = None) -> Any:
    from pytest_desched.experiments import ExperimentContext, lab_policy

    pol = lab_policy("pdb-lister-workaround")
    release: Any = SimpleNamespace(
        policy=pol,
        dry_run=False,
        descheduler_version="v0.36.0",
        versions=SimpleNamespace(workload_image="registry.k8s.io/pause:3.10"),
    )
    cluster: Any = SimpleNamespace(name="none", provider="none")  # no step reaches it
    return ExperimentContext(cluster, release, pol, "a", "b", on_point=on_point)


def test_on_point_teardown_is_called_after_a_failed_step_and_before_the_lab_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_desched.experiments import Experiment, run_experiment
    from pytest_desched.lab.lab import Lab

    order: list[str] = []
    monkeypatch.setattr(
        Lab, "teardown", lambda self, background=False: order.append("lab-teardown")
    )

    class Breaks(Experiment):
        def act(self) -> None:
            order.append("act")
            raise RoundError("the API server failed while waiting: connection refused")

    result = run_experiment(Breaks, _ctx(on_point=order.append), "pdb-lister-workaround")
    assert result.outcome == "error" and "connection refused" in result.message
    assert order == ["act", "teardown", "lab-teardown"]


def test_a_raising_on_point_never_skips_the_lab_teardown(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_desched.experiments import Experiment, run_experiment
    from pytest_desched.lab.lab import Lab

    torn: list[bool] = []
    monkeypatch.setattr(Lab, "teardown", lambda self, background=False: torn.append(True))

    def hook(point: str) -> None:
        raise FaultError(f"heal failed at {point}")

    class Quiet(Experiment):
        pass

    with pytest.raises(FaultError, match="heal failed at teardown"):
        run_experiment(Quiet, _ctx(on_point=hook), "pdb-lister-workaround")
    assert torn == [True]


def test_without_on_point_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_desched.experiments import Experiment, run_experiment
    from pytest_desched.lab.lab import Lab

    monkeypatch.setattr(Lab, "teardown", lambda self, background=False: None)

    class Quiet(Experiment):
        pass

    result = run_experiment(Quiet, _ctx(), "pdb-lister-workaround")
    assert result.outcome == "pass", result.message
    assert "lab_teardown" in result.timings


def test_heal_after_a_signal_starts_nothing_and_waits_for_nothing(
    cdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After SIGTERM a heal waited its whole timeout (over 60 s, seen in a cancelled suite) for
    a /readyz that the latched-gone API server never gives: now it returns at once, noted."""
    from pytest_desched import interrupts

    f = Faults(_cluster(cdir))
    calls: list[str] = []

    class Started(Exception):
        pass

    def start(down: list[str]) -> None:
        calls.append("start")
        raise Started

    monkeypatch.setattr(f, "_kwokctl_start", start)
    monkeypatch.setattr(f, "wait_api_ready", lambda timeout=None: calls.append("wait"))
    with pytest.raises(Started):  # no signal: it starts the stopped components
        f.heal_components(fresh_controllers=False)
    calls.clear()
    monkeypatch.setattr(interrupts, "_received", [(15, time.monotonic())])
    t0 = time.monotonic()
    assert f.heal_components() == []
    assert calls == [] and time.monotonic() - t0 < 0.5
    assert (f.events[-1].fault, f.events[-1].action) == ("heal", "skipped")
