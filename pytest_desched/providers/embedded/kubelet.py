"""Run a descheduler round pod for the embedded cluster, where kwok nodes run nothing.

This is the part of a kubelet the embedded cluster lacks, limited to what a round pod
needs: the pod's own command and args, its ConfigMap volumes as files, its
ServiceAccount identity (a pod-bound token from the TokenRequest API, so the API server
enforces the chart's RBAC), and the real exit status written back to the pod, from
which the real Job controller decides the Job's outcome.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.proc import free_port
from pytest_desched.providers.jobs import (
    MetricsScrape,
    PodRun,
    end_failed_round,
    utcnow,
)

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

TERMINATION_MESSAGE_MAX = 4096  # a kubelet caps termination messages at 4 KiB
# Annotation on round pods: kwok leaves them Running and the plugin runs them (see kwok-stages.yaml).
EXECUTOR_ANNOTATION = "desched.pytest.io/executor"


class MetricsPoller:
    """Scrape https://127.0.0.1:PORT/metrics of a round process once its cycle has ended.

    The descheduler serves /metrics on its secure port without authentication (v0.36.0
    cmd/descheduler/app/server.go) but only while the one-shot process lives. Scraping
    throughout the run would race with (and delay) its own server shutdown, so this tails
    the log and scrapes once, right after the cycle's totals line; callers still check the
    scrape counted the finished loop before trusting it.
    """

    CYCLE_DONE = b'"msg":"Number of evictions/requests"'

    def __init__(
        self, port: int, proc: subprocess.Popen[str], log_path: Path, interval: float = 0.002
    ) -> None:
        import threading

        self.port, self.proc, self.log_path, self.interval = port, proc, log_path, interval
        self.result = MetricsScrape()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MetricsPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _cycle_done(self) -> bool:
        try:
            return self.CYCLE_DONE in self.log_path.read_bytes()
        except OSError:
            return False

    def _run(self) -> None:
        import http.client
        import ssl

        while not self._cycle_done():
            if self.proc.poll() is not None or self._stop.wait(self.interval):
                self.result.last_status = "exited before its cycle ended"
                return
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the process's self-signed loopback certificate
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=0.2)
        self.result.attempts += 1
        try:
            conn.request("GET", "/metrics", headers={"Connection": "close"})
            resp = conn.getresponse()
            body = resp.read().decode(errors="replace")
            self.result.last_status = str(resp.status)
            if resp.status == 200:
                self.result.last_text = body
                self.result.successes += 1
                self.result.last_at = time.monotonic()
        except Exception as exc:  # the server already stopped
            self.result.last_status = type(exc).__name__
        finally:
            conn.close()


def materialize_volumes(cluster: Cluster, pod: Any, root: Path) -> dict[str, Path]:
    """Write the pod's ConfigMap volumes to files; returns mountPath -> local dir."""
    ns = pod.metadata.namespace
    vols = {v.name: v for v in pod.spec.volumes or []}
    mounts: dict[str, Path] = {}
    for m in pod.spec.containers[0].volume_mounts or []:
        vol = vols.get(m.name)
        if vol is None or vol.config_map is None:
            continue  # projected SA token volumes are replaced by the TokenRequest kubeconfig
        cm = cluster.core.read_namespaced_config_map(vol.config_map.name, ns)
        local = root / "volumes" / m.name
        local.mkdir(parents=True, exist_ok=True)
        items = vol.config_map.items or [
            type("I", (), {"key": k, "path": k}) for k in (cm.data or {})
        ]
        for it in items:
            (local / it.path).write_text((cm.data or {})[it.key])
        mounts[m.mount_path.rstrip("/")] = local
    return mounts


def rewrite_args(args: list[str], mounts: dict[str, Path]) -> list[str]:
    """Point paths under a mount at the local copy of that volume."""
    out = []
    for a in args:
        flag, eq, value = a.partition("=") if a.startswith("-") else ("", "", a)
        for mount, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if value.startswith(mount + "/"):
                value = str(local) + value[len(mount) :]
                break
        out.append(f"{flag}{eq}{value}" if eq or flag else value)
    return out


def sa_kubeconfig(cluster: Cluster, pod: Any, path: Path, ttl: int = 600) -> None:
    """A kubeconfig holding a token bound to this pod, for its ServiceAccount (file mode 0600)."""
    from kubernetes import client

    sa = pod.spec.service_account_name or "default"
    req = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=[],
            expiration_seconds=ttl,
            bound_object_ref=client.V1BoundObjectReference(
                api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid
            ),
        )
    )
    token = cluster.core.create_namespaced_service_account_token(sa, pod.metadata.namespace, req)
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    ctx_name = cluster.context or admin.get("current-context")
    ctx = next(c["context"] for c in admin["contexts"] if c["name"] == ctx_name)
    clus = next(c["cluster"] for c in admin["clusters"] if c["name"] == ctx["cluster"])
    clus = {
        k: v
        for k, v in clus.items()
        if k in ("server", "certificate-authority-data", "certificate-authority")
    }
    if "certificate-authority" in clus:  # make it self-contained
        ca = Path(clus["certificate-authority"])
        if not ca.is_absolute():
            ca = cluster.kubeconfig.parent / ca
        import base64

        clus["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
        del clus["certificate-authority"]
    kc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": clus}],
        "users": [
            {
                "name": f"system:serviceaccount:{pod.metadata.namespace}:{sa}",
                "user": {"token": token.status.token},
            }
        ],
        "contexts": [
            {
                "name": "c",
                "context": {
                    "cluster": "c",
                    "user": f"system:serviceaccount:{pod.metadata.namespace}:{sa}",
                },
            }
        ],
        "current-context": "c",
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(kc, fh)


def run_pod(
    cluster: Cluster,
    pod: Any,
    binary: Path,
    log_dir: Path,
    timeout: float = 300,
    on_finished: Callable[[PodRun], None] | None = None,
) -> PodRun:
    """Run the real descheduler for `pod` and write its terminated status back to the pod.

    `on_finished` sees the run before the pod's status says it ended, so whoever waits for
    that status can rely on what the hook wrote (the supervised kubelet's facts file).
    """
    c = pod.spec.containers[0]
    # Under the cluster's own dir when it has one: a killed run's token file goes with the reaped cluster.
    work = Path(tempfile.mkdtemp(prefix="desched-pod-", dir=cluster.workdir))
    notes: list[str] = []
    started = utcnow()
    proc: subprocess.Popen[str] | None = None
    try:
        mounts = materialize_volumes(cluster, pod, work)
        args = rewrite_args(list(c.args or []), mounts)
        kubeconfig = work / "sa-kubeconfig.yaml"
        sa_kubeconfig(cluster, pod, kubeconfig)
        # In a pod the API server is found in-cluster and the metrics port lives in the
        # pod's own network namespace; on the host both must be explicit.
        port = free_port()
        local_args = [
            f"--client-connection-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        ]
        notes.append(f"image {c.image} command {c.command} run as local binary {binary.name}")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work)}
        for e in c.env or []:
            if e.value is not None:
                env[e.name] = e.value
        argv = [str(binary), *args, *local_args]
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{pod.metadata.name}.log"
        write_running(cluster, pod, started)
        with open(log_path, "w") as logf:
            proc = subprocess.Popen(
                argv,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=work,
                start_new_session=True,
                text=True,
            )
            with MetricsPoller(port, proc, log_path) as poller:
                try:
                    rc = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
                    notes.append(f"killed after {timeout:.0f}s")
                if rc < 0:  # as a container runtime reports it: 128 + the signal's number
                    notes.append(f"killed by signal {signal.Signals(-rc).name} (exit {128 - rc})")
                    rc = 128 - rc
        log = log_path.read_text()
        finished = utcnow()
        shown = [
            a
            if not a.startswith("--client-connection-kubeconfig")
            else "--client-connection-kubeconfig=<pod SA token>"
            for a in argv
        ]
        why = publish_logs(cluster, pod, log, started, log_dir)
        if why:
            notes.append(why)
        run = PodRun(
            pod.metadata.namespace,
            pod.metadata.name,
            pod.metadata.uid,
            pod.spec.service_account_name or "default",
            shown,
            rc,
            started,
            finished,
            log,
            log_path,
            notes,
            poller.result,
        )
        if on_finished is not None:
            on_finished(run)
        _until_api_answers(lambda: write_terminated(cluster, pod, rc, log, started, finished))
        return run
    except BaseException:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the token file goes with it


def _until_api_answers(write: Callable[[], Any], timeout: float = 120) -> Any:
    """Retry a status write while the API server is down, as a kubelet keeps retrying.

    Without it a round whose process ended during an API-server or etcd outage would stay
    Running forever, and its Job would never finish once the control plane is back.
    """
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

    from pytest_desched.kube import api_failure

    for attempt in Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=0.1, max=2),
        retry=retry_if_exception(lambda exc: api_failure(exc) is not None),
        reraise=True,
    ):
        with attempt:
            return write()
    return None


def publish_logs(
    cluster: Cluster, pod: Any, log: str, started: dt.datetime, log_dir: Path
) -> str | None:
    """Make `kubectl logs` work for the pod: a CRI-format file and a kwok `Logs` object.

    Returns None when published, else why not (kept in the run's notes, never fatal).
    """
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    c = pod.spec.containers[0]
    ts = started.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    cri = log_dir / f"{pod.metadata.name}.cri.log"
    cri.write_text("".join(f"{ts} stdout F {line}\n" for line in log.splitlines()))
    body = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace},
        "spec": {"logs": [{"containers": [c.name], "logsFile": str(cri.resolve())}]},
    }
    try:
        client.CustomObjectsApi(cluster.api_client).create_namespaced_custom_object(
            "kwok.x-k8s.io", "v1alpha1", pod.metadata.namespace, "logs", body
        )
    except ApiException as exc:
        return f"kubectl logs unavailable: kwok Logs object not created ({exc.status} {exc.reason})"
    except Exception as exc:  # the API server is down: the run's status matters more
        from pytest_desched.kube import api_failure

        if (why := api_failure(exc)) is None:
            raise
        return f"kubectl logs unavailable: kwok Logs object not created ({why})"
    return None


def write_running(cluster: Cluster, pod: Any, started: dt.datetime) -> None:
    """Mark the pod Running as a kubelet would (kwok leaves descheduler pods to us)."""
    c = pod.spec.containers[0]
    at = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "status": {
            "phase": "Running",
            "startTime": at,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": at}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": at}},
                }
            ],
        }
    }
    cluster.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, body)


def write_terminated(
    cluster: Cluster, pod: Any, rc: int, log: str, started: dt.datetime, finished: dt.datetime
) -> None:
    c = pod.spec.containers[0]
    msg = log[-TERMINATION_MESSAGE_MAX:] if rc != 0 else ""
    body = {
        "status": {
            "phase": "Succeeded" if rc == 0 else "Failed",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted" if rc == 0 else "PodFailed",
                    "lastTransitionTime": finished.isoformat(),
                },
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "reason": "PodCompleted" if rc == 0 else "PodFailed",
                    "lastTransitionTime": finished.isoformat(),
                },
            ],
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": rc,
                            "reason": "Completed" if rc == 0 else "Error",
                            "message": msg,
                            "startedAt": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "finishedAt": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        }
                    },
                }
            ],
        }
    }
    cluster.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, body)


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


def state_dir(cluster_dir: Path) -> Path:
    return cluster_dir / STATE_DIR


def images_file(cluster_dir: Path) -> Path:
    return state_dir(cluster_dir) / "images.json"


def register_image(cluster_dir: Path, image: str, binary: Path) -> None:
    """Let the supervised kubelet run pods of `image` with `binary` (atomic, merge)."""
    import json

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
    import json

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
            f"that version with --desched-descheduler-version so its binary is built"
        )
    return "run", binary


def facts_path(cluster_dir: Path, uid: str, kind: str = "json") -> Path:
    return state_dir(cluster_dir) / "runs" / f"{uid}.{kind}"


def write_facts(cluster_dir: Path, run: PodRun) -> Path:
    """The PodRun as JSON, written atomically before the pod's status says it ended."""
    import json
    from dataclasses import asdict

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
    import json

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
        import threading

        self.cluster, self.cluster_dir, self.log = cluster, cluster_dir, log
        self.seen: set[str] = set()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def handle(self, pod: Any) -> str:
        """Dispatch one pod event; returns what was decided (for the log and tests)."""
        import threading

        action, detail = classify(pod, read_images(self.cluster_dir))
        uid = pod.metadata.uid
        with self.lock:
            if action == "skip" or uid in self.seen:
                return "skip"
            self.seen.add(uid)
        if action == "refuse":
            self.refuse(pod, detail)
            return "refuse"
        t = threading.Thread(target=self.run_one, args=(pod, Path(detail)), daemon=True)
        self.threads.append(t)
        t.start()
        return "run"

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
                from kubernetes.client.rest import ApiException

                try:
                    _until_api_answers(
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
                _until_api_answers(lambda: write_terminated(self.cluster, pod, 1, why, now, now))
            except Exception as exc2:
                self.log(f"{ns}/{name}: could not record the failure: {exc2}")

    def serve(self, stop: Any, ready: Path, timeout_s: int = 30) -> None:
        """List then watch Job pods until `stop` is set or the cluster's directory is gone."""
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        core = self.cluster.core
        rv: str | None = None
        while not stop.is_set() and self.cluster_dir.is_dir():
            try:
                if rv is None:
                    listed = core.list_pod_for_all_namespaces(label_selector=JOB_POD_SELECTOR)
                    for p in listed.items:
                        self.handle(p)
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
                    rv = obj.metadata.resource_version
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self.handle(obj)
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
    import sys

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
    import argparse
    import threading

    from pytest_desched.providers.base import Cluster

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
    from pytest_desched.kube import bound_requests

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
    from pytest_desched.errors import RoundError
    from pytest_desched.kube import UnscheduledGuard, WaitTimeout, owned_by_job, wait_for

    cdir = cluster.workdir
    assert cdir is not None, "the embedded cluster has a directory"
    runs: dict[str, PodRun] = {}
    unscheduled = UnscheduledGuard(f"round Job {namespace}/{job_name}")

    def probe() -> tuple[dict[str, str], list[tuple[str, str | None]]]:
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
        for p in pods:
            uid = p.metadata.uid
            refused = facts_path(cdir, uid, "refused")
            if refused.is_file():
                raise RoundError(f"pod {namespace}/{p.metadata.name}: {refused.read_text()}")
            if uid in runs or (run := read_facts(cdir, uid)) is None:
                continue
            if run.log_path is not None and run.log_path.is_file():
                log_dir.mkdir(parents=True, exist_ok=True)
                copy = log_dir / run.log_path.name
                if copy.resolve() != run.log_path.resolve():
                    shutil.copyfile(run.log_path, copy)
                run.log_path = copy
            runs[uid] = run
            if run.exit_code != 0:
                raise end_failed_round(cluster, job_name, namespace, run)
        return conds, [(p.metadata.name, p.status.phase if p.status else None) for p in pods]

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
            max_interval=0.1,
        )
    except WaitTimeout as exc:
        log = state_dir(cdir) / "kubelet.log"
        raise WaitTimeout(f"{exc}; the stand-in kubelet's log: {log}") from None
    return sorted(runs.values(), key=lambda r: r.started)


class StandInKubelet:
    """The embedded cluster's JobRunner (providers.base): the supervised kubelet's runs."""

    name = "embedded"
    # Marks the plugin's own rounds (kwok leaves every descheduler pod alone regardless).
    pod_annotations = {EXECUTOR_ANNOTATION: "embedded"}

    def register(self, cluster: Cluster, image: str, binary: Path) -> None:
        assert cluster.workdir is not None
        register_image(cluster.workdir, image, binary)

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
