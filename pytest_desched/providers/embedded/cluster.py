"""The default cluster: a real control plane run by `kwokctl --runtime binary`, kwok nodes.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the real
binaries built by the toolchain; only nodes (and so kubelets) are simulated by the
kwok controller. Clusters live under `<cache>/clusters/`, each with an owner record,
so a later run can reap the ones a killed run left behind.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.capabilities import CAPABILITIES, KUBERNETES_METRICS, PROMETHEUS
from pytest_desched.errors import CommandError, ProviderError
from pytest_desched.kube import (
    LIVENESS_CHECKS,
    WaitTimeout,
    bound_requests,
    forget_death,
    wait_for,
    wait_nodes_ready,
)
from pytest_desched.log import Reporter, say
from pytest_desched.proc import kill_child_of, run
from pytest_desched.providers.base import Cluster, Provider
from pytest_desched.providers.embedded.bring_up import (
    Beside,
    Stop,
    kubeconfig_written,
    kwokctl_create_args,
    preload_api_client,
)
from pytest_desched.providers.embedded.kubelet import (
    StandInKubelet,
    register_image,
    state_dir,
    supervisor_argv,
)
from pytest_desched.providers.embedded.metrics_endpoints import write_config as write_metrics_config
from pytest_desched.providers.embedded.metrics_restart import restart as restart_metrics_server
from pytest_desched.providers.embedded.metrics_restart import start_race as metrics_start_race
from pytest_desched.providers.embedded.metrics_server import (
    METRICS_SERVER,
    component_patches,
    create_baseline_pods,
    kwokctl_args,
    kwokctl_options,
    resource_metrics_path,
)
from pytest_desched.providers.embedded.owners import (
    owner_alive,
    read_record,
    this_process,
    write_record,
)
from pytest_desched.providers.embedded.port_collision import retry_after, retry_line
from pytest_desched.providers.embedded.ports import CONFIG as PORTS_CONFIG
from pytest_desched.providers.embedded.ports import (
    METRICS_SERVER_PORT,
    PORT_FIELDS,
    ports_config,
    reserve_ports,
)
from pytest_desched.providers.embedded.processes import (
    component_pids,
    death_report,
    log_tail,
    remove_cluster,
    running,
)
from pytest_desched.providers.embedded.prometheus import PORT_FIELDS as PROMETHEUS_PORTS
from pytest_desched.providers.embedded.prometheus import PrometheusSource
from pytest_desched.providers.embedded.watchdog import Watchdog
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import descheduler_image

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig

CONTROL_PLANE_TOOLS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "etcd",
    "kwok",
)
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


@dataclass(frozen=True)
class NodeSpec:
    """Allocatable of one simulated worker: realistic, so requests and nodeFit mean something."""

    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"


def unique_name(prefix: str = "desched") -> str:
    """Unique per run and per xdist worker, short enough for kwokctl."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return f"{prefix}-{worker}-{os.getpid()}-{uuid.uuid4().hex[:4]}"


def node_manifest(name: str, zone: str, spec: NodeSpec, metrics: bool = False) -> dict:
    """A kwok worker; with `metrics`, the path metrics-server scrapes for it (metrics_server.py)."""
    res = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods}
    extra = resource_metrics_path(name) if metrics else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {
                KWOK_NODE_ANNOTATION: "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                **extra,
            },
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": zone,
                "type": "kwok",
            },
        },
        "status": {"allocatable": res, "capacity": res},
    }


def become_subreaper() -> bool:
    """Adopt kwokctl's daemonized components, so their exit is reaped here, not left as zombies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


class EmbeddedProvider(Provider):
    name = "embedded"
    capabilities = CAPABILITIES["embedded"]
    # stop() deletes the cluster whole, checked: the labs' cleanup proof (session._close)
    deletion_is_cleanup_proof = True

    def __init__(
        self,
        toolchain: Toolchain,
        root: Path | None = None,
        name: str | None = None,
        workers: int = 3,
        node_spec: NodeSpec | None = None,
        keep: bool = False,
        report: Reporter = say,
        wait_timeout: float = 60,
        kubeconfig_dir: Path | None = None,
        metrics_sources: tuple[str, ...] = (),
    ) -> None:
        if workers < 2:
            raise ProviderError(
                "the descheduler skips clusters with fewer than 2 nodes; use workers >= 2"
            )
        self.toolchain = toolchain
        self.root = root or toolchain.cache_dir / "clusters"
        self.cluster_name = name or unique_name()
        self.workers = workers
        self.node_spec = node_spec or NodeSpec()
        self.keep = keep
        self.report = report
        self.wait_timeout = wait_timeout
        self.cluster: Cluster | None = None
        self.kubeconfig_dir = kubeconfig_dir  # e.g. the pytest run's temp dir
        self._created = False
        self._creating = False  # kwokctl creating it: metrics-server's start-up race spared
        self.timings: dict[str, float] = {}
        self.teardown: dict[str, Any] | None = None  # what stop() found (see stop)
        self._watchdog: Watchdog | None = None
        self.ports: dict[str, int] = {}  # chosen in start() (ports.py)
        self.use_metrics(tuple(metrics_sources))

    # -- paths ----------------------------------------------------------
    @property
    def cluster_dir(self) -> Path:
        return self.root / "clusters" / self.cluster_name

    @property
    def kubeconfig(self) -> Path:
        """The run's own copy when a kubeconfig_dir was given, else kwokctl's."""
        if self.kubeconfig_dir is not None:
            return self.kubeconfig_dir / f"{self.cluster_name}.kubeconfig"
        return self.cluster_dir / "kubeconfig.yaml"

    @property
    def audit_log(self) -> Path:
        """Where kwokctl v0.8.0 has kube-apiserver write its audit log (--audit-log-path)."""
        return self.cluster_dir / "logs" / "audit.log"

    def _env(self) -> dict[str, str]:
        return kwokctl_env(self.root)

    def _kwokctl(self, *args: str, timeout: float = 120, check: bool = True):
        """kwokctl with an explicit kubeconfig: the caller's `--kubeconfig`, else /dev/null."""
        if not any(a == "--kubeconfig" or a.startswith("--kubeconfig=") for a in args):
            args = (*args, "--kubeconfig", os.devnull)
        return run(
            [str(self.toolchain.path("kwokctl")), *args],
            env=self._env(),
            timeout=timeout,
            check=check,
        )

    def _kwokctl_start(self, *args: str, timeout: float = 120) -> None:
        """kwokctl without `--kubeconfig` (`start cluster` has no such flag)."""
        run([str(self.toolchain.path("kwokctl")), *args], env=self._env(), timeout=timeout)

    # -- lifecycle --------------------------------------------------------
    def start(self) -> Cluster:
        t0 = time.monotonic()
        reap_stale(self.toolchain, self.root, self.report)
        # Prometheus scrapes the emulated kubelet endpoints kwokctl's metrics wiring adds
        # (prometheus.py), so a cluster with it runs that wiring, metrics-server included.
        prom = PROMETHEUS in self.metrics_sources
        metrics = prom or KUBERNETES_METRICS in self.metrics_sources
        tools = [*CONTROL_PLANE_TOOLS, "kwokctl", *([METRICS_SERVER, "kubectl"] * metrics)]
        tools += ["prometheus"] * prom
        bins = self.toolchain.ensure(tools)  # what kwokctl needs
        options = kwokctl_options(self.toolchain) if metrics else {}
        self.timings["tools_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        become_subreaper()
        # Created and owned before it is said: a signal right after the line still gets
        # stop()'s checked deletion (was "no cluster had been started" in the signal matrix).
        self.root.mkdir(parents=True, exist_ok=True)
        self._created = True
        # The owner record, whole or not at all (the other canary track's reap_stale may be
        # reading: owners.py), with the cluster's ports, chosen under a short lock (ports.py).
        fields = (*PORT_FIELDS, *[METRICS_SERVER_PORT] * metrics, *PROMETHEUS_PORTS * prom)
        self.ports = self._reserve_ports(fields, set())
        # Before any component starts: if this process is killed (SIGKILL, as a CI timeout
        # does), the watchdog deletes the cluster at once (watchdog.py), no later run needed.
        self._watchdog = Watchdog(self.root, self.cluster_name)
        # Every wait from now on ends with a named error if a component dies (kube.wait_for).
        LIVENESS_CHECKS[self.cluster_name] = self.death_report
        self.report(f"starting embedded cluster {self.cluster_name} (kwokctl, binary runtime)")
        kubelet = self._create_retrying(bins, options, metrics, fields)
        self.timings["control_plane_s"] = time.monotonic() - t1
        prometheus = None
        if prom:  # started now, ready while the nodes come up (it discovers them itself)
            prometheus = PrometheusSource.start_for(
                self.cluster_dir, bins["prometheus"], self.ports, float(self.node_spec.cpu)
            )

        if self.kubeconfig_dir is not None:
            self.kubeconfig_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write((self.cluster_dir / "kubeconfig.yaml").read_text())
        names = [f"{self.cluster_name[-4:]}-worker-{i}" for i in range(1, self.workers + 1)]
        cluster = Cluster(
            name=self.cluster_name,
            provider=self.name,
            kubeconfig=self.kubeconfig,
            toolchain=self.toolchain,
            workers=names,
            job_runner=StandInKubelet(),
            created=True,
            info={"runtime": "kwokctl binary", "node_allocatable": self.node_spec.__dict__},
            workdir=self.cluster_dir,
            kube_cache_dir=self.kubeconfig_dir / "kube-cache" if self.kubeconfig_dir else None,
            audit_log=self.audit_log if self.audit_log.is_file() else None,
            audit_unavailable_why=None
            if self.audit_log.is_file()
            else f"embedded: kwokctl created no audit log at {self.audit_log}",
            metrics_sources=self.metrics_sources,
        )
        t2 = time.monotonic()
        # This provider's faults (faults.py) stop etcd and kube-apiserver: a call must fail
        # within seconds then, not hang on the API server's own 60 s request timeout.
        bound_requests(cluster.api_client)

        if kubelet is None:  # kwokctl wrote its kubeconfig only at the end
            kubelet = self._start_kubelet(self.toolchain.path("descheduler"))
        for i, n in enumerate(names):
            zone = f"zone-{'abc'[i % 3]}"
            cluster.core.create_node(node_manifest(n, zone, self.node_spec, metrics))
        if metrics:  # each node's own idle usage, as a real node has (metrics_server.py)
            create_baseline_pods(cluster.core, names, self.toolchain.versions.workload_image)
        try:
            wait_nodes_ready(cluster, names, timeout=self.wait_timeout)
        except WaitTimeout as exc:  # say which component let the nodes down, not only that
            raise ProviderError(f"{exc}\n{self.component_report('kwok-controller')}") from None
        self._wait_kubelet(kubelet)
        if prometheus is not None:  # started beside the nodes: what it adds is the rest
            self.timings["prometheus_wait_s"] = prometheus.wait_ready(self.wait_timeout)
            cluster.info["prometheus_url"] = prometheus.url
        self.timings["nodes_s"] = time.monotonic() - t2
        self.timings["bring_up_s"] = time.monotonic() - t1
        cluster.info["bring_up_s"] = round(self.timings["bring_up_s"], 2)
        self.report(
            f"embedded cluster {self.cluster_name} up in {self.timings['bring_up_s']:.1f}s: "
            f"{self.workers} Ready kwok workers, server {cluster.server_version()}"
            + (f", metrics sources {', '.join(self.metrics_sources)}" if metrics else "")
        )
        self.cluster = cluster
        return cluster

    def _reserve_ports(self, fields: tuple[str, ...], avoid: set[int]) -> dict[str, int]:
        return reserve_ports(
            self.root,
            self.cluster_name,
            {**this_process(), "created": time.time()},
            fields,
            avoid,
        )

    def _create_retrying(
        self,
        bins: dict[str, Path],
        options: dict[str, object],
        metrics: bool,
        fields: tuple[str, ...],
    ) -> subprocess.Popen[bytes] | None:
        """`_create_control_plane`, again with new ports while a port another process bound
        after it was chosen killed a component (port_collision.py), at most CREATE_ATTEMPTS
        creations; every other failure is raised as it came."""
        avoid: set[int] = set()
        attempt = 1
        while True:
            try:
                return self._create_control_plane(bins, options, metrics)
            except ProviderError as exc:
                taken = retry_after(str(exc), attempt)
                if taken is None or not self._delete_for_retry():
                    raise
                attempt += 1
                avoid.update(taken)
                self.report(retry_line(self.cluster_name, taken, attempt))
                self.ports = self._reserve_ports(fields, avoid)

    def _create_control_plane(
        self, bins: dict[str, Path], options: dict[str, object], metrics: bool
    ) -> subprocess.Popen[bytes] | None:
        """kwokctl create with `self.ports`, and the work beside it; the stand-in kubelet
        the side started, or None."""
        self.cluster_dir.mkdir(parents=True, exist_ok=True)
        patches = component_patches() if metrics else None
        kwokctl_ports = {k: v for k, v in self.ports.items() if k not in PROMETHEUS_PORTS}
        (self.cluster_dir / PORTS_CONFIG).write_text(ports_config(kwokctl_ports, options, patches))
        create = kwokctl_create_args(
            self.cluster_name,
            bins,
            int(self.wait_timeout),
            KWOK_NODE_ANNOTATION,
            self.cluster_dir / PORTS_CONFIG,
        )
        if metrics:  # metrics.k8s.io from kwok's emulated kubelets (metrics_server.py)
            create += kwokctl_args(bins[METRICS_SERVER])
            # kwok's default Metric and the frozen one (the stale fault: metrics_endpoints.py)
            create += ["-c", str(write_metrics_config(self.cluster_dir, self.toolchain))]
        # While kwokctl brings the control plane up (mostly waiting), the rest of the
        # bring-up's own work goes on beside it (_beside_kwokctl).
        side = Beside(self._beside_kwokctl, name="desched-bring-up")
        try:
            self._creating = metrics
            try:
                self._create(create)
                if metrics:  # a metrics-server that lost its start-up race, started again
                    restart_metrics_server(
                        self.cluster_dir, self.cluster_name, self._kwokctl_start, self.report
                    )
            finally:
                self._creating = False
        except BaseException:  # kwokctl's failure (or Ctrl-C) is the one said
            # Not joined: the side may be seconds into importing the API client, and a
            # signal must end the command within 2 s; abandoning it only guarantees that
            # it starts no kubelet the cluster's deletion could miss.
            side.abandon()
            raise
        return side.join()  # the side's own error raises here

    def _delete_for_retry(self) -> bool:
        """Delete the partly created cluster (checked, as stop() does) before it is created
        again under its name; False when something of it is left (then it is not)."""
        LIVENESS_CHECKS.pop(self.cluster_name, None)  # its processes are about to be killed
        found = delete_cluster(self.toolchain, self.root, self.cluster_name, self.report)
        if found["processes_left"] or found["dir_left"]:
            return False
        forget_death(self.cluster_name)
        LIVENESS_CHECKS[self.cluster_name] = self.death_report
        return True

    def _beside_kwokctl(self, done: Stop) -> subprocess.Popen[bytes] | None:
        """The other tools, the API client's imports, and the stand-in kubelet's start (its
        Python and imports) once kwokctl wrote the kubeconfig; the kubelet retries until the
        API server answers. None: kwokctl ended first (start() then starts the kubelet, or,
        when it failed or was interrupted, none is started: the deletion cannot miss one)."""
        self.toolchain.ensure(["kubectl", "helm"])  # as before: resolved, or built
        preload_api_client()
        kubeconfig = self.cluster_dir / "kubeconfig.yaml"
        while not kubeconfig_written(kubeconfig):
            if done.wait(0.02):  # kwokctl ended: its outcome decides in start()
                return None
        return done.unless_set(lambda: self._start_kubelet(self.toolchain.path("descheduler")))

    def death_report(self) -> str | None:
        """The error naming a dead component of this cluster, or None (processes.py)."""
        if self._creating and metrics_start_race(self.cluster_dir):
            return None  # restarted once kwokctl is done (metrics_restart.py)
        return death_report(self.cluster_dir, self.cluster_name)

    def _create(self, create: list[str]) -> None:
        """`kwokctl create cluster`; ProviderError with the components' last log lines.

        A component that dies meanwhile (etcd out of memory) ends kwokctl's wait within a
        second, named (`death_report`): kwokctl itself would wait its whole `--wait`.
        """
        died: list[str] = []
        caller = threading.get_ident()

        def watch(stop: Stop) -> None:
            while not stop.wait(0.25):
                why = self.death_report()
                if why:
                    died.append(why)
                    kill_child_of(caller)  # the kwokctl this thread's caller waits on
                    return

        # No lock: the ports were chosen beforehand (start, ports.py), so two creations at
        # once (the canary's tracks, xdist workers) cannot pick the same ones.
        watcher = Beside(watch, name="desched-create-liveness")
        try:
            self._kwokctl(*create, timeout=self.wait_timeout + 60)
        except (subprocess.TimeoutExpired, CommandError) as exc:
            watcher.join()
            # kwokctl may fail on its own just before the watcher sees the death
            why = died[0] if died else self.death_report()
            if why:
                raise ProviderError(why) from None
            tails = []  # the cluster dir is removed on failure: keep what its logs said
            for log in sorted((self.cluster_dir / "logs").glob("*.log")):
                lines = log.read_text(errors="replace").splitlines()[-3:]
                tails.append(f"--- {log.name}\n" + "\n".join(line[:300] for line in lines))
            raise ProviderError(
                f"kwokctl could not start cluster {self.cluster_name} within "
                f"{self.wait_timeout + 60:.0f}s: {str(exc)[-600:]}\n" + "\n".join(tails)
            ) from None
        finally:
            watcher.join()

    def component_report(self, component: str) -> str:
        """Whether a kwokctl-run component is alive, and its log's last lines (diagnostics)."""
        pid = component_pids(self.cluster_dir).get(component)
        if pid is not None and running(pid):
            state = f"{component} (pid {pid}) is running"
        else:
            state = f"{component} is not running (pid file {self.cluster_dir}/pids)"
        return state + "; last log lines:\n" + log_tail(self.cluster_dir, component)

    def _start_kubelet(self, descheduler: Path) -> subprocess.Popen[bytes]:
        """The cluster's supervised stand-in kubelet: runs every descheduler Job's pod.

        It lives as long as the cluster (a kept one too) in a session of its own; its command
        line names the cluster's directory, so delete_cluster and reap_stale stop it.
        """
        sdir = state_dir(self.cluster_dir)
        sdir.mkdir(parents=True, exist_ok=True)
        version = self.toolchain.groups["descheduler"].version  # a release may add its own
        image = descheduler_image(self.toolchain.versions, version)
        register_image(self.cluster_dir, image, descheduler)
        with open(sdir / "kubelet.log", "ab") as log:
            proc = subprocess.Popen(
                supervisor_argv(self.cluster_dir / "kubeconfig.yaml", self.cluster_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        (sdir / "pid").write_text(str(proc.pid))
        return proc

    def _wait_kubelet(self, proc: subprocess.Popen[bytes]) -> None:

        ready = state_dir(self.cluster_dir) / "ready"
        log = state_dir(self.cluster_dir) / "kubelet.log"
        wait_for(
            "the stand-in kubelet to watch the cluster's pods",
            lambda: (ready.is_file(), proc.poll()),
            lambda seen: seen[0] or seen[1] is not None,
            timeout=self.wait_timeout,
            describe=lambda _: log.read_text(errors="replace")[-600:],
            max_interval=0.05,
        )
        if proc.poll() is not None:
            raise ProviderError(
                f"the stand-in kubelet exited {proc.returncode}: "
                f"{log.read_text(errors='replace')[-600:]}"
            )

    def stop(self) -> None:
        """Keep the cluster (only one that came up completely) or delete it and check that.

        `teardown` says what the check found: the exit line after a signal repeats it.
        """
        if not self._created:
            return
        LIVENESS_CHECKS.pop(self.cluster_name, None)  # its processes are about to be killed
        if self.keep and self.cluster is not None:
            owner = self.root / "owners" / f"{self.cluster_name}.json"
            record = read_record(owner)
            if record is not None:  # a kept cluster is not reaped by later runs
                write_record(owner, {**record, "keep": True})
            self._release_watchdog()
            self.report(self.resume_hint())
            return
        found = delete_cluster(self.toolchain, self.root, self.cluster_name, self.report)
        pids, dir_left = found["processes_left"], found["dir_left"]
        if pids or dir_left:
            what = ", ".join(
                [f"{len(pids)} processes ({pids})"] * bool(pids)
                + [f"folder {self.cluster_dir}"] * dir_left
            )
            text = (
                f"embedded cluster {self.cluster_name}: {what} left; its owner record stays, "
                "so the next run's reaper deletes it"
            )
            self.report(text)
        else:
            text = f"embedded cluster {self.cluster_name} deleted (0 processes, folder removed)"
            self._release_watchdog()  # else it retries when this process ends
        self.teardown = {"deleted": True, "left": bool(pids or dir_left), "text": text}
        self._created = False

    def _release_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.release()
            self._watchdog = None

    def resume_hint(self) -> str:
        return (
            f"kept embedded cluster {self.cluster_name}:\n"
            f"  export KUBECONFIG={self.kubeconfig}; kubectl get nodes\n"
            f"  delete: KWOK_WORKDIR={self.root} kwokctl delete cluster --name {self.cluster_name}"
            f"  (kwokctl: {self.toolchain.path('kwokctl')})"
        )


def kwokctl_env(root: Path) -> dict[str, str]:
    """kwokctl's environment: its workdir under `root`; KUBECONFIG the empty /dev/null.

    kwokctl's default kubeconfig is $KUBECONFIG, else ~/.kube/config (v0.8.0
    pkg/utils/kubeconfig.GetRecommendedKubeconfigPath); neither is ever the user's here.
    kwokctl also runs `kubectl get --raw /version|/healthz`, whose http cache would land in
    ~/.kube/cache: KUBECACHEDIR keeps it under `root`.
    """
    return dict(
        os.environ,
        KWOK_WORKDIR=str(root),
        KUBECONFIG=os.devnull,
        KUBECACHEDIR=str(root / "kube-cache"),
    )


def delete_cluster(
    toolchain: Toolchain, root: Path, name: str, report: Reporter = say
) -> dict[str, Any]:
    """kwokctl delete, then make sure no component process survives and no files remain.

    Returns what was checked after: `processes_left` (pids still naming the cluster's
    directory) and `dir_left`; both empty is a verified deletion.

    `--kubeconfig /dev/null`: v0.8.0's delete removes the cluster's context from that file
    (default ~/.kube/config, which it would read and could rewrite); /dev/null reads as an
    empty config with nothing to remove, so nothing is written. An empty `--kubeconfig ""`
    is no way out: delete expands the path and fails with "empty path".
    """
    pids = tuple(component_pids(root / "clusters" / name).values())
    proc = run(
        [
            str(toolchain.path("kwokctl")),
            "delete",
            "cluster",
            "--name",
            name,
            "--kubeconfig",
            os.devnull,
        ],
        env=kwokctl_env(root),
        check=False,
        timeout=120,
    )
    # kwokctl stops its components; this is the belt to its braces. Round pods' descheduler
    # processes run in sessions of their own (so a terminal's Ctrl-C reaches only pytest):
    # a killed run leaves them behind, and they too name this cluster's directory.
    left = remove_cluster(root, name, report, pids)
    if proc.returncode != 0:
        report(
            f"kwokctl delete cluster {name}: exit {proc.returncode} (processes killed, dir removed)"
        )
    return left


def reap_stale(toolchain: Toolchain, root: Path, report: Reporter = say) -> list[str]:
    """Delete clusters whose owning pytest process is gone (killed runs)."""
    reaped: list[str] = []
    owners = root / "owners"
    if not owners.is_dir():
        return reaped
    for rec in owners.glob("*.json"):
        record = read_record(rec)  # None: gone, or being written (owners.py)
        if record is None or record.get("keep") or owner_alive(record):
            continue
        name = rec.stem
        report(f"reaping embedded cluster {name} left by a killed run (pid {record.get('pid')})")
        delete_cluster(toolchain, root, name, report)
        reaped.append(name)
    return reaped


def from_config(config: DeschedConfig, toolchain: Toolchain) -> EmbeddedProvider:
    """The registry's constructor (see providers.REGISTRY)."""
    return EmbeddedProvider(
        toolchain,
        workers=config.workers,
        keep=config.keep == "always",
        kubeconfig_dir=config.run_dir,
        report=toolchain.report,
    )
