"""A throwaway multi-node kind cluster, created by pytest-kind-ng with our own kind and kubectl.

pytest-kind-ng builds the `kind create/load/delete` commands; this module adds what it lacks:
a multi-zone config, a kubeconfig kept in the run's workdir, no binary downloads, a wait for
Ready nodes, and loading the descheduler image only when Docker already has it.
"""

from __future__ import annotations

import copy
import functools
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_fixed,
)

from pytest_desched.kube import node_labels, node_name, node_ready
from pytest_desched.providers.base import Cluster, Provider, ProviderError, docker_available, run
from pytest_desched.providers.existing import CONTROL_PLANE_LABEL, close_clients
from pytest_desched.tools.resources import manifest_path
from pytest_desched.tools.versions import load_versions

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.tools.toolchain import Toolchain

KIND_CONFIG = "kind-cluster.yaml"


def load_kind_template() -> dict[str, Any]:
    return yaml.safe_load(manifest_path(KIND_CONFIG).read_text())


def render_kind_config(workers: int, image: str, template: Mapping[str, Any] | None = None) -> dict:
    """The kind config for `workers` workers, cycling the template's worker shapes (zones).

    The image goes on every node so the pinned node image is visible in the written config.
    """
    if workers < 1:
        raise ValueError(f"a kind cluster needs at least one worker, got {workers}")
    config = copy.deepcopy(dict(template if template is not None else load_kind_template()))
    nodes = config.get("nodes") or []
    planes = [n for n in nodes if n.get("role") == "control-plane"]
    shapes = [n for n in nodes if n.get("role") == "worker"]
    if not planes or not shapes:
        raise ValueError(f"{KIND_CONFIG} needs a control-plane node and at least one worker node")
    chosen = planes + [shapes[i % len(shapes)] for i in range(workers)]
    config["nodes"] = [{**copy.deepcopy(n), "image": image} for n in chosen]
    return config


def worker_names(nodes: list[Any]) -> list[str]:
    return sorted(node_name(n) for n in nodes if CONTROL_PLANE_LABEL not in node_labels(n))


def _all_ready(nodes: list[Any] | None, expected: int) -> bool:
    return nodes is not None and len(nodes) >= expected and all(node_ready(n) for n in nodes)


def wait_nodes_ready(
    list_nodes: Callable[[], list[Any]],
    expected: int,
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Any]:
    """Poll until `expected` nodes are all Ready; on timeout say what was last seen."""
    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(interval),
        retry=retry_if_exception_type(Exception)
        | retry_if_result(lambda r: not _all_ready(r, expected)),
        sleep=sleep,
    )
    try:
        return retrying(lambda: list(list_nodes()))
    except RetryError as err:
        last = err.last_attempt
        if last.failed:
            seen = f"listing nodes failed: {last.exception()}"
        else:
            states = [
                f"{node_name(n)}={'Ready' if node_ready(n) else 'NotReady'}" for n in last.result()
            ]
            seen = f"saw {len(states)} node(s): {', '.join(states) or 'none'}"
        raise ProviderError(
            f"kind nodes not Ready after {timeout:.0f}s (wanted {expected} Ready); {seen}"
        ) from (last.exception() if last.failed else None)


def image_present_locally(image: str) -> bool:
    """True when the local Docker engine already holds `image` (nothing is pulled here)."""
    docker = shutil.which("docker")
    if not docker:
        return False
    try:
        proc = run(
            [docker, "image", "inspect", "--format", "{{.Id}}", image], check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def kind_clusters(kind: Path) -> list[str]:
    env = dict(os.environ, KUBECONFIG=os.devnull)  # listing clusters needs no kubeconfig
    proc = run([str(kind), "get", "clusters"], env=env, check=False, timeout=60)
    return proc.stdout.split() if proc.returncode == 0 else []


@functools.cache
def local_kind_cluster_class() -> type:
    """pytest-kind-ng's KindCluster, minus its two side effects we cannot accept.

    Upstream `__init__` creates ./.pytest-kind/<name> in the current directory and
    `ensure_kind`/`ensure_kubectl` download release binaries; both are replaced. The
    create/load/delete command building is upstream's.
    """
    try:
        from pytest_kind import KindCluster
    except ImportError as exc:
        raise ProviderError(
            "the kind provider needs pytest-kind-ng: pip install 'pytest-desched[kind]'"
        ) from exc

    class LocalKindCluster(KindCluster):
        def __init__(self, name: str, workdir: Path, kind_path: Path, kubectl_path: Path) -> None:
            self.name = name
            self.image = None  # the node image is set per node in the config file
            self.path = workdir
            self.kubeconfig_path = workdir / "kubeconfig"
            self.kind_path = Path(kind_path)
            self.kubectl_path = Path(kubectl_path)
            self.platform = platform.system().lower()

        def ensure_kind(self) -> None:
            _require_binary(self.kind_path, "kind")

        def ensure_kubectl(self) -> None:
            _require_binary(self.kubectl_path, "kubectl")

    return LocalKindCluster


def _require_binary(path: Path, tool: str) -> None:
    if not path.is_file():
        raise ProviderError(f"{tool} binary {path} is missing; run `desched-tools` to build it")


class KindProvider(Provider):
    """Creates a kind cluster in `workdir` and deletes it on `stop` unless `keep`."""

    name = "kind"
    ready_timeout = 300.0
    poll_interval = 2.0

    def __init__(
        self,
        toolchain: Toolchain,
        workdir: Path,
        name: str,
        workers: int = 3,
        node_image: str | None = None,
        keep: bool = False,
    ) -> None:
        self.toolchain = toolchain
        self.workdir = Path(workdir)
        self.cluster_name = name
        self.workers = workers
        self.node_image = node_image
        self.keep = keep
        self.kubeconfig = self.workdir / "kubeconfig"
        self.config_path = self.workdir / "kind-config.yaml"
        self.kind_bin: Path | None = None
        self.cluster: Cluster | None = None
        self._kind: Any = None  # LocalKindCluster once creation was attempted

    def start(self) -> Cluster:
        if not docker_available():
            raise ProviderError(
                "kind needs a Docker engine that answers `docker info`; start one or use "
                "--desched-provider=embedded"
            )
        versions = load_versions()
        image = self.node_image or versions.kind_node_image
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = render_kind_config(self.workers, image)
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kind_bin = kind_bin = self.toolchain.path("kind")
        kubectl_bin = self.toolchain.path("kubectl")
        reused = self.cluster_name in kind_clusters(kind_bin)
        self._kind = local_kind_cluster_class()(
            self.cluster_name, self.workdir, kind_bin, kubectl_bin
        )
        try:
            self._kind.create(config_file=self.config_path)  # re-uses a cluster of that name
        except subprocess.CalledProcessError as exc:
            raise ProviderError(
                f"`kind create cluster --name {self.cluster_name}` exited {exc.returncode}; "
                "kind printed why on this run's stderr"
            ) from exc
        cluster = Cluster(
            name=self.cluster_name,
            provider="kind",
            kubeconfig=self.kubeconfig,
            toolchain=self.toolchain,
            context=f"kind-{self.cluster_name}",
            created=True,
            info={"node_image": image, "config": str(self.config_path), "reused": reused},
        )
        self.cluster = cluster
        nodes = wait_nodes_ready(
            lambda: cluster.core.list_node().items,
            expected=self.workers + 1,
            timeout=self.ready_timeout,
            interval=self.poll_interval,
        )
        cluster.workers = worker_names(nodes)
        cluster.info["descheduler_image"] = versions.descheduler_image
        cluster.info["descheduler_image_loaded"] = self._load_image(versions.descheduler_image)
        return cluster

    def _load_image(self, image: str) -> bool:
        """Side-load the descheduler image when Docker has it, so Jobs need no registry pull."""
        if not image_present_locally(image):
            return False
        try:
            self._kind.load_docker_image(image)
        except subprocess.CalledProcessError as exc:
            raise ProviderError(
                f"`kind load docker-image {image}` exited {exc.returncode}"
            ) from exc
        return True

    def stop(self) -> None:
        if self.cluster is not None:
            close_clients(self.cluster)
        if self._kind is None or self.keep:
            return
        kind, self._kind = self._kind, None
        try:
            kind.delete()
        except subprocess.CalledProcessError as exc:
            raise ProviderError(
                f"deleting kind cluster {self.cluster_name} failed (exit {exc.returncode}); "
                f"{self._delete_command()}"
            ) from exc

    def _delete_command(self) -> str:
        return f"{self.kind_bin or 'kind'} delete cluster --name {self.cluster_name}"

    def resume_hint(self) -> str:
        return (
            f"reach it: KUBECONFIG={self.kubeconfig} kubectl get nodes\n"
            f"delete it: {self._delete_command()}"
        )


def from_config(config: DeschedConfig, toolchain: Toolchain) -> KindProvider:
    """The registry's constructor (see providers.REGISTRY)."""
    from pytest_desched.providers.embedded.cluster import unique_name

    return KindProvider(
        toolchain,
        config.run_dir / "kind",
        unique_name("desched-kind"),
        workers=config.workers,
        keep=config.keep == "always",
    )
