"""Every binary of the offline kind node image, built like the project's other tools.

Go programs go through `Toolchain.build` (a wrapper module per pinned Go module,
``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``, cached as ``<cache>/bin/<group>/<version>/``);
the pause container is compiled from Kubernetes' own C source with Debian's gcc.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import ToolError
from pytest_desched.tools.gobuild import go_env, module_dir
from pytest_desched.tools.groups import Group, kube_ldflags
from pytest_desched.tools.kube_versions import at_kubernetes, choose_kubernetes
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import Versions, load_versions

HERE = Path(__file__).resolve().parent
KINDNETD_SOURCE = HERE / "kindnetd"


def load_components() -> dict[str, Any]:
    return yaml.safe_load((HERE / "components.yaml").read_text())


# kubeadm's own pins of the images it deploys (cmd/kubeadm/app/constants/constants.go):
# a node image at another Kubernetes gets the etcd, coredns and pause its kubeadm asks for.
_KUBEADM_CONSTANTS = {
    "etcd": re.compile(r'^\s*DefaultEtcdVersion\s*=\s*"([^"]+)"', re.M),
    "coredns": re.compile(r'^\s*CoreDNSVersion\s*=\s*"([^"]+)"', re.M),
    "pause": re.compile(r'^\s*PauseVersion\s*=\s*"([^"]+)"', re.M),
}


def kubeadm_image_versions(kube_dir: Path) -> dict[str, str]:
    """{etcd, coredns, pause} as kubeadm of the Kubernetes module at `kube_dir` pins them.

    etcd's is the Go module version (kubeadm's `3.7.0-0` image tag -> `v3.7.0`).
    """
    path = kube_dir / "cmd/kubeadm/app/constants/constants.go"
    src = path.read_text()
    out = {}
    for name, pattern in _KUBEADM_CONSTANTS.items():
        m = pattern.search(src)
        if not m:
            raise ToolError(
                f"{path}: no {pattern.pattern!r}; kubeadm moved its image pins, update "
                "_KUBEADM_CONSTANTS (dev/kind_node/binaries.py)"
            )
        out[name] = m.group(1)
    out["etcd"] = "v" + out["etcd"].split("-", 1)[0]
    return out


def components_at(components: dict[str, Any], kube_dir: Path) -> dict[str, Any]:
    """components.yaml with etcd, coredns and pause moved to what kubeadm at `kube_dir` wants."""
    pins = kubeadm_image_versions(kube_dir)
    out = dict(components)
    for name, version in pins.items():
        out[name] = {**components[name], "version": version}
    return out


@dataclass(frozen=True)
class Pins:
    versions: Versions
    components: dict[str, Any]

    @classmethod
    def load(cls, kubernetes: str | None = None) -> Pins:
        """The pins; at `kubernetes` (a served version, else ConfigError naming the served
        ones) the Kubernetes binaries, staging modules, node image tag and kubeadm's etcd,
        coredns and pause move with it, every other component stays pinned."""
        versions, components = load_versions(), load_components()
        choice = choose_kubernetes(versions, kubernetes, "--kubernetes")
        if choice.pinned:
            return cls(versions, components)
        versions = at_kubernetes(versions, choice.version)
        k = versions.kubernetes
        return cls(versions, components_at(components, module_dir(k.module, k.version)))

    def version(self, name: str) -> str:
        return str(self.components[name]["version"])

    def module(self, name: str) -> str:
        return str(self.components[name]["module"])

    def key(self) -> str:
        """One short digest of every pin: the node image's cache key."""
        text = yaml.safe_dump(
            {"components": self.components, "versions": self.versions.summary()}, sort_keys=True
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def node_groups(p: Pins) -> dict[str, Group]:
    """The Go builds of the node image, by group name."""
    k = p.versions.kubernetes
    cd, cni = p.module("containerd"), p.module("cni_plugins")
    return {
        # kubelet, kubeadm and kube-proxy of the project's kubernetes pin (the control plane's
        # kube-apiserver/-controller-manager/-scheduler/kubectl are the `kubernetes` group's).
        "kube-node": Group(
            "kube-node",
            k.module,
            k.version,
            {b: f"{k.module}/cmd/{b}" for b in ("kubelet", "kubeadm", "kube-proxy")},
            kube_ldflags(k.version),
        ),
        "containerd": Group(
            "containerd",
            cd,
            p.version("containerd"),
            {
                "containerd": f"{cd}/cmd/containerd",
                "ctr": f"{cd}/cmd/ctr",
                "containerd-shim-runc-v2": f"{cd}/cmd/containerd-shim-runc-v2",
            },
            (
                f"-X {cd}/version.Version={p.version('containerd')}",
                f"-X {cd}/version.Package=github.com/containerd/containerd/v2",
            ),
        ),
        "cni-plugins": Group(
            "cni-plugins",
            cni,
            p.version("cni_plugins"),
            {
                "host-local": f"{cni}/plugins/ipam/host-local",
                "loopback": f"{cni}/plugins/main/loopback",
                "ptp": f"{cni}/plugins/main/ptp",
                "portmap": f"{cni}/plugins/meta/portmap",
            },
        ),
        "crictl": Group(
            "crictl",
            p.module("crictl"),
            p.version("crictl"),
            {"crictl": f"{p.module('crictl')}/cmd/crictl"},
            (f"-X {p.module('crictl')}/pkg/version.Version={p.version('crictl')}",),
        ),
        "etcd-kubeadm": Group(
            "etcd-kubeadm", p.module("etcd"), p.version("etcd"), {"etcd": p.module("etcd")}
        ),
        "coredns": Group(
            "coredns", p.module("coredns"), p.version("coredns"), {"coredns": p.module("coredns")}
        ),
        "local-path-provisioner": Group(
            "local-path-provisioner",
            p.module("local_path_provisioner"),
            p.version("local_path_provisioner"),
            {"local-path-provisioner": p.module("local_path_provisioner")},
            (f"-X main.VERSION={p.version('local_path_provisioner')}",),
        ),
        # The project's own minimal kindnetd (kind's lives in a nested module no proxy serves):
        # built against client-go of the kubernetes pin.
        "kindnetd": Group(
            "kindnetd",
            "k8s.io/client-go",
            k.extra.get("staging_version", "v0.36.3"),
            {"kindnetd": "desched.local/wrapper/kindnetd"},
            source_dir=KINDNETD_SOURCE,
        ),
    }


def build_go(tc: Toolchain, groups: dict[str, Group], names: list[str] | None = None) -> dict:
    """Build (or find in the cache) each group; returns {group: bin dir}."""
    out = {}
    for name, group in groups.items():
        if names and name not in names:
            continue
        tc.build(group)
        out[name] = tc.bin_dir(group)
    return out


def build_pause(tc: Toolchain, p: Pins, version: str) -> Path:
    """Kubernetes' pause container from build/pause/linux/pause.c, static, with Debian's gcc."""
    out = tc.cache_dir / "bin" / "pause" / version / "pause"
    if out.is_file():
        return out
    env = go_env()
    k = p.versions.kubernetes
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{k.module}@{k.version}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd="/",
    )
    if res.returncode != 0:
        raise ToolError(f"go mod download of kubernetes failed: {res.stderr[-400:]}")
    src_dir = Path(json.loads(res.stdout)["Dir"]) / "build" / "pause" / "linux"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("pause.tmp")
    cmd = [
        "nice",
        "-n",
        "15",
        "gcc",
        "-Os",
        "-Wall",
        "-Werror",
        "-static",
        f"-DVERSION=v{version}-desched",
        "-o",
        str(tmp),
        str(src_dir / "pause.c"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise ToolError(
            f"compiling pause.c failed (is gcc/libc6-dev installed?): {res.stderr[-400:]}"
        )
    subprocess.run(["strip", str(tmp)], check=False)
    tmp.rename(out)
    return out
