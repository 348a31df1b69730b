"""A throwaway multi-node kind cluster, driven through the pinned kind binary.

The design once named pytest-kind (pytest-kind-ng's KindCluster); it is not used because it
cannot serve here, and docs/providers.md says why method by method. This module drives kind's
own commands: a multi-zone config, a kubeconfig kept in the run's workdir, no binary downloads,
kind's output captured (it names every node: a `--desched-redact` run keeps it off the
terminal, and an error carries its tail), a wait for Ready nodes, and loading the descheduler
image only when Docker already has it.
"""

from __future__ import annotations

import copy
import os
import re
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

from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.errors import CommandError, ProviderError
from pytest_desched.kube import node_labels, node_name, node_ready
from pytest_desched.proc import run
from pytest_desched.providers.base import Cluster, Provider, docker_available
from pytest_desched.providers.existing import CONTROL_PLANE_LABEL, close_clients
from pytest_desched.tools.kind_runtime import VM_RUNTIME, kind_image_command
from pytest_desched.tools.resources import manifest_path

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


# Engine facts that need a kind setting, each added only when the engine reports the fact.
CGROUP_V1_PATCH = "kind: KubeletConfiguration\nfailCgroupV1: false\n"
OOM_SCORE_PATCH = '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n'


def docker_info_field(field: str) -> str | None:
    """One `docker info` field (Go template), or None when the engine does not answer."""
    docker = shutil.which("docker")
    if not docker:
        return None
    try:
        proc = run([docker, "info", "--format", field], check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def host_patches(info: Callable[[str], str | None] = docker_info_field) -> dict[str, list[str]]:
    """kind config patches this Docker engine's host needs; none on a cgroup v2 host.

    * cgroup v1 host: kubelet v1.35+ refuses to start on cgroup v1 unless
      `failCgroupV1: false` (a KubeletConfiguration patch).
    * an engine whose default runtime is `desched-vm` (started by
      `python -m dev.kind_node` on a VM whose capability bounding set lacks
      CAP_SYS_RESOURCE): no process in a node may lower its oom_score_adj, so containerd
      must not ask runc to (`restrict_oom_score_adj`, as for rootless nodes), or every pod
      sandbox fails with "can't get final child's PID from pipe: EOF".
    """
    patches: dict[str, list[str]] = {}
    if info("{{.CgroupVersion}}") == "1":
        patches.setdefault("kubeadmConfigPatches", []).append(CGROUP_V1_PATCH)
    if info("{{.DefaultRuntime}}") == VM_RUNTIME:
        patches.setdefault("containerdConfigPatches", []).append(OOM_SCORE_PATCH)
    return patches


AUDIT_DIR = "/var/log/kubernetes/audit"  # in the control-plane node and its API server pod
AUDIT_POLICY = "/etc/kubernetes/audit/policy.yaml"


def add_audit_log(config: dict[str, Any], host_dir: Path, policy: Path) -> dict[str, Any]:
    """Have kube-apiserver write the embedded cluster's audit log, readable on this host.

    The control-plane node mounts `policy` (manifests/audit-policy.yaml) and `host_dir`;
    kubeadm passes them on to the API server pod (extraVolumes) with --audit-policy-file and
    --audit-log-path=<host_dir>/audit.log (kind's documented auditing recipe).
    """
    out = copy.deepcopy(config)
    plane = next(n for n in out["nodes"] if n.get("role") == "control-plane")
    plane["extraMounts"] = [
        *plane.get("extraMounts", []),
        {"hostPath": str(policy), "containerPath": AUDIT_POLICY, "readOnly": True},
        {"hostPath": str(host_dir), "containerPath": AUDIT_DIR},
    ]
    ops = [
        {"op": "add", "path": "/apiServer/extraArgs/-",
         "value": {"name": "audit-policy-file", "value": AUDIT_POLICY}},
        {"op": "add", "path": "/apiServer/extraArgs/-",
         "value": {"name": "audit-log-path", "value": f"{AUDIT_DIR}/audit.log"}},
        {"op": "add", "path": "/apiServer/extraVolumes", "value": [
            {"name": "audit-policy", "hostPath": AUDIT_POLICY, "mountPath": AUDIT_POLICY,
             "readOnly": True, "pathType": "File"},
            {"name": "audit-log", "hostPath": AUDIT_DIR, "mountPath": AUDIT_DIR,
             "pathType": "DirectoryOrCreate"},
        ]},
    ]  # fmt: skip
    out["kubeadmConfigPatchesJSON6902"] = [
        *out.get("kubeadmConfigPatchesJSON6902", []),
        {"group": "kubeadm.k8s.io", "version": "v1beta4", "kind": "ClusterConfiguration",
         "patch": yaml.safe_dump(ops, sort_keys=False)},
    ]  # fmt: skip
    return out


def apply_patches(config: dict[str, Any], patches: Mapping[str, list[str]]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for key, values in patches.items():
        out[key] = [*out.get(key, []), *values]
    return out


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


CONTAINER_ID = re.compile(r"^(?:[a-z]+://)?([0-9a-f]{12,64})$")


def stop_container(node: str, container_id: str) -> None:
    """Stop a container on a kind node with the node's own crictl: its kubelet restarts it,
    counting a real restart (what a crash would; Lab.set_restarts)."""
    found = CONTAINER_ID.match(container_id)
    if not found or not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", node):
        raise ProviderError(
            f"kind node {node!r}, container {container_id!r}: not a kind node name and a "
            "container id from a pod's status (containerd://<hex>)"
        )
    docker = shutil.which("docker")
    if not docker:
        raise ProviderError(f"kind node {node}: no docker client to reach it; put one on PATH")
    try:
        run([docker, "exec", node, "crictl", "stop", "--timeout", "0", found[1]], timeout=60)
    except CommandError as exc:
        raise ProviderError(f"kind node {node}: stopping container {found[1]}: {exc}") from exc


def delete_kept(name: str, folder: Path, created: bool, toolchain: Toolchain) -> str:
    """Delete the kind cluster a `desched up` made and kept (its folder holds the kubeconfig);
    a cluster of the user's (`--kind-cluster`) is left as it is."""
    if not created:
        return f"kind cluster {name}: yours, not made by desched up, so left as it is"
    if not docker_available():
        raise ProviderError(
            f"kind cluster {name}: no Docker engine answers `docker info`; set DOCKER_HOST to "
            "the engine it runs on (make e2e-kind's: unix:///run/pytest-desched/docker.sock) "
            "and run desched down again"
        )
    try:
        KindCli(name, folder / "kind", toolchain.path("kind"), toolchain.path("kubectl")).delete()
    except CommandError as exc:
        raise ProviderError(f"deleting kind cluster {name}: {exc}") from exc
    return f"deleted kind cluster {name}"


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


class KindCli:
    """One kind cluster's lifecycle through the kind binary: create or re-use, export the
    kubeconfig, load an image, delete. Every command's output is captured (CommandError
    carries its tail), has a timeout, and runs with KUBECONFIG set to this run's file."""

    def __init__(self, name: str, workdir: Path, kind_path: Path, kubectl_path: Path) -> None:
        self.name = name
        self.path = workdir
        self.kubeconfig_path = workdir / "kubeconfig"
        self.kind_path = Path(kind_path)
        self.kubectl_path = Path(kubectl_path)

    def ensure_kind(self) -> None:
        _require_binary(self.kind_path, "kind")

    def ensure_kubectl(self) -> None:
        _require_binary(self.kubectl_path, "kubectl")

    def _kind(self, *args: str, timeout: float) -> None:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig_path))  # never ~/.kube
        run([str(self.kind_path), *args], env=env, timeout=timeout)

    def create(self, config_file: Path | None = None) -> None:
        """Create the cluster, or re-use one of this name and export its kubeconfig."""
        self.ensure_kind()
        flags = [f"--name={self.name}", f"--kubeconfig={self.kubeconfig_path}"]
        if self.name not in kind_clusters(self.kind_path):
            config = ["--config", str(config_file)] if config_file else []
            self._kind("create", "cluster", *flags, *config, timeout=900)
        elif not self.kubeconfig_path.is_file():  # re-used (kept) cluster: its kubeconfig
            self._kind("export", "kubeconfig", *flags, timeout=60)

    def load_docker_image(self, docker_image: str) -> None:
        self._kind("load", "docker-image", "--name", self.name, docker_image, timeout=600)

    def delete(self) -> None:
        flags = [f"--name={self.name}", f"--kubeconfig={self.kubeconfig_path}"]
        self._kind("delete", "cluster", *flags, timeout=300)


def _require_binary(path: Path, tool: str) -> None:
    if not path.is_file():
        raise ProviderError(
            f"{tool} binary {path} is missing; run `desched tools {tool}` to build it"
        )


class KindProvider(Provider):
    """Creates a kind cluster in `workdir` and deletes it on `stop` unless `keep`.

    With `user_cluster` it uses a kind cluster the user already has instead: nothing is
    created or deleted and no config is rendered; its kubeconfig is exported into `workdir`
    (never ~/.kube/config). Round Jobs pull the descheduler image unless Docker has it.
    """

    name = "kind"
    capabilities = CAPABILITIES["kind"]
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
        user_cluster: str | None = None,
    ) -> None:
        self.toolchain = toolchain
        self.workdir = Path(workdir)
        self.user_cluster = user_cluster
        self.cluster_name = user_cluster or name
        self.workers = workers
        self.node_image = node_image
        self.keep = keep
        self.kubeconfig = self.workdir / "kubeconfig"
        self.config_path = self.workdir / "kind-config.yaml"
        self.kind_bin: Path | None = None
        self.cluster: Cluster | None = None
        self._kind: KindCli | None = None  # once creation was attempted

    def start(self) -> Cluster:
        if not docker_available():
            raise ProviderError(
                "kind needs a Docker engine that answers `docker info`; start one or use "
                "--desched-provider=embedded"
            )
        versions = self.toolchain.versions  # --desched-kubernetes moves the node image with it
        image = self.node_image or versions.kind_node_image
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.user_cluster:
            return self._start_user_cluster(versions)
        patches = host_patches()
        audit_dir = self.workdir / "audit"
        audit_dir.mkdir(exist_ok=True)
        audit_log = audit_dir / "audit.log"
        audit_log.touch()
        config = add_audit_log(
            apply_patches(render_kind_config(self.workers, image), patches),
            audit_dir.resolve(),
            manifest_path("audit-policy.yaml").resolve(),
        )
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kind_bin = kind_bin = self.toolchain.path("kind")
        kubectl_bin = self.toolchain.path("kubectl")
        reused = self.cluster_name in kind_clusters(kind_bin)
        self._kind = KindCli(self.cluster_name, self.workdir, kind_bin, kubectl_bin)
        try:
            self._kind.create(config_file=self.config_path)  # re-uses a cluster of that name
        except CommandError as exc:
            hint = ""
            if not image_present_locally(image):
                hint = (
                    f"; the node image {image} is not in Docker and could not be pulled: build "
                    f"it offline in a checkout with {kind_image_command(versions)}"
                )
            raise ProviderError(f"creating kind cluster {self.cluster_name}: {exc}{hint}") from exc
        cluster = Cluster(
            name=self.cluster_name,
            provider="kind",
            kubeconfig=self.kubeconfig,
            toolchain=self.toolchain,
            context=f"kind-{self.cluster_name}",
            created=True,
            workdir=self.workdir,  # helm's state and the kube caches: this run's own folder
            kube_cache_dir=self.workdir / "kube-cache",
            audit_log=audit_log,
            restart_container=stop_container,
            info={
                "node_image": image,
                "config": str(self.config_path),
                "reused": reused,
                "host_patches": sorted(patches),
            },
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

    def _start_user_cluster(self, versions: Any) -> Cluster:
        """Attach to the user's kind cluster: check it exists, export its kubeconfig, wait."""
        self.kind_bin = kind_bin = self.toolchain.path("kind")
        known = kind_clusters(kind_bin)
        if self.cluster_name not in known:
            raise ProviderError(
                f"--desched-kind-cluster {self.cluster_name}: no such kind cluster (`kind get "
                f"clusters` lists: {', '.join(known) or 'none'}); create it first or drop the "
                "option to let the run create its own"
            )
        self._kind = KindCli(
            self.cluster_name, self.workdir, kind_bin, self.toolchain.path("kubectl")
        )
        try:
            self._kind.create()  # the cluster exists: this only exports its kubeconfig
        except CommandError as exc:
            raise ProviderError(f"kind cluster {self.cluster_name}: {exc}") from exc
        cluster = Cluster(
            name=self.cluster_name,
            provider="kind",
            kubeconfig=self.kubeconfig,
            toolchain=self.toolchain,
            context=f"kind-{self.cluster_name}",
            created=False,
            workdir=self.workdir,
            kube_cache_dir=self.workdir / "kube-cache",
            restart_container=stop_container,
            info={"reused": True, "user_cluster": True},
        )
        self.cluster = cluster
        count = len(cluster.core.list_node().items)
        nodes = wait_nodes_ready(
            lambda: cluster.core.list_node().items,
            expected=count,
            timeout=self.ready_timeout,
            interval=self.poll_interval,
        )
        cluster.workers = worker_names(nodes)
        if len(cluster.workers) < 2:
            raise ProviderError(
                f"kind cluster {self.cluster_name} has {len(cluster.workers)} worker node(s); "
                "the runbook moves pods from a source to a target node and the descheduler "
                "skips clusters under 2 Ready nodes: create it with two or more workers"
            )
        cluster.info["descheduler_image"] = versions.descheduler_image
        cluster.info["descheduler_image_loaded"] = self._load_image(versions.descheduler_image)
        return cluster

    def _load_image(self, image: str) -> bool:
        """Side-load the descheduler image when Docker has it, so Jobs need no registry pull."""
        if not image_present_locally(image):
            return False
        assert self._kind is not None  # start() made it
        try:
            self._kind.load_docker_image(image)
        except CommandError as exc:
            raise ProviderError(
                f"loading {image} into kind cluster {self.cluster_name}: {exc}"
            ) from exc
        return True

    def stop(self) -> None:
        if self.cluster is not None:
            close_clients(self.cluster)
        if self._kind is None or self.keep or self.user_cluster:
            return  # the user's own cluster is never deleted
        kind, self._kind = self._kind, None
        try:
            kind.delete()
        except CommandError as exc:
            raise ProviderError(
                f"deleting kind cluster {self.cluster_name} failed ({exc}); "
                f"{self._delete_command()}"
            ) from exc

    def _delete_command(self) -> str:
        return f"{self.kind_bin or 'kind'} delete cluster --name {self.cluster_name}"

    def resume_hint(self) -> str:
        if self.user_cluster:
            return f"reach it: KUBECONFIG={self.kubeconfig} kubectl get nodes"
        return (
            f"reach it: KUBECONFIG={self.kubeconfig} kubectl get nodes\n"
            f"delete it: {self._delete_command()}"
        )


def from_config(config: DeschedConfig, toolchain: Toolchain) -> KindProvider:
    """The registry's constructor (see providers.REGISTRY)."""
    # heavy: psutil, kept out of this module's import
    from pytest_desched.providers.embedded.cluster import unique_name

    return KindProvider(
        toolchain,
        config.run_dir / "kind",
        unique_name("desched-kind"),
        workers=config.workers,
        keep=config.keep == "always",
        user_cluster=config.kind_cluster,
    )
