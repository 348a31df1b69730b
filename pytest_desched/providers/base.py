"""One provider interface: start a cluster, hand out a `Cluster`, stop what was started."""

from __future__ import annotations

import shutil
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.capabilities import CAPABILITIES, Capabilities, metrics_sources_refusal
from pytest_desched.config import PROVIDERS, unknown_provider
from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.proc import helm_env, run
from pytest_desched.providers.audit_log import unreadable_reason
from pytest_desched.providers.jobs import IN_CLUSTER, JobRunner
from pytest_desched.providers.reaper import NamespaceReaper

if TYPE_CHECKING:
    from kubernetes import client

    from pytest_desched.tools.toolchain import Toolchain


# Nodes an experiment may label and drain must carry this label on an existing cluster.
NODE_OPT_IN_LABEL = "descheduler.example.com/lab-node"


@dataclass
class Cluster:
    """What experiments see of a cluster: kubeconfig, API clients, worker names, runners."""

    name: str
    provider: str
    kubeconfig: Path
    toolchain: Toolchain
    workers: list[str] = field(default_factory=list)
    context: str | None = None
    # Set where nodes run no containers (kwok): the engine runs round pods through it.
    # None: a kubelet runs them ("in-cluster").
    job_runner: JobRunner | None = None
    # (node, container id) -> that container stopped on its node, so the node's kubelet
    # restarts it (Lab.set_restarts); set by a provider with `restarts_containers`.
    restart_container: Callable[[str, str], None] | None = None
    created: bool = True  # False for an existing cluster: never delete it
    # Set by a session that deletes this cluster whole after a signal (it made it and keeps
    # it never): a lab's teardown after the signal is then skipped, the deletion removes it.
    deleted_on_signal: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    # Where helm keeps its state for this run (never next to a user's kubeconfig).
    workdir: Path | None = None
    # The API server's audit log (pytest_desched.providers.audit_log) when the test process can read it;
    # otherwise None and a recorded reason, so a record never implies audit evidence it lacks.
    audit_log: Path | None = None
    audit_unavailable_why: str | None = None
    # Set by a provider whose cluster is not ours (existing): every policy applied outside
    # dry-run must stay inside the lab namespace and the nodes this `key=value` selects
    # (descheduler.policy.scope reads it). None: a throwaway cluster, no limit.
    lab_node_selector: str | None = None
    # kubectl's and helm's discovery/http cache (KUBECACHEDIR): the run's own directory when the
    # provider knows it; otherwise under `workdir`. Never ~/.kube/cache.
    kube_cache_dir: Path | None = None
    # The metrics sources this cluster serves (capabilities.METRICS_SOURCES), started with it.
    metrics_sources: tuple[str, ...] = ()

    @property
    def job_executor(self) -> str:
        """Who runs round pods: the job runner's name ("embedded"), or "in-cluster"."""
        return self.job_runner.name if self.job_runner is not None else IN_CLUSTER

    @property
    def capabilities(self) -> Capabilities:
        """What this cluster's provider can do (the rules ask this, never its name)."""
        return CAPABILITIES[self.provider]

    def __post_init__(self) -> None:
        if self.audit_log is None and self.audit_unavailable_why is None:
            self.audit_unavailable_why = unreadable_reason(self.provider)

    @cached_property
    def namespace_reaper(self) -> NamespaceReaper:
        """Lab namespaces deleted in the background; the session's final scan waits for them."""
        return NamespaceReaper(self)

    # -- API ------------------------------------------------------------
    @cached_property
    def api_client(self) -> client.ApiClient:
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig), context=self.context)

    @cached_property
    def core(self) -> client.CoreV1Api:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @cached_property
    def apps(self) -> client.AppsV1Api:
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    @cached_property
    def batch(self) -> client.BatchV1Api:
        from kubernetes import client

        return client.BatchV1Api(self.api_client)

    @cached_property
    def policy(self) -> client.PolicyV1Api:
        from kubernetes import client

        return client.PolicyV1Api(self.api_client)

    @cached_property
    def rbac(self) -> client.RbacAuthorizationV1Api:
        from kubernetes import client

        return client.RbacAuthorizationV1Api(self.api_client)

    def server_version(self) -> str:
        from kubernetes import client

        return client.VersionApi(self.api_client).get_code().git_version

    # -- CLI runners (argument lists, explicit KUBECONFIG, never ~/.kube/config) --
    def env(self) -> dict[str, str]:
        env = helm_env(self.workdir or self.toolchain.cache_dir / "helm-home")
        env["KUBECONFIG"] = str(self.kubeconfig)
        if self.kube_cache_dir is not None:
            env["KUBECACHEDIR"] = str(self.kube_cache_dir)
        return env

    def _ctx_args(self) -> list[str]:
        return ["--context", self.context] if self.context else []

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.toolchain.path("kubectl")), *self._ctx_args(), *args]
        return run(cmd, env=self.env(), check=check, input=input, timeout=timeout)

    def helm(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        ctx = ["--kube-context", self.context] if self.context else []
        cmd = [str(self.toolchain.path("helm")), *ctx, *args]
        return run(cmd, env=self.env(), check=check, timeout=timeout)


class Provider(ABC):
    """Context manager giving a `Cluster`; `stop` removes only what `start` created."""

    name: str = "base"
    capabilities: Capabilities  # the provider's row of capabilities.CAPABILITIES
    keep: bool = False  # stop() leaves what start() made (the session sets it at its end)
    # The metrics sources start() brings up with the cluster (capabilities.METRICS_SOURCES).
    metrics_sources: tuple[str, ...] = ()

    def use_metrics(self, sources: tuple[str, ...]) -> None:
        """Start the cluster with `sources`; one this provider cannot start is refused now,
        before any cluster, with the capability's own message."""
        why = metrics_sources_refusal(sources, self.capabilities)
        if why:
            raise ConfigError(why)
        self.metrics_sources = tuple(dict.fromkeys((*self.metrics_sources, *sources)))

    @abstractmethod
    def start(self) -> Cluster: ...

    @abstractmethod
    def stop(self) -> None: ...

    def resume_hint(self) -> str:
        """How a user reaches (and later deletes) a kept cluster."""
        return ""

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def docker_available(timeout: float = 5) -> bool:
    """True when a Docker engine answers (not just when the client is installed)."""
    docker = shutil.which("docker")
    if not docker:
        return False
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def choose_provider(
    requested: str,
    docker_answers: bool | None = None,
    kind_missing: Callable[[], str | None] | None = None,
) -> str:
    """Resolve `auto` (provider_choice without its reason)."""
    return provider_choice(requested, docker_answers, kind_missing)[0]


def provider_choice(
    requested: str,
    docker_answers: bool | None = None,
    kind_missing: Callable[[], str | None] | None = None,
) -> tuple[str, str]:
    """(provider, why): `auto` is kind when a Docker engine answers and kind's tools are here
    (`kind_missing()` says what is not: default kind_tools_missing), else the embedded cluster.

    A hosted CI runner has Docker but no kind binary: auto once picked kind there and the run
    failed; a provider whose tools are missing is never chosen silently.
    """
    requested = (requested or "auto").strip().lower()
    if requested not in PROVIDERS:
        raise ProviderError(unknown_provider(requested))
    if requested != "auto":
        return requested, "asked for"
    if docker_answers is None:
        docker_answers = docker_available()
    if not docker_answers:
        return "embedded", "no Docker engine answers"
    missing = (kind_missing or kind_tools_missing)()
    if missing:
        return "embedded", f"a Docker engine answers, but {missing}"
    return "kind", "a Docker engine answers and kind's tools are here"


def kind_tools_missing(cached_kind: Path | None = None) -> str | None:
    """What the kind provider lacks here (None: nothing): a kind binary (given, on PATH or
    cached at `cached_kind`) or Go to build one. It needs no Python package of its own."""
    have_kind = shutil.which("kind") or (cached_kind is not None and cached_kind.is_file())
    if not have_kind and shutil.which("go") is None:
        return "no kind binary and no Go to build one (`desched tools kind`)"
    return None
