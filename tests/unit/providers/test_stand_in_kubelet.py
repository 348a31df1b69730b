"""The supervised stand-in kubelet's choices, the runbook's Job names and label, the pre-flight.

Which pods the kubelet runs (and with which binary), which it refuses (with the reason a
user reads in the event), which it leaves to kwok; the facts it hands to the waiting round;
that kwok's stages leave exactly those pods alone; names that the runbook's commands find.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from pytest_desched.descheduler.preflight import diff_objects
from pytest_desched.descheduler.rounds import RUN_ID, RUN_LABEL, job_from_cronjob, runbook_job_name
from pytest_desched.providers.embedded import kubelet
from pytest_desched.providers.embedded.kubelet import (
    EXECUTOR_ANNOTATION,
    Supervisor,
    classify,
    read_facts,
    read_images,
    register_image,
    write_facts,
)
from pytest_desched.providers.jobs import MetricsScrape, PodRun
from pytest_desched.tools.resources import manifest_path
from tests.unit.descheduler.test_rounds_unit import make_cronjob

IMAGE = "registry.k8s.io/descheduler/descheduler:v0.36.0"
IMAGES = {IMAGE: "/bin/descheduler-v0.36.0"}


def pod(
    *,
    image: str = IMAGE,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str = "Job",
    node: str | None = "w-1",
    phase: str | None = "Pending",
    deleting: bool = False,
    uid: str = "uid-1",
) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name="descheduler-positive-abcde",
            namespace="kube-system",
            uid=uid,
            labels={"app.kubernetes.io/name": "descheduler", "job-name": "descheduler-positive"}
            if labels is None
            else labels,
            annotations=annotations or {},
            owner_references=[SimpleNamespace(kind=owner)],
            deletion_timestamp="now" if deleting else None,
        ),
        spec=SimpleNamespace(
            node_name=node,
            containers=[SimpleNamespace(image=image)],
            service_account_name="descheduler",
            active_deadline_seconds=None,
        ),
        status=SimpleNamespace(phase=phase),
    )


@pytest.mark.parametrize(
    ("kwargs", "action"),
    [
        ({}, "run"),  # `kubectl create job --from=cronjob/descheduler`: the chart's label
        ({"labels": {"job-name": "x"}, "annotations": {EXECUTOR_ANNOTATION: "embedded"}}, "run"),
        ({"labels": {"app": "spread-demo", "job-name": "x"}}, "skip"),  # anyone's Job: kwok's
        ({"owner": "ReplicaSet"}, "skip"),
        ({"node": None}, "skip"),  # not scheduled yet: a kubelet waits too
        ({"phase": "Running"}, "skip"),  # started already (once only)
        ({"phase": "Succeeded"}, "skip"),
        ({"deleting": True}, "skip"),
        ({"image": "example.invalid/other:v1"}, "refuse"),
    ],
)
def test_which_pods_the_stand_in_kubelet_runs(kwargs: dict[str, Any], action: str) -> None:
    got, detail = classify(pod(**kwargs), IMAGES)
    assert got == action, detail
    if action == "run":
        assert detail == IMAGES[IMAGE]  # the binary built for the release's version


def test_a_refusal_names_the_image_and_the_fix() -> None:
    _, why = classify(pod(image="example.invalid/other:v1"), IMAGES)
    assert "'example.invalid/other:v1'" in why and IMAGE in why
    assert "kubectl create job --from=cronjob/" in why and "--desched-descheduler " in why
    _, why = classify(pod(), {})
    assert "runnable: none" in why


def test_registered_images_merge_atomically(tmp_path: Path) -> None:
    register_image(tmp_path, IMAGE, Path("/a"))
    register_image(tmp_path, "registry.k8s.io/descheduler/descheduler:v0.35.0", Path("/b"))
    register_image(tmp_path, IMAGE, Path("/c"))
    assert read_images(tmp_path) == {
        IMAGE: "/c",
        "registry.k8s.io/descheduler/descheduler:v0.35.0": "/b",
    }
    assert read_images(tmp_path / "absent") == {}


class _Core:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def create_namespaced_event(self, ns: str, body: dict[str, Any]) -> None:
        self.events.append(body)


def test_dispatch_runs_once_and_refuses_once_with_a_warning_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_image(tmp_path, IMAGE, Path("/bin/descheduler"))
    core = _Core()
    ran: list[tuple[str, Path]] = []
    monkeypatch.setattr(
        Supervisor, "run_one", lambda self, p, binary: ran.append((p.metadata.uid, binary))
    )
    sup = Supervisor(SimpleNamespace(core=core), tmp_path, lambda _msg: None)  # type: ignore[arg-type]
    assert sup.handle(pod(node=None)) == "skip"  # seen unscheduled first ...
    assert sup.handle(pod()) == "run"  # ... run once scheduled
    assert sup.handle(pod()) == "skip"  # a MODIFIED event of the same pod: not twice
    for t in sup.threads:
        t.join(5)
    assert ran == [("uid-1", Path("/bin/descheduler"))]
    other = pod(image="example.invalid/other:v1", uid="uid-2")
    assert sup.handle(other) == "refuse"
    assert sup.handle(other) == "skip"  # one event per pod
    (event,) = core.events
    assert event["type"] == "Warning" and event["reason"] == kubelet.REFUSED_REASON
    assert event["involvedObject"]["uid"] == "uid-2"
    assert "example.invalid/other:v1" in event["message"]
    assert kubelet.facts_path(tmp_path, "uid-2", "refused").read_text() == event["message"]


def test_facts_round_trip_for_the_waiting_round(tmp_path: Path) -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    run = PodRun(
        "kube-system", "p", "uid-9", "descheduler", ["descheduler", "--v=4"], 0, now,
        now + dt.timedelta(seconds=2), "{}\n", tmp_path / "p.log", ["n"],
        MetricsScrape(attempts=1, last_status="ConnectionRefusedError"),
    )  # fmt: skip
    write_facts(tmp_path, run)
    assert read_facts(tmp_path, "uid-9") == run
    assert read_facts(tmp_path, "absent") is None


def _stage(name: str) -> dict[str, Any]:
    docs = yaml.safe_load_all(manifest_path("kwok-stages.yaml").read_text())
    return next(d for d in docs if d["metadata"]["name"] == name)


@pytest.mark.parametrize("stage", ["pod-ready", "pod-complete"])
def test_kwok_leaves_descheduler_pods_to_the_stand_in_kubelet(stage: str) -> None:
    """kwok's stages skip exactly the pods `is_descheduler_pod` claims: label or annotation."""
    exprs = {e["key"]: e for e in _stage(stage)["spec"]["selector"]["matchExpressions"]}
    label = exprs[f'.metadata.labels["{kubelet.CHART_NAME_LABEL}"]']
    assert (label["operator"], label["values"]) == ("NotIn", [kubelet.CHART_NAME])
    annotation = exprs[f'.metadata.annotations["{EXECUTOR_ANNOTATION}"]']
    assert annotation["operator"] == "DoesNotExist"


# -- the runbook's names, the run's label ------------------------------------------------------
class _Batch:
    def __init__(self, existing: set[str]) -> None:
        self.existing = existing

    def read_namespaced_job(self, name: str, ns: str) -> Any:
        if name in self.existing:
            return SimpleNamespace()
        raise ApiException(status=404, reason="Not Found")


def test_round_jobs_carry_the_runbook_name_suffixed_only_on_collision() -> None:
    def name(existing: set[str]) -> str:
        cluster = SimpleNamespace(batch=_Batch(existing))
        return runbook_job_name(cluster, "kube-system", "descheduler-positive", "0123abcd")  # type: ignore[arg-type]

    assert name(set()) == "descheduler-positive"
    assert name({"descheduler-positive"}) == "descheduler-positive-0123a"
    both = name({"descheduler-positive", "descheduler-positive-0123a"})
    assert both.startswith("descheduler-positive-0123a-") and len(both) == 31


def test_round_jobs_and_their_pods_carry_the_run_label() -> None:
    job = job_from_cronjob(make_cronjob(), "descheduler-positive", labels={RUN_LABEL: RUN_ID})
    assert job["metadata"]["name"] == "descheduler-positive"
    assert job["metadata"]["labels"][RUN_LABEL] == RUN_ID
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[RUN_LABEL] == RUN_ID
    assert pod_labels["app.kubernetes.io/name"] == "descheduler"  # the chart's, kept
    assert job["metadata"]["labels"]["tmpl"] == "label"


# -- pre-flight, kubectl's cache ----------------------------------------------------------------
def test_preflight_lists_what_the_install_creates() -> None:
    diff = (
        "diff -u -N /tmp/LIVE-1/v1.ServiceAccount.kube-system.descheduler "
        "/tmp/MERGED-2/v1.ServiceAccount.kube-system.descheduler\n"
        "--- /tmp/LIVE-1/v1.ServiceAccount.kube-system.descheduler\t2026-01-01\n"
        "+++ /tmp/MERGED-2/v1.ServiceAccount.kube-system.descheduler\t2026-01-01\n"
        "@@ -0,0 +1,3 @@\n+apiVersion: v1\n"
        "+++ /tmp/MERGED-2/batch.v1.CronJob.kube-system.descheduler\t2026-01-01\n"
    )
    assert diff_objects(diff) == [
        "v1.ServiceAccount.kube-system.descheduler",
        "batch.v1.CronJob.kube-system.descheduler",
    ]


def test_kubectl_cache_is_the_runs_own(tmp_path: Path) -> None:
    from pytest_desched.providers.base import Cluster

    c = Cluster(
        "c", "embedded", tmp_path / "kc", toolchain=SimpleNamespace(cache_dir=tmp_path),  # type: ignore[arg-type]
        workdir=tmp_path / "cluster", kube_cache_dir=tmp_path / "run" / "kube-cache",
        audit_unavailable_why="test",
    )  # fmt: skip
    env = c.env()
    assert env["KUBECACHEDIR"] == str(tmp_path / "run" / "kube-cache")
    assert env["KUBECONFIG"] == str(tmp_path / "kc")
    c.kube_cache_dir = None
    assert c.env()["KUBECACHEDIR"] == str(tmp_path / "cluster" / "kube-cache")


class _RoundApi:
    """A round Job with one pod, never Complete; counts the API reads (Job and pod list)."""

    def __init__(self) -> None:
        self.reads = 0

    def read_namespaced_job(self, name: str, ns: str) -> Any:
        self.reads += 1
        return SimpleNamespace(
            metadata=SimpleNamespace(uid="job-uid"), status=SimpleNamespace(conditions=None)
        )

    def list_namespaced_pod(self, ns: str, label_selector: str) -> Any:
        p = pod(phase="Running")
        p.metadata.owner_references = [SimpleNamespace(kind="Job", uid="job-uid")]
        return SimpleNamespace(items=[p])


def test_a_round_ends_on_the_kubelets_facts_without_another_api_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between API probes the waiting round reads only the kubelet's local facts (written
    before the pod's status says it ended): the exit is seen within a file poll."""
    import threading

    api = _RoundApi()
    cluster = SimpleNamespace(batch=api, core=api, workdir=tmp_path / "cluster")
    # The kubelet module's clock stands still: no API probe is ever due again after the first.
    monkeypatch.setattr(kubelet, "time", SimpleNamespace(monotonic=lambda: 100.0))
    now = dt.datetime.now(dt.UTC)
    run = PodRun("kube-system", "descheduler-positive-abcde", "uid-1", "descheduler", [], 0,
                 now, now, "log\n", None, [])  # fmt: skip
    timer = threading.Timer(0.05, write_facts, (cluster.workdir, run))  # the pod exits later
    timer.start()
    try:
        runs = kubelet.wait_runs(
            cluster, "descheduler-positive", "kube-system", tmp_path / "logs", 10, until_exit=True
        )
    finally:
        timer.cancel()
    assert [r.uid for r in runs] == ["uid-1"] and runs[0].exit_code == 0
    assert api.reads == 1  # the first probe only: the exit came from the file


def test_a_bookmark_moves_the_watch_on_without_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client hands a BOOKMARK's object over undecoded (a dict): the watch resumes from
    its resourceVersion; reading it as a pod logged `'dict' object has no attribute
    'metadata'` and re-listed every pod after each bookmark."""
    import threading

    from kubernetes import watch

    stop, resumed, lists, logged = threading.Event(), [], [], []

    class _Listing:
        def list_pod_for_all_namespaces(self, **_kw: Any) -> Any:
            lists.append(1)
            return SimpleNamespace(items=[], metadata=SimpleNamespace(resource_version="10"))

    class _Watch:
        def stream(self, _fn: Any, **kw: Any) -> Any:
            resumed.append(kw["resource_version"])
            if len(resumed) == 1:
                yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}}
            else:
                stop.set()
                yield from ()

    monkeypatch.setattr(watch, "Watch", _Watch)
    sup = Supervisor(SimpleNamespace(core=_Listing()), tmp_path, logged.append)  # type: ignore[arg-type]
    sup.serve(stop, tmp_path / "ready")
    assert logged == [] and lists == [1]  # listed once: no error, no re-list
    assert resumed == ["10", "42"]


@pytest.mark.parametrize("module", ["kubelet", "prometheus_front"])
def test_the_provider_s_own_processes_start_without_importing_themselves_first(
    module: str,
) -> None:
    """`python -m pytest_desched.providers.embedded.<module>` (the stand-in kubelet, the
    Prometheus front): the package imports none of its modules, so runpy finds the module
    unimported and runs one copy (no RuntimeWarning, here made an error)."""
    import subprocess
    import sys

    name = f"pytest_desched.providers.embedded.{module}"
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", name, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
    assert "RuntimeWarning" not in done.stderr, done.stderr
