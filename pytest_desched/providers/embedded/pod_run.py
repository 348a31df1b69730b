"""Run a descheduler round pod for the embedded cluster, where kwok nodes run nothing.

This is the part of a kubelet the embedded cluster lacks, limited to what a round pod
needs: the pod's own command and args, its ConfigMap volumes as files, its
ServiceAccount identity (a pod-bound token from the TokenRequest API, so the API server
enforces the chart's RBAC), and the real exit status written back to the pod, from
which the real Job controller decides the Job's outcome.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.errors import WaitTimeout
from pytest_desched.kube import api_failure, wait_for
from pytest_desched.proc import free_port
from pytest_desched.providers.jobs import (
    MetricsScrape,
    PodRun,
    utcnow,
)

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

TERMINATION_MESSAGE_MAX = 4096  # a kubelet caps termination messages at 4 KiB


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


# Where a kubelet mounts a pod's projected ServiceAccount volume (token, ca.crt, namespace).
# The descheduler reads the CA from there whatever its kubeconfig says when it makes its
# Prometheus client (v0.36.0 pkg/descheduler/client CreatePrometheusClient: K8sPodCAFilePath).
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def mounts_sa_volume(pod: Any) -> bool:
    """Whether the pod's container mounts its ServiceAccount volume (automount: the API
    server's ServiceAccount admission adds it to every pod that does not opt out)."""
    c = pod.spec.containers[0]
    return any((m.mount_path or "").rstrip("/") == SA_MOUNT for m in c.volume_mounts or [])


@functools.cache
def can_mount_privately() -> bool:
    """Whether a process here can get a mount namespace of its own (root, unshare present)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    try:
        res = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "true"], timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def write_sa_volume(kubeconfig: Path, namespace: str, dest: Path) -> dict[str, str]:
    """The pod's ServiceAccount volume as a kubelet projects it: the pod-bound token, the
    cluster's CA and the namespace (files 0600, from the kubeconfig sa_kubeconfig wrote).

    Returns the environment a kubelet gives every container with it, the API server's
    `KUBERNETES_SERVICE_HOST`/`_PORT` (here its host address): with both, client-go's
    in-cluster configuration works in the pod, as the descheduler's Prometheus client reads it
    when the policy names no `authToken` (v0.36.0 reconcileInClusterSAToken)."""
    import base64
    from urllib.parse import urlsplit

    kc = yaml.safe_load(kubeconfig.read_text())
    server = urlsplit(kc["clusters"][0]["cluster"]["server"])
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = {
        "token": kc["users"][0]["user"]["token"],
        "ca.crt": base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"]),
        "namespace": namespace,
    }
    for name, data in files.items():
        fd = os.open(dest / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data if isinstance(data, bytes) else data.encode())
    return {
        "KUBERNETES_SERVICE_HOST": server.hostname or "",
        "KUBERNETES_SERVICE_PORT": str(server.port or 443),
    }


def in_pod_mounts(argv: list[str], sa_dir: Path) -> list[str]:
    """`argv` run in a mount namespace of its own where `SA_MOUNT` holds `sa_dir`, as in the
    pod (the same pid: unshare and sh exec; the host's mounts are untouched).

    A tmpfs over /run (what /var/run names) holds the mount point: the host's /run is not
    written to, and a round process needs nothing of it.
    """
    run_dir = str(Path("/var/run").resolve())
    target = run_dir + SA_MOUNT[len("/var/run") :]
    script = (
        f"mount -t tmpfs -o mode=0755,size=1m desched-pod-run {shlex.quote(run_dir)} && "
        f"mkdir -p {shlex.quote(target)} && "
        f"mount --bind {shlex.quote(str(sa_dir))} {shlex.quote(target)} && "
        'exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


def run_pod(
    cluster: Cluster,
    pod: Any,
    binary: Path,
    log_dir: Path,
    timeout: float = 300,
    on_finished: Callable[[PodRun], None] | None = None,
    stop: threading.Event | None = None,
) -> PodRun:
    """Run the real descheduler for `pod` and write its terminated status back to the pod.

    `on_finished` sees the run before the pod's status says it ended, so whoever waits for
    that status can rely on what the hook wrote (the supervised kubelet's facts file).
    `stop` is set when the pod is deleted (its Job was, e.g. a round stopped at its timeout):
    the process is ended as a kubelet ends a deleted pod's container (SIGTERM, then SIGKILL
    after STOP_GRACE_S), its log so far kept, and the status write to the gone pod skipped.
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
        argv = pod_argv = [str(binary), *args, *local_args]  # pod_argv: what the evidence shows
        if mounts_sa_volume(pod):
            if can_mount_privately():
                sa = write_sa_volume(kubeconfig, pod.metadata.namespace, work / "serviceaccount")
                env = {**sa, **env}  # the pod's own env wins, as in a kubelet
                argv = in_pod_mounts(argv, work / "serviceaccount")
                notes.append(f"ServiceAccount volume at {SA_MOUNT} (a mount namespace)")
            else:
                notes.append(f"no ServiceAccount volume at {SA_MOUNT}: no mount namespace here")
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
            stopper = threading.Thread(target=stop_on_delete, args=(proc, stop, notes), daemon=True)
            if stop is not None:
                stopper.start()
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
            for a in pod_argv
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
        try:
            until_api_answers(lambda: write_terminated(cluster, pod, rc, log, started, finished))
        except Exception as exc:
            if not (stop is not None and stop.is_set() and getattr(exc, "status", None) == 404):
                raise  # a deleted pod has no status to write: that one is expected
        return run
    except BaseException:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
    finally:
        if stop is not None:
            stop.set()  # releases the stopper thread (the process has ended)
        shutil.rmtree(work, ignore_errors=True)  # the token file goes with it


STOP_GRACE_S = 5.0  # SIGTERM to SIGKILL for a deleted pod's process (a kubelet's is the pod's)


def stop_on_delete(
    proc: subprocess.Popen[str], stop: threading.Event | None, notes: list[str]
) -> None:
    """End `proc` once `stop` is set while it runs (its pod was deleted), as a kubelet would."""
    if stop is None:
        return
    stop.wait()
    if proc.poll() is not None:
        return  # it ended on its own; `stop` was set only to release this thread
    notes.append("stopped: its pod was deleted (SIGTERM)")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        notes.append(f"killed {STOP_GRACE_S:.0f}s after SIGTERM")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


LOGS_SERVED_S = 5.0  # kwok's watch of a new Logs object, under load


def until_api_answers(write: Callable[[], Any], timeout: float = 120) -> Any:
    """Retry a status write while the API server is down, as a kubelet keeps retrying.

    Without it a round whose process ended during an API-server or etcd outage would stay
    Running forever, and its Job would never finish once the control plane is back.
    """
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

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
        if (why := api_failure(exc)) is None:
            raise
        return f"kubectl logs unavailable: kwok Logs object not created ({why})"
    return logs_served(cluster, pod, c.name)


def logs_served(
    cluster: Cluster, pod: Any, container: str, timeout: float = LOGS_SERVED_S
) -> str | None:
    """Wait while kwok answers "no logs found" for the pod (its watch has not yet seen the new
    `Logs` object), so that `kubectl logs job/NAME` works once the Job is Complete: the
    terminated status is written only after this. Under load kwok's watch lagged the Job
    controller (CI, test_runbook_commands). Any other answer (a node the API server cannot
    reach for logs, as a replay's snapshot nodes) ends the wait at once: waiting cannot help.
    """
    from kubernetes import client  # heavy: the kubernetes client, as publish_logs
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(cluster.api_client)
    not_yet = "not yet"

    def probe() -> tuple[str | None, str]:
        """(None, "") once served; (not_yet, answer) while kwok has no Logs for it; else why."""
        try:
            core.read_namespaced_pod_log(
                pod.metadata.name, pod.metadata.namespace, container=container, limit_bytes=1
            )
            return None, ""
        except ApiException as exc:
            answer = f"{exc.status} {exc.reason}: {str(exc.body or '')[:200]}"
            return (not_yet if "no logs found" in str(exc.body or "") else answer), answer
        except Exception as exc:
            if (why := api_failure(exc)) is None:
                raise
            return why, why

    try:  # a local API server and kwok: a Logs object is seen in milliseconds
        state, _ = wait_for(
            f"the log of pod {pod.metadata.name}", probe, lambda r: r[0] != not_yet,
            timeout=timeout, describe=lambda r: r[1], max_interval=0.1,
        )  # fmt: skip
    except WaitTimeout as exc:
        return f"kubectl logs unavailable: not served within {timeout:.0f}s ({exc})"
    return None if state is None else f"kubectl logs unavailable: {state}"


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
