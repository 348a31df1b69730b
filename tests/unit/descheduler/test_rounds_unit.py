"""The Job of one round, built from a CronJob model the way `kubectl create job --from` does."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from kubernetes import client

from pytest_desched.descheduler.rounds import (
    RoundError,
    ensure_suspended,
    force_dry_run,
    job_from_cronjob,
)
from pytest_desched.providers.embedded.kubelet import EXECUTOR_ANNOTATION, StandInKubelet

ARGS = ["--policy-config-file=/policy-dir/policy.yaml", "--dry-run=true", "--v=4"]
LABELS = {"app.kubernetes.io/name": "descheduler", "app.kubernetes.io/instance": "descheduler"}


def make_cronjob(pod_metadata: bool = True, suspend: bool | None = True) -> client.V1CronJob:
    pod_meta = (
        client.V1ObjectMeta(
            name="descheduler", labels=dict(LABELS), annotations={"checksum/config": "abc"}
        )
        if pod_metadata
        else None
    )
    return client.V1CronJob(
        api_version="batch/v1",
        kind="CronJob",
        metadata=client.V1ObjectMeta(
            name="descheduler", namespace="kube-system", uid="0a1b-cj-uid", labels=dict(LABELS)
        ),
        spec=client.V1CronJobSpec(
            schedule="*/2 * * * *",
            suspend=suspend,
            concurrency_policy="Forbid",
            job_template=client.V1JobTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"tmpl": "label"}, annotations={"a": "b"}),
                spec=client.V1JobSpec(
                    backoff_limit=0,
                    template=client.V1PodTemplateSpec(
                        metadata=pod_meta,
                        spec=client.V1PodSpec(
                            service_account_name="descheduler",
                            restart_policy="Never",
                            priority_class_name="system-cluster-critical",
                            containers=[
                                client.V1Container(
                                    name="descheduler",
                                    image="registry.k8s.io/descheduler/descheduler:v0.36.0",
                                    command=["/bin/descheduler"],
                                    args=list(ARGS),
                                    volume_mounts=[
                                        client.V1VolumeMount(
                                            name="policy-volume", mount_path="/policy-dir"
                                        )
                                    ],
                                )
                            ],
                            volumes=[
                                client.V1Volume(
                                    name="policy-volume",
                                    config_map=client.V1ConfigMapVolumeSource(name="descheduler"),
                                )
                            ],
                        ),
                    ),
                ),
            ),
        ),
    )


def serialized(obj: object) -> object:
    return copy.deepcopy(client.ApiClient().sanitize_for_serialization(obj))


def test_job_copies_the_job_template() -> None:
    cj = make_cronjob()
    job = job_from_cronjob(cj, "round-1")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["metadata"]["name"] == "round-1"
    assert job["metadata"]["namespace"] == "kube-system"
    assert job["metadata"]["labels"] == {"tmpl": "label"}
    assert job["spec"] == serialized(cj.spec.job_template.spec)  # in-cluster: unchanged
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"] == ARGS
    assert pod["serviceAccountName"] == "descheduler"
    assert pod["volumes"][0]["configMap"]["name"] == "descheduler"
    assert job["spec"]["backoffLimit"] == 0


def test_job_owned_by_the_cronjob_as_controller() -> None:
    job = job_from_cronjob(make_cronjob(), "round-1")
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "descheduler",
            "uid": "0a1b-cj-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_job_annotated_as_manual_instantiation() -> None:
    job = job_from_cronjob(make_cronjob(), "round-1")
    assert job["metadata"]["annotations"] == {
        "a": "b",
        "cronjob.kubernetes.io/instantiate": "manual",
    }


def test_executor_annotation_only_for_embedded() -> None:
    cj = make_cronjob()
    in_cluster = job_from_cronjob(cj, "r1")
    embedded = job_from_cronjob(cj, "r2", pod_annotations=StandInKubelet.pod_annotations)
    assert EXECUTOR_ANNOTATION not in in_cluster["spec"]["template"]["metadata"]["annotations"]
    assert embedded["spec"]["template"]["metadata"]["annotations"] == {
        "checksum/config": "abc",
        EXECUTOR_ANNOTATION: "embedded",
    }
    assert embedded["spec"]["template"]["metadata"]["labels"] == LABELS


def test_executor_annotation_when_template_has_no_metadata() -> None:
    job = job_from_cronjob(
        make_cronjob(pod_metadata=False), "r", pod_annotations=StandInKubelet.pod_annotations
    )
    assert job["spec"]["template"]["metadata"] == {"annotations": {EXECUTOR_ANNOTATION: "embedded"}}


def test_service_account_override() -> None:
    cj = make_cronjob()
    job = job_from_cronjob(cj, "r", service_account="no-rbac")
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "no-rbac"
    assert cj.spec.job_template.spec.template.spec.service_account_name == "descheduler"


def test_cronjob_not_mutated() -> None:
    cj = make_cronjob()
    before = serialized(cj)
    job = job_from_cronjob(
        cj, "r", pod_annotations=StandInKubelet.pod_annotations, service_account="other"
    )
    assert serialized(cj) == before
    # and the Job shares no structure with it
    job["spec"]["template"]["spec"]["containers"][0]["args"].append("--mutated")
    job["metadata"]["annotations"]["x"] = "y"
    job["metadata"]["labels"]["x"] = "y"
    assert serialized(cj) == before


# -- ensure_suspended -------------------------------------------------------------------
def release(cj: object) -> SimpleNamespace:
    return SimpleNamespace(namespace="kube-system", live_cronjob=lambda: cj)


def test_ensure_suspended_returns_live_cronjob() -> None:
    cj = make_cronjob(suspend=True)
    assert ensure_suspended(release(cj)) is cj


@pytest.mark.parametrize("suspend", [False, None])
def test_ensure_suspended_refuses_with_the_fix(suspend: bool | None) -> None:
    cj = make_cronjob(suspend=suspend)
    with pytest.raises(RoundError) as ei:
        ensure_suspended(release(cj))
    msg = str(ei.value)
    assert msg.startswith("CronJob kube-system/descheduler is not suspended; refusing to run")
    assert (
        'kubectl -n kube-system patch cronjob descheduler -p \'{"spec":{"suspend":true}}\'' in msg
    )


class _JobList:
    """The round's Job, Complete; lists block until `free` is set and are counted."""

    def __init__(self) -> None:
        import threading

        self.free = threading.Event()
        self.lists: list[str] = []

    def list_namespaced_job(self, ns: str, field_selector: str) -> object:
        import threading

        self.free.wait(10)
        self.lists.append(threading.current_thread().name)
        cond = SimpleNamespace(type="Complete", status="True")
        job = SimpleNamespace(
            metadata=SimpleNamespace(
                uid="job-uid", namespace="kube-system", name="descheduler-positive"
            ),
            status=SimpleNamespace(conditions=[cond]),
        )
        return SimpleNamespace(items=[job], metadata=SimpleNamespace(resource_version="1"))


def test_the_verdict_wait_starts_when_the_round_ends_and_settle_reads_it() -> None:
    """start_settling waits in the background (changing nothing on the round); settle()
    joins that wait, then reads the verdict itself."""
    from pathlib import Path

    from pytest_desched.descheduler.decisions import RoundResult
    from pytest_desched.descheduler.rounds import Round

    jobs = _JobList()
    cluster = SimpleNamespace(batch=jobs)
    rnd = Round("descheduler-positive", "kube-system", "job-uid", True, 0, "", RoundResult(),
                0.0, 1.0, "descheduler", "embedded", log_path=Path("x"))  # fmt: skip
    rnd.start_settling(cluster)  # type: ignore[arg-type]
    assert rnd.settling is not None and rnd.settling.is_alive()  # waiting on the Job
    jobs.free.set()
    rnd.settling.join(10)
    assert jobs.lists == ["settle descheduler-positive"]
    assert rnd.conditions == {} and not rnd.settled  # the background wait changed nothing
    assert rnd.settle(cluster) is rnd  # type: ignore[arg-type]
    assert rnd.conditions == {"Complete": "True"} and rnd.succeeded
    assert jobs.lists[1:] == ["MainThread"]  # read here, at once: the Job was Complete


@pytest.mark.parametrize(
    "args",
    [
        ["--policy-config-file=/p.yaml", "--dry-run=false", "--v=4"],
        ["--policy-config-file=/p.yaml", "--dry-run", "--v=4", "--dry-run=False"],
        ["--policy-config-file=/p.yaml", "--v=4"],
    ],
)
def test_a_dry_run_twin_job_runs_in_dry_run_whatever_its_cronjob_says(args: list[str]) -> None:
    """A fidelity twin: the real half's CronJob (dry run off), its Job with dry run on."""
    cj = make_cronjob()
    cj.spec.job_template.spec.template.spec.containers[0].args = list(args)
    job = job_from_cronjob(cj, "descheduler-positive-dry")
    force_dry_run(job)
    got = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in got if a.startswith("--dry-run")] == ["--dry-run=true"]
    assert [a for a in got if not a.startswith("--dry-run")] == [
        a for a in args if not a.startswith("--dry-run")
    ]
    assert cj.spec.job_template.spec.template.spec.containers[0].args == args  # untouched
