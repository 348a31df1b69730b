"""Faults for the embedded cluster: it owns every process, node and watch, so it can break each.

What breaks, and how it is done the way kwokctl v0.8.0 itself does it:

* control-plane components (etcd, kube-apiserver, kube-scheduler, ...): kwokctl has no
  per-component command, but its binary runtime stops one as `kwokctl stop cluster` does
  (pkg/kwokctl/runtime/exec.go ForkExecKill: SIGKILL the pid in `<cluster>/pids/<name>.pid`,
  remove the file), and `kwokctl start cluster` starts exactly the components whose pid file
  names no live process, with their recorded arguments (startComponent skips running ones).
  While one is down, the choice of a new cluster's ports (`<root>/create.lock`) waits, so
  no new cluster takes its ports; a healed control plane is /readyz ok with its leaders
  renewing their Leases;
* the round's descheduler process: the stand-in kubelet runs it with its stdout on
  `<cluster>/stand-in-kubelet/logs/<pod>.log`, which finds its pid;
* a node NotReady: kwok manages only nodes annotated `kwok.x-k8s.io/node=fake` (see
  cluster.py); without the annotation kwok neither heartbeats the node nor re-readies it
  (its node-initialize Stage), so a Ready=False condition stays, as after a kubelet stops,
  and kube-controller-manager taints the node like any NotReady one;
* a cordon: `spec.unschedulable`, as `kubectl cordon` sets it;
* the lab recorder's pod or PDB watch: its open HTTP stream is cut (lab.recorder).

`Trigger` fires one of them at a point of a round through the experiment framework's
`on_point` hook: "before-job" synchronously; "descheduler-running" (the round pod's log got
its first line) and "after-eviction" (the API server audited the first 201 eviction) from a
watcher thread started at "before-job", polling with explicit timeouts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.errors import DeschedError
from pytest_desched.interrupts import interrupted
from pytest_desched.kube import api_health, live_watches, node_ready, wait_for
from pytest_desched.proc import run
from pytest_desched.providers.audit_log import AuditWindow
from pytest_desched.providers.embedded.cluster import KWOK_NODE_ANNOTATION, kwokctl_env
from pytest_desched.providers.embedded.kubelet import state_dir
from pytest_desched.providers.embedded.metrics_server import METRICS_SERVER
from pytest_desched.providers.embedded.ports import LOCK as PORTS_LOCK
from pytest_desched.providers.embedded.processes import (
    HELD_DOWN,
    live_component,
    reap,
    running,
    unreaped,
)
from pytest_desched.tools.locate import file_lock

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok-controller",
)
# Leader-elected components: a restarted one waits out its dead predecessor's Lease (15 s).
LEASES = {"kube-scheduler": "kube-scheduler", "kube-controller-manager": "kube-controller-manager"}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
POINTS = ("before-job", "descheduler-running", "after-eviction")


class FaultError(DeschedError, RuntimeError):
    """A fault could not be injected or healed; the message says which and what was seen."""


@dataclass
class FaultEvent:
    """One thing the injector did: when (time.monotonic()), to what, and how it went."""

    t: float
    fault: str
    action: str  # inject | heal | note
    detail: str = ""


class Faults:
    """The fault injector of one embedded cluster (a `Cluster` from the embedded provider)."""

    def __init__(self, cluster: Cluster, timeout: float = 30) -> None:
        if cluster.provider != "embedded" or cluster.workdir is None:
            raise FaultError(
                f"faults need the embedded provider's cluster (it owns the processes); "
                f"{cluster.name} is {cluster.provider}"
            )
        self.cluster = cluster
        self.cdir = cluster.workdir
        self.root = self.cdir.parent.parent  # KWOK_WORKDIR: <root>/clusters/<name>
        self.timeout = timeout
        self.events: list[FaultEvent] = []
        self._create_lock: contextlib.ExitStack | None = None
        # metrics-server too where the cluster runs it (kwokctl starts it like the others)
        self.components = COMPONENTS + (METRICS_SERVER,) * bool(cluster.metrics_sources)

    def note(self, fault: str, action: str, detail: str = "") -> None:
        self.events.append(FaultEvent(time.monotonic(), fault, action, detail))

    # -- control-plane processes --------------------------------------------------------
    def pid_file(self, component: str) -> Path:
        return self.cdir / "pids" / f"{component}.pid"

    def pid(self, component: str) -> int | None:
        """The component's live pid from kwokctl's pid file (a recycled pid is not it)."""
        try:
            pid = int(self.pid_file(component).read_text().strip())
        except (OSError, ValueError):
            return None
        reap([pid])  # an exited component adopted by this (subreaper) process is a zombie
        return pid if live_component(pid, self.cdir) else None

    def stop(self, component: str, why: str = "") -> int:
        """SIGKILL the component and remove its pid file, as `kwokctl stop cluster` does."""
        if component not in self.components:
            raise FaultError(f"unknown component {component!r}; one of {self.components}")
        pid = self.pid(component)
        if pid is None:
            raise FaultError(f"{component} of cluster {self.cluster.name} is not running")
        self.hold_create_lock()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

        wait_for(  # a killed component adopted by this subreaper is a zombie until reaped
            f"{component} (pid {pid}) to exit after SIGKILL",
            lambda: unreaped([pid]),
            lambda alive: not alive,
            timeout=10,
            max_interval=0.02,
        )
        self.pid_file(component).unlink(missing_ok=True)
        self.note(component, "heal" if why else "inject", f"stopped (SIGKILL pid {pid}) {why}")
        return pid

    def heal_components(
        self, attempts: int = 3, fresh_controllers: bool | None = None
    ) -> list[str]:
        """Start every stopped component again, as `kwokctl start cluster` does, and wait.

        kube-scheduler and kube-controller-manager exit on their own when they cannot renew
        their leader Lease through a dead API server (or etcd) for 10 s: they are restarted
        too. When they survived an etcd or kube-apiserver outage they are restarted anyway
        (`fresh_controllers`, the default then): a controller whose watches resumed across
        the outage was seen acting on a stale cache afterwards (the Deployment controller
        created a second ReplicaSet for the next run's lab), and the next run must start
        clean. Healed means /readyz ok and each leader-elected component renewing its Lease
        after the API server answered again; a leader that dies meanwhile is started again
        (up to `attempts` rounds). Returns the names started.
        """
        started: list[str] = []
        if interrupted():  # after a signal every API request is bounded and a dead server
            # latched gone (kube.ApiGone): waiting here for /readyz would last the whole
            # timeout (seen: over 60 s). The run is ending; a discarded cluster is deleted whole.
            self.note(
                "heal", "skipped", "a signal arrived: the cluster is left as the fault left it"
            )
            return started
        if fresh_controllers is None:
            fresh_controllers = any(self.pid(c) is None for c in ("etcd", "kube-apiserver"))
        for _ in range(attempts + int(fresh_controllers)):
            down = [c for c in self.components if self.pid(c) is None]
            t0 = time.time()
            if down:
                self._kwokctl_start(down)
                started += down
            self.wait_api_ready()
            if fresh_controllers:
                fresh_controllers = False
                for c in LEASES:
                    if self.pid(c) is not None:
                        self.stop(c, why="restarted for fresh caches after the outage")
                continue
            t_ready = time.time()
            for c in down:
                if c in LEASES:
                    self._drop_stale_lease(LEASES[c], before=t0)
            if all(self._leads(c, since=t_ready) for c in LEASES):
                if started:
                    self.note(",".join(started), "heal", "started by kwokctl start cluster")
                self.release()
                return started
        raise FaultError(
            f"cluster {self.cluster.name}: components still not leading after {attempts} "
            f"restarts: {[c for c in self.components if self.pid(c) is None]} down; "
            f"see {self.cdir}/logs"
        )

    def hold_create_lock(self) -> None:
        """Keep every cluster creation of this cache waiting while a component is down.

        A new cluster's ports are the free ones below 32767 (ports.py; kwokctl itself when
        run directly), so a cluster created meanwhile (an xdist worker, another run on this
        machine) could take a stopped component's ports, and its restart would fail with
        "address already in use". This project's owner records keep a cluster's ports
        reserved while it lives, and every choice of ports (ports.py) or plain run's
        creation (bench/plain_runbook.sh) takes `<root>/create.lock`.
        Taking it can wait for a creation under way: a fault meant for a point of a round
        takes it beforehand (`Trigger.prepare`), so the wait never delays the fault. Until
        `release`, the cluster's liveness is not checked (processes.HELD_DOWN): a component
        stopped here, or a controller that exits on its own through the outage, is no death.
        """
        HELD_DOWN.add(self.cdir)
        if self._create_lock is None:
            stack = contextlib.ExitStack()
            stack.enter_context(file_lock(self.root / PORTS_LOCK))
            self._create_lock = stack

    def release(self) -> None:
        """Let cluster creations go on (the stopped components listen on their ports again)."""
        HELD_DOWN.discard(self.cdir)
        if self._create_lock is not None:
            self._create_lock.close()
            self._create_lock = None

    def _kwokctl_start(self, down: list[str]) -> None:
        for c in down:
            self.pid_file(c).unlink(missing_ok=True)  # a stale file would read as "running"
        proc = run(
            [
                str(self.cluster.toolchain.path("kwokctl")),
                "start",
                "cluster",
                "--name",
                self.cluster.name,
                "--timeout",
                f"{int(self.timeout)}s",
            ],
            env=kwokctl_env(self.root),
            check=False,
            timeout=self.timeout + 30,
        )
        still = [c for c in down if self.pid(c) is None]
        if proc.returncode != 0 or still:
            raise FaultError(
                f"kwokctl start cluster {self.cluster.name} exited {proc.returncode}, "
                f"{still or 'nothing'} still stopped: {(proc.stderr or proc.stdout)[-600:]}"
            )

    def wait_api_ready(self, timeout: float | None = None) -> None:
        """Until /readyz says ok (etcd reachable, informers synced), or WaitTimeout."""
        wait_for(
            "kube-apiserver /readyz ok",
            lambda: api_health(self.cluster, timeout=3),
            lambda s: "is ready again" in s,
            timeout=timeout or self.timeout,
            max_interval=0.2,
            describe=str,
        )

    def _lease(self, name: str) -> Any:
        from kubernetes.client.rest import ApiException

        try:
            return _coordination(self.cluster).read_namespaced_lease(name, "kube-system")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    @staticmethod
    def _renewed(lease: Any) -> float:
        rt = (lease.spec.renew_time or lease.spec.acquire_time) if lease is not None else None
        return rt.timestamp() if rt is not None else 0.0

    def _drop_stale_lease(self, name: str, before: float) -> None:
        """Delete a Lease last renewed before `before`: its holder was the process now dead.

        A restarted scheduler would otherwise wait out that Lease (15 s). The delete carries
        the Lease's resourceVersion, so a Lease the new process took meanwhile is kept.
        """
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        lease = self._lease(name)
        if lease is None or self._renewed(lease) >= before:
            return
        opts = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=lease.metadata.resource_version)
        )
        with contextlib.suppress(ApiException):
            _coordination(self.cluster).delete_namespaced_lease(name, "kube-system", body=opts)

    def _leads(self, component: str, since: float) -> bool:
        """True once `component` renewed its Lease after `since`; False if it died first."""
        seen = wait_for(
            f"{component} to renew its Lease kube-system/{LEASES[component]}",
            lambda: (
                self.pid(component) is not None,
                self._renewed(self._lease(LEASES[component])),
            ),
            lambda s: not s[0] or s[1] >= since - 0.5,
            timeout=self.timeout,
            max_interval=0.2,
        )
        return seen[0]

    @contextlib.contextmanager
    def component_down(self, component: str) -> Iterator[None]:
        """`with faults.component_down("etcd"): ...`: stopped inside, started again after."""
        self.stop(component)
        try:
            yield
        finally:
            self.heal_components()

    def apiserver_down(self) -> contextlib.AbstractContextManager[None]:
        return self.component_down("kube-apiserver")

    def etcd_down(self) -> contextlib.AbstractContextManager[None]:
        return self.component_down("etcd")

    def scheduler_down(self) -> contextlib.AbstractContextManager[None]:
        return self.component_down("kube-scheduler")

    def metrics_server_down(self) -> contextlib.AbstractContextManager[None]:
        """The Kubernetes Metrics source missing: `metrics.k8s.io` answers 503 meanwhile."""
        return self.component_down(METRICS_SERVER)

    # -- the round's descheduler process ----------------------------------------------------
    def round_processes(self) -> dict[int, str]:
        """Live descheduler processes of this cluster's rounds: pid -> pod name."""
        logs = (state_dir(self.cdir) / "logs").resolve()
        found: dict[int, str] = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                out = Path(os.readlink(d / "fd" / "1"))
            except OSError:
                continue
            if out.parent == logs and out.suffix == ".log" and running(int(d.name)):
                found[int(d.name)] = out.stem
        return found

    def kill_descheduler(self, pod_prefix: str = "") -> list[int]:
        """SIGKILL the running round process(es) whose pod name starts with `pod_prefix`."""
        procs = {p: n for p, n in self.round_processes().items() if n.startswith(pod_prefix)}
        if not procs:
            raise FaultError(f"no running descheduler round process (pod {pod_prefix!r}*)")
        for pid in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.note("descheduler", "inject", f"SIGKILL {procs}")
        return sorted(procs)

    # -- nodes -----------------------------------------------------------------------------
    def node_not_ready(self, node: str) -> None:
        """kwok stops heartbeating `node`; its Ready condition goes False and stays so."""
        core = self.cluster.core
        core.patch_node(node, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: None}}})
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        cond = {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "pytest-desched fault: the node's heartbeat stopped",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        core.patch_node_status(node, {"status": {"conditions": [cond]}})

        def seen() -> tuple[bool, list[str]]:
            n = core.read_node(node)
            return node_ready(n), [t.key for t in n.spec.taints or []]

        wait_for(
            f"node {node} NotReady and tainted {NOT_READY_TAINT}",
            seen,
            lambda s: not s[0] and NOT_READY_TAINT in s[1],
            timeout=self.timeout,
            max_interval=0.05,
        )
        self.note(f"node-not-ready:{node}", "inject", "kwok heartbeat stopped, Ready=False")

    def node_ready_again(self, node: str) -> None:
        """kwok manages `node` again: its node-initialize Stage makes it Ready, untainted."""
        core = self.cluster.core
        core.patch_node(node, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: "fake"}}})

        def seen() -> tuple[bool, list[str]]:
            n = core.read_node(node)
            return node_ready(n), [t.key for t in n.spec.taints or []]

        wait_for(
            f"node {node} Ready and untainted again",
            seen,
            lambda s: s[0] and NOT_READY_TAINT not in s[1],
            timeout=self.timeout,
            max_interval=0.05,
        )
        self.note(f"node-not-ready:{node}", "heal", "kwok manages it again, Ready")

    def cordon(self, node: str, on: bool = True) -> None:
        """`kubectl cordon` (on) / `uncordon` (off)."""
        self.cluster.core.patch_node(node, {"spec": {"unschedulable": True if on else None}})
        self.note(f"cordon:{node}", "inject" if on else "heal", "cordoned" if on else "uncordoned")

    @contextlib.contextmanager
    def not_ready(self, node: str) -> Iterator[None]:
        self.node_not_ready(node)
        try:
            yield
        finally:
            self.node_ready_again(node)

    @contextlib.contextmanager
    def cordoned(self, node: str) -> Iterator[None]:
        self.cordon(node)
        try:
            yield
        finally:
            self.cordon(node, on=False)

    # -- the lab recorder's watches -----------------------------------------------------------
    def disconnect_watch(self, kind: str, namespace: str) -> None:
        """Cut the `kind` ("pods" or "pdb") watch stream of every recorder of `namespace`.

        Each recorder's stream is cut once, as soon as it is open (a watch reconnects every
        second); FaultError-free only when every recorder watching at the start was cut.
        """
        pending = live_watches(namespace)
        if not pending:
            raise FaultError(f"no recorder is watching {namespace}")

        def cut() -> int:
            pending[:] = [rec for rec in pending if not rec.disconnect(kind)]
            return len(pending)

        wait_for(
            f"the open {kind} watch streams of the recorders in {namespace} to cut",
            cut,
            lambda left: left == 0,
            timeout=10,
            max_interval=0.01,
        )
        self.note(f"watch:{kind}", "inject", f"stream cut in {namespace}")


def _coordination(cluster: Cluster) -> Any:
    from kubernetes import client

    return client.CoordinationV1Api(cluster.api_client)


# -- firing a fault at a point of a round ---------------------------------------------------
@dataclass
class Trigger:
    """`on_point` for an ExperimentContext: `inject` at `point` of the first round, `heal` after.

    `heal_at` is "round-ended" (the control plane must answer again before the emergency
    stop and the lab's teardown: etcd, kube-apiserver) or "teardown" (the fault holds through
    the assessment: scheduler, nodes). `prepare` runs first at "before-job" (a component
    stop takes the cluster-creation lock there: `Faults.hold_create_lock`). `on_teardown` runs
    at the teardown point before the heal:
    the caller's look at the cluster right after the emergency stop. A point inside the round
    is awaited by a thread from "before-job" on (at most `timeout`); `fired` says when (or why
    not). Errors of the thread are kept in `errors`, never lost.
    """

    faults: Faults
    point: str
    inject: Callable[[], Any]
    heal: Callable[[], Any] | None = None
    heal_at: str = "teardown"
    prepare: Callable[[], Any] | None = None  # at "before-job", before anything else
    on_before_job: Callable[[], Any] | None = None
    on_teardown: Callable[[], Any] | None = None
    timeout: float = 60
    fired: float | None = None  # time.monotonic() of the injection
    healed: float | None = None
    errors: list[str] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _rounds: int = 0

    def __post_init__(self) -> None:
        if self.point not in POINTS:
            raise ValueError(f"point {self.point!r} is not one of {POINTS}")
        if self.heal_at not in ("round-ended", "teardown"):
            raise ValueError(f"heal_at {self.heal_at!r}: use round-ended or teardown")

    def __call__(self, point: str) -> None:
        if point == "before-job":
            self._rounds += 1
            if self._rounds > 1:
                return  # one fault per experiment: the first round's
            if self.prepare is not None:
                self.prepare()
            if self.on_before_job is not None:
                self.on_before_job()
            if self.point == "before-job":
                self._fire()
            else:
                self._thread = threading.Thread(target=self._await_point, daemon=True)
                self._thread.start()
        elif point == "round-ended":
            self._join()
            if self.heal_at == "round-ended":
                self._heal()
        elif point == "teardown":
            self._join()
            try:
                if self.on_teardown is not None:
                    self.on_teardown()
            finally:
                self._heal()

    def _fire(self) -> None:
        self.inject()
        self.fired = time.monotonic()

    def _heal(self) -> None:
        if self.heal is not None and self.fired is not None and self.healed is None:
            self.heal()
            self.healed = time.monotonic()

    def _join(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.timeout)
            if self._thread.is_alive():
                self.errors.append(f"the {self.point} watcher did not stop in {self.timeout}s")
            self._thread = None

    def _await_point(self) -> None:
        """Poll (tenacity, explicit timeout) until the round reaches the point, then inject.

        A point first seen after the round ended is past: nothing is injected then, and
        `errors` says so (a fault after the round would test nothing).
        """
        from tenacity import (
            RetryError,
            Retrying,
            retry_if_result,
            stop_after_delay,
            stop_when_event_set,
            wait_fixed,
        )

        hit = False
        try:
            probe = self._probe()
            for attempt in Retrying(
                stop=stop_after_delay(self.timeout) | stop_when_event_set(self._stop),
                wait=wait_fixed(0.005),
                retry=retry_if_result(lambda seen: not seen),
            ):
                with attempt:
                    hit = probe()
                outcome = attempt.retry_state.outcome
                if outcome is not None and not outcome.failed:
                    attempt.retry_state.set_result(hit)
        except RetryError:
            hit = False
        except Exception as exc:
            self.errors.append(f"watching for {self.point}: {type(exc).__name__}: {exc}")
            return
        if not hit or self._stop.is_set():
            why = "the round ended" if self._stop.is_set() else f"{self.timeout:.0f}s passed"
            self.errors.append(f"{self.point} never came ({why}): fault not injected")
            return
        try:
            self._fire()
        except Exception as exc:
            self.errors.append(f"injecting at {self.point}: {type(exc).__name__}: {exc}")

    def _probe(self) -> Callable[[], bool]:
        """What tells that the round reached `point`, from the files the cluster writes."""
        if self.point == "descheduler-running":
            logs = state_dir(self.faults.cdir) / "logs"
            before = set(logs.glob("*.log"))

            def running() -> bool:
                return any(
                    p.stat().st_size > 0
                    for p in logs.glob("*.log")
                    if p not in before and not p.name.endswith(".cri.log")
                )

            return running
        audit = self.faults.cluster.audit_log
        if audit is None:
            raise FaultError("after-eviction needs the API server's audit log")
        window = AuditWindow(audit)

        def evicted() -> bool:
            return any(r.is_eviction and r.code == 201 for r in window.read())

        return evicted
