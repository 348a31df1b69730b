"""The supervised stand-in kubelet: one process per embedded cluster runs every round pod.

kwok nodes run nothing, so this process watches Job pods cluster-wide and runs each
descheduler pod once on the host (`pod_run`: its volumes, identity, binary and status),
however its Job was created; `StandInKubelet` is the JobRunner the engine asks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_desched.errors import RoundError
from pytest_desched.kube import (
    UnscheduledGuard,
    WaitTimeout,
    bound_requests,
    owned_by_job,
    wait_for,
)
from pytest_desched.providers.base import Cluster
from pytest_desched.providers.embedded.pod_run import run_pod, until_api_answers, write_terminated
from pytest_desched.providers.jobs import MetricsScrape, PodRun, end_failed_round, utcnow

# Annotation on round pods: kwok leaves them Running and the plugin runs them (see kwok-stages.yaml).
EXECUTOR_ANNOTATION = "desched.pytest.io/executor"


# -- the supervised stand-in kubelet -------------------------------------------------------
# One small process per embedded cluster, started with it and killed with it (its command
# line names the cluster's directory, which delete_cluster looks for). It runs every pod
# of a descheduler Job however the Job was created (the plugin, `kubectl create job
# --from=cronjob/...`, the CronJob's schedule), as a kubelet would; kwok leaves exactly
# these pods alone (manifests/kwok-stages.yaml keys on the same label and annotation).
CHART_NAME_LABEL = "app.kubernetes.io/name"  # the chart puts it on its pod template
CHART_NAME = "descheduler"
STATE_DIR = "stand-in-kubelet"  # under the cluster's directory
REFUSED_REASON = "StandInKubeletCannotRun"
JOB_POD_SELECTOR = "job-name"  # every Job pod carries it (its value is the Job's name)
# wait_runs: the API (the Job, its pods) is asked every API_PROBE_S, the kubelet's local facts
# files every LOCAL_PROBE_S (a stat, no request): the round's end is seen within that.
API_PROBE_S = 0.1
LOCAL_PROBE_S = 0.01


def state_dir(cluster_dir: Path) -> Path:
    return cluster_dir / STATE_DIR


def images_file(cluster_dir: Path) -> Path:
    return state_dir(cluster_dir) / "images.json"


def register_image(cluster_dir: Path, image: str, binary: Path) -> None:
    """Let the supervised kubelet run pods of `image` with `binary` (atomic, merge)."""
    path = images_file(cluster_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = read_images(cluster_dir)
    if images.get(image) == str(binary):
        return
    images[image] = str(binary)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(images, indent=1, sort_keys=True))
    tmp.replace(path)


def read_images(cluster_dir: Path) -> dict[str, str]:
    try:
        return dict(json.loads(images_file(cluster_dir).read_text()))
    except (OSError, ValueError):
        return {}


def is_descheduler_pod(pod: Any) -> bool:
    """A pod of a descheduler Job: a Job's pod with the chart's label or the plugin's mark."""
    meta = pod.metadata
    if not any(o.kind == "Job" for o in meta.owner_references or []):
        return False
    labels, annotations = meta.labels or {}, meta.annotations or {}
    return labels.get(CHART_NAME_LABEL) == CHART_NAME or EXECUTOR_ANNOTATION in annotations


def classify(pod: Any, images: dict[str, str]) -> tuple[str, str]:
    """What the stand-in kubelet does with a pod: ("run", binary), ("refuse", why), ("skip", why).

    Like a kubelet it only starts a scheduled, not yet started pod; unlike one it can run
    only the descheduler images it has a binary for, and says so instead of faking a run.
    """
    if not is_descheduler_pod(pod):
        return "skip", "not a descheduler Job pod"
    if pod.metadata.deletion_timestamp is not None:
        return "skip", "being deleted"
    if not pod.spec.node_name:
        return "skip", "not scheduled yet"
    if (pod.status.phase if pod.status else None) not in (None, "Pending"):
        return "skip", f"already {pod.status.phase}"
    image = pod.spec.containers[0].image
    binary = images.get(image)
    if binary is None:
        known = ", ".join(sorted(images)) or "none"
        return "refuse", (
            f"the embedded cluster's stand-in kubelet runs only a descheduler release's own "
            f"image as its locally built binary; {image!r} is not one (runnable: {known}). "
            f"Use the CronJob's image (kubectl create job --from=cronjob/NAME), or install "
            f"that version with --desched-descheduler so its binary is built"
        )
    return "run", binary


def facts_path(cluster_dir: Path, uid: str, kind: str = "json") -> Path:
    return state_dir(cluster_dir) / "runs" / f"{uid}.{kind}"


def write_facts(cluster_dir: Path, run: PodRun) -> Path:
    """The PodRun as JSON, written atomically before the pod's status says it ended."""
    path = facts_path(cluster_dir, run.uid)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = asdict(run)
    doc["started"], doc["finished"] = run.started.isoformat(), run.finished.isoformat()
    doc["log_path"] = str(run.log_path) if run.log_path else None
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)
    return path


def read_facts(cluster_dir: Path, uid: str) -> PodRun | None:
    try:
        doc = json.loads(facts_path(cluster_dir, uid).read_text())
    except (OSError, ValueError):
        return None
    doc["started"] = dt.datetime.fromisoformat(doc["started"])
    doc["finished"] = dt.datetime.fromisoformat(doc["finished"])
    doc["log_path"] = Path(doc["log_path"]) if doc.get("log_path") else None
    doc["metrics"] = MetricsScrape(**doc["metrics"]) if doc.get("metrics") else None
    return PodRun(**doc)


class Supervisor:
    """Watch Job pods cluster-wide; run each descheduler pod once, in a thread of its own."""

    def __init__(self, cluster: Cluster, cluster_dir: Path, log: Callable[[str], None]) -> None:
        self.cluster, self.cluster_dir, self.log = cluster, cluster_dir, log
        self.seen: set[str] = set()
        # uid -> set when the pod is deleted while its process runs (run_pod ends it then)
        self.stops: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def handle(self, pod: Any) -> str:
        """Dispatch one pod event; returns what was decided (for the log and tests)."""
        action, detail = classify(pod, read_images(self.cluster_dir))
        uid = pod.metadata.uid
        with self.lock:
            if pod.metadata.deletion_timestamp is not None and uid in self.stops:
                self.stops[uid].set()  # a kubelet ends a deleted pod's container
                return "stop"
            if action == "skip" or uid in self.seen:
                return "skip"
            self.seen.add(uid)
            if action == "run":
                self.stops[uid] = threading.Event()
        if action == "refuse":
            self.refuse(pod, detail)
            return "refuse"
        t = threading.Thread(target=self.run_one, args=(pod, Path(detail)), daemon=True)
        self.threads.append(t)
        t.start()
        return "run"

    def gone_since_last_list(self, listed_uids: set[str]) -> list[str]:
        """After a (re-)list: stop every running pod the listing no longer has. Its DELETED
        event fell in a watch gap (an error, a stuck stream under load); without this a
        deleted long-lived pod's process would run on to its deadline. Returns the uids."""
        with self.lock:
            gone = [u for u, ev in self.stops.items() if u not in listed_uids and not ev.is_set()]
            for uid in gone:
                self.stops[uid].set()
        return gone

    def refuse(self, pod: Any, why: str) -> None:
        """Leave the pod Pending, say why in a Warning event (and a file the plugin reads)."""
        path = facts_path(self.cluster_dir, pod.metadata.uid, "refused")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(why)
        self.log(f"refused {pod.metadata.namespace}/{pod.metadata.name}: {why}")
        now = utcnow()
        body = {
            "metadata": {
                "generateName": f"{pod.metadata.name}.",
                "namespace": pod.metadata.namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.metadata.name,
                "namespace": pod.metadata.namespace,
                "uid": pod.metadata.uid,
            },
            "reason": REFUSED_REASON,
            "message": why,
            "type": "Warning",
            "source": {"component": "desched-stand-in-kubelet", "host": pod.spec.node_name},
            "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "count": 1,
        }
        try:
            self.cluster.core.create_namespaced_event(pod.metadata.namespace, body)
        except Exception as exc:  # the file above still tells the plugin
            self.log(f"event for {pod.metadata.name} not created: {type(exc).__name__}: {exc}")

    def run_one(self, pod: Any, binary: Path) -> None:
        ns, name = pod.metadata.namespace, pod.metadata.name
        job = (pod.metadata.labels or {}).get(JOB_POD_SELECTOR, "")
        plugin_round = EXECUTOR_ANNOTATION in (pod.metadata.annotations or {})

        def finished(run: PodRun) -> None:
            if run.exit_code != 0 and plugin_round and job:
                # The plugin's rounds fail fast (RoundFailed): no retry pod may start meanwhile.
                from kubernetes.client.rest import ApiException  # heavy: kept off import

                try:
                    until_api_answers(
                        lambda: self.cluster.batch.patch_namespaced_job(
                            job, ns, {"spec": {"backoffLimit": 0}}
                        )
                    )
                except ApiException as exc:
                    run.notes.append(f"could not stop the Job's retries ({exc.status})")
            write_facts(self.cluster_dir, run)

        deadline = pod.spec.active_deadline_seconds or 600
        self.log(f"running {ns}/{name} with {binary}")
        try:
            run = run_pod(
                self.cluster,
                pod,
                binary,
                state_dir(self.cluster_dir) / "logs",
                timeout=float(deadline),
                on_finished=finished,
                stop=self.stops.get(pod.metadata.uid),
            )
            self.log(f"{ns}/{name} exited {run.exit_code}")
        except Exception as exc:  # the pod must end either way, never stay Running
            why = f"stand-in kubelet could not run the pod: {type(exc).__name__}: {exc}"
            self.log(f"{ns}/{name}: {why}")
            now = utcnow()
            fail = PodRun(
                ns,
                name,
                pod.metadata.uid,
                pod.spec.service_account_name or "default",
                [],
                1,
                now,
                now,
                why + "\n",
                None,
                [why],
            )
            try:
                finished(fail)
                until_api_answers(lambda: write_terminated(self.cluster, pod, 1, why, now, now))
            except Exception as exc2:
                self.log(f"{ns}/{name}: could not record the failure: {exc2}")

    def serve(self, stop: Any, ready: Path, timeout_s: int = 30) -> None:
        """List then watch Job pods until `stop` is set or the cluster's directory is gone."""
        from kubernetes import watch  # heavy (the client): kept off import
        from kubernetes.client.rest import ApiException

        core = self.cluster.core
        rv: str | None = None
        while not stop.is_set() and self.cluster_dir.is_dir():
            try:
                if rv is None:
                    listed = core.list_pod_for_all_namespaces(label_selector=JOB_POD_SELECTOR)
                    for p in listed.items:
                        self.handle(p)
                    if gone := self.gone_since_last_list({p.metadata.uid for p in listed.items}):
                        self.log(f"stopping {gone}: deleted while the watch was not looking")
                    rv = listed.metadata.resource_version
                    ready.write_text(str(os.getpid()))
                for ev in watch.Watch().stream(
                    core.list_pod_for_all_namespaces,
                    label_selector=JOB_POD_SELECTOR,
                    resource_version=rv,
                    timeout_seconds=timeout_s,
                    allow_watch_bookmarks=True,
                ):
                    obj = ev["object"]
                    if ev["type"] == "BOOKMARK":  # the client leaves it a dict: only its rv
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        continue
                    rv = obj.metadata.resource_version
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self.handle(obj)
                    elif ev["type"] == "DELETED" and obj.metadata.uid in self.stops:
                        self.stops[obj.metadata.uid].set()  # removed before we saw it marked
            except ApiException as exc:
                rv = None  # 410 Gone and friends: list again
                if exc.status != 410:
                    self.log(f"watch: {exc.status} {exc.reason}")
                    stop.wait(0.5)  # back off from an API server that refuses, then re-list
            except Exception as exc:  # the API server went away (cluster being deleted)
                rv = None
                self.log(f"watch: {type(exc).__name__}: {str(exc)[:200]}")
                stop.wait(0.5)


def supervisor_argv(kubeconfig: Path, cluster_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest_desched.providers.embedded.kubelet",
        "--kubeconfig",
        str(kubeconfig),
        "--cluster-dir",
        str(cluster_dir),
    ]


def main(argv: list[str] | None = None) -> int:
    """The supervised process: `python -m pytest_desched.providers.embedded.kubelet`."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", type=Path, required=True)
    ap.add_argument("--cluster-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    sdir = state_dir(args.cluster_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def log(msg: str) -> None:
        print(f"{utcnow().isoformat()} {msg}", flush=True)

    cluster = Cluster(
        name=args.cluster_dir.name,
        provider="embedded",
        kubeconfig=args.kubeconfig,
        toolchain=None,  # type: ignore[arg-type]  # runs binaries it is told about, builds none
        workdir=args.cluster_dir,
        audit_unavailable_why="not used by the stand-in kubelet",
    )
    bound_requests(cluster.api_client)  # a dead control plane fails a call, never hangs it
    log(f"stand-in kubelet for {args.cluster_dir.name} (pid {os.getpid()})")
    Supervisor(cluster, args.cluster_dir, log).serve(stop, sdir / "ready")
    return 0


def wait_runs(
    cluster: Cluster,
    job_name: str,
    namespace: str,
    log_dir: Path,
    timeout: float = 300,
    until_exit: bool = False,
) -> list[PodRun]:
    """The runs of the Job's pods as the supervised kubelet records them, until the Job ends.

    A pod that exits non-zero ends the round at once with `RoundFailed`; a pod the kubelet
    refused (another image) ends it with `RoundError` naming why. `until_exit`: a pod that
    exited 0 (its status written back) ends the wait; the Job controller marks the Job
    Complete up to its 1 s sync batch later, which the caller checks then (Round.settle).
    """
    cdir = cluster.workdir
    assert cdir is not None, "the embedded cluster has a directory"
    runs: dict[str, PodRun] = {}
    pods_seen: dict[str, str] = {}  # uid -> name, of this Job's pods at the last API probe
    unscheduled = UnscheduledGuard(f"round Job {namespace}/{job_name}")
    Seen = tuple[dict[str, str], list[tuple[str, str | None]]]  # (Job conditions, pods)
    last: dict[str, Any] = {"seen": ({}, []), "at": 0.0}  # the last API probe's, and when

    def take(uid: str, name: str) -> None:
        """The kubelet's local word on one pod: refused, or its run (facts) once it ended."""
        refused = facts_path(cdir, uid, "refused")
        if refused.is_file():
            raise RoundError(f"pod {namespace}/{name}: {refused.read_text()}")
        if uid in runs or (run := read_facts(cdir, uid)) is None:
            return
        if run.log_path is not None and run.log_path.is_file():
            log_dir.mkdir(parents=True, exist_ok=True)
            copy = log_dir / run.log_path.name
            if copy.resolve() != run.log_path.resolve():
                shutil.copyfile(run.log_path, copy)
            run.log_path = copy
        runs[uid] = run
        if run.exit_code != 0:
            raise end_failed_round(cluster, job_name, namespace, run)

    def probe() -> Seen:
        # Between API probes (every API_PROBE_S) only the kubelet's local files are read: it
        # writes a pod's facts before the pod's status says it ended, so the round ends within
        # a file poll of the exit instead of an API poll of it.
        if pods_seen and time.monotonic() - last["at"] < API_PROBE_S:
            for uid, name in list(pods_seen.items()):
                take(uid, name)
            seen: Seen = last["seen"]
            return seen
        job = cluster.batch.read_namespaced_job(job_name, namespace)
        conds = {c.type: c.status for c in job.status.conditions or []}
        job_uid = getattr(getattr(job, "metadata", None), "uid", None)
        pods = [  # this Job's own: not those of an earlier, deleted Job of the same name
            p
            for p in cluster.core.list_namespaced_pod(
                namespace, label_selector=f"{JOB_POD_SELECTOR}={job_name}"
            ).items
            if owned_by_job(p, job_uid)
        ]
        unscheduled.check(pods)
        pods_seen.clear()
        pods_seen.update({p.metadata.uid: p.metadata.name for p in pods})
        for p in pods:
            take(p.metadata.uid, p.metadata.name)
        seen = (conds, [(p.metadata.name, p.status.phase if p.status else None) for p in pods])
        last.update(seen=seen, at=time.monotonic())
        return seen

    try:
        wait_for(
            f"Job {namespace}/{job_name} to finish",
            probe,
            lambda seen: (
                seen[0].get("Complete") == "True"
                or seen[0].get("Failed") == "True"
                or (until_exit and any(r.exit_code == 0 for r in runs.values()))
            ),
            timeout,
            describe=lambda seen: f"conditions={seen[0]}, pods={seen[1]}" if seen else "nothing",
            max_interval=LOCAL_PROBE_S,
        )
    except WaitTimeout as exc:
        log = state_dir(cdir) / "kubelet.log"
        raise WaitTimeout(f"{exc}; the stand-in kubelet's log: {log}") from None
    return sorted(runs.values(), key=lambda r: r.started)


def stopped_runs(cluster: Cluster, uids: list[str], log_dir: Path, timeout: float) -> list[PodRun]:
    """The runs of deleted pods, once the supervised kubelet ended their processes (it writes a
    run's facts only after its process exited: a run read here has no process left)."""
    cdir = cluster.workdir
    assert cdir is not None, "the embedded cluster has a directory"
    runs = wait_for(
        f"the stand-in kubelet to end the processes of {len(uids)} deleted pod(s)",
        lambda: {uid: read_facts(cdir, uid) for uid in uids},
        lambda got: all(r is not None for r in got.values()),
        timeout,
        describe=lambda got: f"ended: {sorted(u for u, r in got.items() if r is not None)}",
        max_interval=LOCAL_PROBE_S * 10,
    )
    out = [r for r in runs.values() if r is not None]
    for run in out:
        if run.log_path is not None and run.log_path.is_file():
            log_dir.mkdir(parents=True, exist_ok=True)
            copy = log_dir / run.log_path.name
            if copy.resolve() != run.log_path.resolve():
                shutil.copyfile(run.log_path, copy)
            run.log_path = copy
    return sorted(out, key=lambda r: r.started)


class StandInKubelet:
    """The embedded cluster's JobRunner (providers.base): the supervised kubelet's runs."""

    name = "embedded"
    # Marks the plugin's own rounds (kwok leaves every descheduler pod alone regardless).
    pod_annotations = {EXECUTOR_ANNOTATION: "embedded"}

    def register(self, cluster: Cluster, image: str, binary: Path) -> None:
        assert cluster.workdir is not None
        register_image(cluster.workdir, image, binary)

    def stopped(
        self, cluster: Cluster, uids: list[str], log_dir: Path, timeout: float = 60
    ) -> list[PodRun]:
        return stopped_runs(cluster, uids, log_dir, timeout)

    def live_log(self, cluster: Cluster, pod_name: str) -> str | None:
        """What a running pod's process has written so far (None: not started): a
        long-lived descheduler's cycles are read while it runs (descheduler/long_lived.py)."""
        assert cluster.workdir is not None
        try:
            return (state_dir(cluster.workdir) / "logs" / f"{pod_name}.log").read_text()
        except OSError:
            return None

    def run(
        self,
        cluster: Cluster,
        job_name: str,
        namespace: str,
        binary: Path,
        log_dir: Path,
        timeout: float = 300,
        until_exit: bool = False,
    ) -> list[PodRun]:
        return wait_runs(cluster, job_name, namespace, log_dir, timeout, until_exit)


if __name__ == "__main__":
    raise SystemExit(main())
