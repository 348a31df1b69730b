"""The offline kind node image: base root filesystem, preloaded images, node assembly.

Each job is cached under ``<cache>/kind/`` by a digest of what it is made of, so a second
run only checks: the Go binaries (``<cache>/bin/<group>/<version>/``, see binaries.py),

* ``base/<key>/rootfs.tar``: Debian (mmdebstrap, the host's apt sources) with kind v0.33's
  base packages, kind's ``images/base/files`` (read from the kind Go module in the module
  cache at build time) and containerd, crictl and the CNI plugins built from their modules;
  imported as ``desched.local/kind-base:<key>``;
* ``images/<key>/*.tar``: the images kind preloads, as ``docker save`` archives tagged as
  kind v0.33 and kubeadm v1.36 expect (control plane, kube-proxy, etcd, coredns, pause,
  kindnetd, local-path-provisioner and its helper), plus the descheduler image;
* the node image itself (``kindest/node:<kubernetes version>``, labelled with its key),
  assembled the way ``kind build node-image`` does it: a container of the base image,
  kubeadm/kubelet/kubectl copied in, ``/kind/version`` and kind's default CNI and storage
  manifests written, every archive imported into containerd (``ctr images import
  --no-unpack``, pinned), then ``docker commit``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dev.kind_node import archive
from dev.kind_node.archive import ImageSpec, archive_config_digest, archive_tags
from dev.kind_node.binaries import (
    Pins,
    build_go,
    build_pause,
    node_groups,
)
from dev.kind_node.engine import docker_has, docker_image_id, docker_label
from dev.kind_node.go_constants import kind_go_constants
from pytest_desched.errors import ToolError
from pytest_desched.log import Reporter, tagged
from pytest_desched.tools.gobuild import module_dir
from pytest_desched.tools.locate import file_lock
from pytest_desched.tools.toolchain import Toolchain

BASE_REPO = "desched.local/kind-base"
KEY_LABEL = "io.github.pytest-desched.kind-node-key"
NICE = ["nice", "-n", "15"]
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# kind v0.33's base packages (images/base/Dockerfile) plus Debian's runc, minus
# nfs-common/open-iscsi (network storage the lab never mounts).
BASE_PACKAGES = [
    "systemd",
    "systemd-sysv",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "fuse-overlayfs",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
    "runc",
]
# The components.yaml entries the base root filesystem is made of (not etcd, coredns, pause:
# those follow the Kubernetes version and live in the preloaded images).
BASE_COMPONENTS = ("debian", "containerd", "cni_plugins", "crictl")
IPTABLES_PACKAGES = ["iptables", "conntrack", "nftables"]
DPKG_EXCLUDES = ["/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*"]


_report = tagged("kind-node")


def run(cmd: list[str], report: Reporter | None = None, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("check", True)
    kw.setdefault("text", True)
    kw.setdefault("capture_output", True)
    try:
        return subprocess.run(cmd, **kw)
    except subprocess.CalledProcessError as exc:
        tail = ((exc.stderr or "") + (exc.stdout or ""))[-1500:]
        raise ToolError(
            f"`{' '.join(map(str, cmd[:6]))} ...` exited {exc.returncode}: {tail}"
        ) from None


# --- the build --------------------------------------------------------------------------


@dataclass
class NodeImageBuild:
    tc: Toolchain
    pins: Pins
    report: Reporter = _report

    def __post_init__(self) -> None:
        self.root = self.tc.cache_dir / "kind"
        self.kube_version = self.pins.versions.kubernetes.version
        self.node_tag = self.pins.versions.kind_node_image
        self.kind_dir = module_dir(self.pins.versions.kind.module, self.pins.versions.kind.version)
        self.consts = kind_go_constants(self.kind_dir)
        self.bins: dict[str, Path] = {}

    # -- binaries --
    def binaries(self) -> None:
        started = time.monotonic()
        groups = node_groups(self.pins)
        for name, d in build_go(self.tc, groups).items():
            self.bins[name] = d
        for tool in (
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubectl",
            "descheduler",
        ):
            self.bins[tool] = self.tc.path(tool)
        pause = self.pins.version("pause")
        self.bins["pause"] = build_pause(self.tc, self.pins, pause)
        self.report(f"binaries ready ({time.monotonic() - started:.0f}s)")

    def b(self, group: str, tool: str | None = None) -> Path:
        d = self.bins[group]
        return d if d.is_file() else d / (tool or group)

    def key(self, *parts: object) -> str:
        h = hashlib.sha256()
        for p in parts:
            if isinstance(p, Path) and p.is_file():
                st = p.stat()
                h.update(f"{p}:{st.st_size}:{int(st.st_mtime)}".encode())
            else:
                h.update(repr(p).encode())
        return h.hexdigest()[:12]

    # -- Debian root filesystems --
    def mmdebstrap(self, dest: Path, packages: list[str], variant: str, hooks: list[str]) -> None:
        suite = self.pins.components["debian"]["suite"]
        sources = "/etc/apt/sources.list.d/debian.sources"
        mirror = sources if Path(sources).is_file() else "http://deb.debian.org/debian"
        cmd = [
            *NICE,
            "mmdebstrap",
            f"--variant={variant}",
            "--include=" + ",".join(packages),
            *[f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES],
            *[f"--customize-hook={h}" for h in hooks],
            suite,
            str(dest),
            mirror,
        ]
        tmp = dest.with_name(dest.name + ".tmp.tar")
        cmd[-2] = str(tmp)
        log = dest.with_name(dest.name + ".log")
        with open(log, "w") as fh:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
        if rc != 0:
            raise ToolError(f"mmdebstrap exited {rc}; log: {log}")
        tmp.replace(dest)

    def base_staging(self, staging: Path) -> None:
        """kind's images/base/files plus the binaries the base image builds from source."""
        files = self.kind_dir / "images/base/files"
        for sub in ("usr/local/bin", "kind", "etc"):
            shutil.copytree(files / sub, staging / sub, dirs_exist_ok=True)
        for p in staging.rglob("*"):
            if p.is_file():
                executable = "/bin/" in f"/{p.relative_to(staging)}"
                p.chmod(0o755 if executable else 0o644)
            elif p.is_dir():
                p.chmod(0o755)
        lb = staging / "usr/local/bin"
        for tool in ("containerd", "ctr", "containerd-shim-runc-v2"):
            shutil.copy2(self.b("containerd", tool), lb / tool)
        shutil.copy2(self.b("crictl"), lb / "crictl")
        cni = staging / "opt/cni/bin"
        cni.mkdir(parents=True, exist_ok=True)
        for tool in ("host-local", "loopback", "ptp", "portmap"):
            shutil.copy2(self.b("cni-plugins", tool), cni / tool)
        # cri-base.json as kind makes it: `ctr oci spec` + the product-files hook, no rlimits.
        spec = json.loads(run([str(self.b("containerd", "ctr")), "oci", "spec"]).stdout)
        hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
        hooks.append({"path": "/kind/bin/mount-product-files.sh"})
        spec["process"].pop("rlimits", None)
        (staging / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=4))
        (staging / "etc/kubernetes/manifests").mkdir(parents=True, exist_ok=True)

    def base_image(self) -> str:
        # only what the base holds: node images of several Kubernetes versions share one base
        key = self.key(
            "base",
            BASE_PACKAGES,
            {k: self.pins.components[k] for k in BASE_COMPONENTS},
            self.pins.versions.kind.version,
            *(self.b("containerd", t) for t in ("containerd", "ctr", "containerd-shim-runc-v2")),
            self.b("crictl"),
            self.b("cni-plugins", "ptp"),
        )
        tag = f"{BASE_REPO}:{key}"
        if docker_has(tag):
            return tag
        d = self.root / "base" / key
        d.mkdir(parents=True, exist_ok=True)
        tar = d / "rootfs.tar"
        with file_lock(self.tc.cache_dir / "locks" / f"kind-base-{key}.lock"):
            if not tar.is_file():
                started = time.monotonic()
                self.report(f"building the base root filesystem (mmdebstrap, {d})")
                staging = Path(tempfile.mkdtemp(prefix="kind-base-"))
                try:
                    self.base_staging(staging)
                    hooks = [
                        'find "$1"/lib/systemd/system/sysinit.target.wants/ '
                        "-name systemd-tmpfiles-setup.service -delete",
                        'rm -f "$1"/lib/systemd/system/multi-user.target.wants/* '
                        '"$1"/etc/systemd/system/*.wants/* '
                        '"$1"/lib/systemd/system/local-fs.target.wants/* '
                        '"$1"/lib/systemd/system/sockets.target.wants/*udev* '
                        '"$1"/lib/systemd/system/sockets.target.wants/*initctl* '
                        '"$1"/lib/systemd/system/basic.target.wants/*',
                        'echo ReadKMsg=no >> "$1"/etc/systemd/journald.conf',
                        f"sync-in {staging} /",
                        'chroot "$1" systemctl enable kubelet.service containerd.service '
                        "undo-mount-hacks.service",
                        'chroot "$1" systemctl mask systemd-binfmt.service',
                        'rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
                    ]
                    self.mmdebstrap(tar, BASE_PACKAGES, "minbase", hooks)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
                self.report(f"base root filesystem built in {time.monotonic() - started:.0f}s")
            spec = ImageSpec(
                [tag],
                [tar],
                entrypoint=["/usr/local/bin/entrypoint", "/sbin/init"],
                env=[PATH_ENV, "container=docker"],
                stop_signal="SIGRTMIN+3",
            )
            image = d / "image.tar"
            archive.write_archive(spec, image)
            with open(image, "rb") as fh:
                run(["docker", "load"], stdin=fh, text=False)
            image.unlink()
        return tag

    def iptables_rootfs(self) -> Path:
        """A small Debian root with iptables/nft userland for kube-proxy (like distroless-iptables)."""
        key = self.key("iptables", IPTABLES_PACKAGES, self.pins.components["debian"])
        tar = self.root / "base" / f"iptables-{key}.tar"
        if not tar.is_file():
            tar.parent.mkdir(parents=True, exist_ok=True)
            self.report("building kube-proxy's iptables root filesystem (mmdebstrap)")
            self.mmdebstrap(
                tar,
                IPTABLES_PACKAGES,
                "minbase",
                ['rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*'],
            )
        return tar

    def busybox(self) -> Path:
        """Debian's busybox-static, for kind's local-path helper image (sh, mkdir, rm, ...)."""
        out = self.root / "debs" / "busybox"
        if out.is_file():
            return out
        d = Path(tempfile.mkdtemp(prefix="busybox-"))
        try:
            run(["apt-get", "download", "busybox-static"], cwd=d)
            deb = next(d.glob("busybox-static_*.deb"))
            run(["dpkg-deb", "-x", str(deb), str(d / "x")])
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(d / "x/bin/busybox", out)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return out

    # -- images --
    def image_specs(self, layers: Path) -> dict[str, ImageSpec]:
        """Every preloaded image (plus the descheduler's), by archive name."""
        v, c = self.pins.versions, self.consts
        kv = self.kube_version
        nss = archive.text("etc/nsswitch.conf", "hosts: files dns\n")
        passwd = archive.text(
            "etc/passwd",
            "root:x:0:0:root:/root:/sbin/nologin\n"
            "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
        )
        group = archive.text("etc/group", "root:x:0:\nnonroot:x:65532:\n")
        common = [nss, passwd, group, archive.directory("tmp", 0o1777)]

        def layer(name: str, entries: list[archive.Entry]) -> Path:
            p = layers / f"{name}.tar"
            archive.write_layer(entries + common, p)
            return p

        specs: dict[str, ImageSpec] = {}
        for comp in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            specs[comp] = ImageSpec(
                [f"registry.k8s.io/{comp}:{kv}"],
                [layer(comp, [archive.file(f"usr/local/bin/{comp}", self.bins[comp])])],
            )
        wrapper = (Path(__file__).parent / "iptables-wrapper.sh").read_bytes()
        ipt_entries = [archive.file("usr/local/bin/kube-proxy", self.b("kube-node", "kube-proxy"))]
        for name in (
            "iptables",
            "iptables-save",
            "iptables-restore",
            "ip6tables",
            "ip6tables-save",
            "ip6tables-restore",
        ):
            ipt_entries.append(archive.text(f"usr/sbin/{name}", wrapper, 0o755))
        specs["kube-proxy"] = ImageSpec(
            [f"registry.k8s.io/kube-proxy:{kv}"],
            [self.iptables_rootfs(), layer("kube-proxy", ipt_entries)],
        )
        etcd_tag = f"{self.pins.version('etcd').lstrip('v')}-0"
        specs["etcd"] = ImageSpec(
            [f"registry.k8s.io/etcd:{etcd_tag}"],
            [
                layer(
                    "etcd",
                    [
                        archive.file("usr/local/bin/etcd", self.b("etcd-kubeadm", "etcd")),
                        archive.directory("var/lib/etcd", 0o700),
                    ],
                )
            ],
        )
        specs["coredns"] = ImageSpec(
            [f"registry.k8s.io/coredns/coredns:{self.pins.version('coredns')}"],
            [layer("coredns", [archive.file("coredns", self.b("coredns"))])],
            entrypoint=["/coredns"],
        )
        pause = self.pins.version("pause")
        specs["pause"] = ImageSpec(
            sorted(
                {f"registry.k8s.io/pause:{pause}", v.workload_image, "registry.k8s.io/pause:3.10"}
            ),
            [layer("pause", [archive.file("pause", self.bins["pause"])])],
            entrypoint=["/pause"],
            user="65535:65535",
        )
        specs["kindnetd"] = ImageSpec(
            [c["kindnetdImage"]],
            [layer("kindnetd", [archive.file("bin/kindnetd", self.b("kindnetd"))])],
            entrypoint=["/bin/kindnetd"],
        )
        specs["local-path-provisioner"] = ImageSpec(
            [c["storageProvisionerImage"]],
            [
                layer(
                    "local-path-provisioner",
                    [
                        archive.file(
                            "usr/local/bin/local-path-provisioner", self.b("local-path-provisioner")
                        )
                    ],
                )
            ],
            entrypoint=["/usr/local/bin/local-path-provisioner"],
        )
        bb = [archive.file("bin/busybox", self.busybox())]
        bb += [
            archive.symlink(f"bin/{a}", "busybox")
            for a in ("sh", "mkdir", "rm", "rmdir", "chmod", "ls", "cat", "test", "[")
        ]
        specs["local-path-helper"] = ImageSpec(
            [c["storageHelperImage"]], [layer("local-path-helper", bb)], cmd=["/bin/sh"]
        )
        specs["descheduler"] = ImageSpec(
            [v.descheduler_image],
            [layer("descheduler", [archive.file("bin/descheduler", self.bins["descheduler"])])],
            cmd=["/bin/descheduler", "--help"],
            user="1000",
            labels={
                "org.opencontainers.image.source": "https://github.com/kubernetes-sigs/descheduler",
                "io.github.pytest-desched.built-from": f"{v.descheduler.module}@{v.descheduler.version}",
            },
        )
        return specs

    def images(self) -> dict[str, Path]:
        """Write every image archive (cached by a digest of its inputs); {name: archive}."""
        inputs = [self.bins[k] for k in sorted(self.bins)]
        key = self.key(
            "images",
            self.consts,
            self.pins.components,
            self.kube_version,
            *[p if p.is_file() else p / "BUILDINFO.json" for p in inputs],
            (Path(__file__).parent / "iptables-wrapper.sh").read_text(),
            Path(archive.__file__).read_text(),
        )
        # by Kubernetes version: node images of several versions keep their archives side by side
        d = self.root / "images" / self.kube_version / key
        done = d / "DONE.json"
        if done.is_file():
            return {k: Path(p) for k, p in json.loads(done.read_text()).items()}
        started = time.monotonic()
        layers = d / "layers"
        layers.mkdir(parents=True, exist_ok=True)
        out = {}
        for name, spec in self.image_specs(layers).items():
            out[name] = d / f"{name}.tar"
            archive.write_archive(spec, out[name])
            self.report(f"image {', '.join(spec.tags)} -> {out[name].name}")
        shutil.rmtree(layers)
        done.write_text(json.dumps({k: str(p) for k, p in out.items()}))
        for old in d.parent.iterdir():  # archives of earlier inputs are never read again
            if old != d and (old / "DONE.json").is_file():
                shutil.rmtree(old, ignore_errors=True)
        self.report(f"images written in {time.monotonic() - started:.0f}s ({d})")
        return out

    # -- the node image --
    def node_image(self, base: str, images: dict[str, Path]) -> str:
        kube = [
            self.b("kube-node", "kubeadm"),
            self.b("kube-node", "kubelet"),
            self.bins["kubectl"],
        ]
        key = self.key("node", base, *images.values(), *kube, self.consts)
        tag = self.node_tag
        if docker_label(tag, KEY_LABEL) == key:
            return tag
        started = time.monotonic()
        self.report(f"assembling node image {tag} from {base}")
        previous = docker_image_id(tag)
        name = f"desched-kind-build-{os.getpid()}"
        run(
            [
                "docker",
                "run",
                "-d",
                "--entrypoint=sleep",
                f"--name={name}",
                "--security-opt",
                "seccomp=unconfined",
                base,
                "infinity",
            ]
        )

        def sh(script: str, **kw) -> subprocess.CompletedProcess:
            return run(["docker", "exec", "-i", name, "bash", "-c", script], **kw)

        try:
            for binary in kube:
                run(["docker", "cp", str(binary), f"{name}:/usr/bin/{binary.name}"])
            sh(
                "chmod +x /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl && "
                "chown root:root /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl"
            )
            sh("mkdir -p /kind/manifests && cat > /kind/version", input=self.kube_version)
            sh("cat > /kind/manifests/default-cni.yaml", input=self.consts["defaultCNIManifest"])
            sh(
                "cat > /kind/manifests/default-storage.yaml",
                input=self.consts["defaultStorageManifest"],
            )
            required = sh(f"kubeadm config images list --kubernetes-version {self.kube_version}")
            have = set()
            for p in images.values():
                have.update(archive_tags(p))
            missing = [i for i in required.stdout.split() if i not in have]
            if missing:
                raise ToolError(f"kubeadm wants images the build does not make: {missing}")
            sh("nohup containerd > /var/log/containerd-build.log 2>&1 &")
            sh(
                "for i in $(seq 1 30); do [ -S /run/containerd/containerd.sock ] && break; "
                "sleep 1; done; ctr info >/dev/null"
            )
            for img, p in images.items():
                if img == "descheduler":
                    continue  # loaded by the provider (kind load), as on any machine
                with open(p, "rb") as fh:
                    run(
                        [
                            "docker",
                            "exec",
                            "-i",
                            name,
                            "ctr",
                            "--namespace=k8s.io",
                            "images",
                            "import",
                            "--label=io.cri-containerd.pinned=pinned",
                            "--all-platforms",
                            "--no-unpack",
                            "--digests",
                            "-",
                        ],
                        stdin=fh,
                        text=False,
                    )
            listed = sh("ctr --namespace=k8s.io images list -q").stdout.split()
            self.report(
                f"preloaded {len([i for i in listed if not i.startswith('sha256:')])} image tags"
            )
            sh(
                "pkill containerd; for i in $(seq 1 20); do pgrep containerd >/dev/null || "
                "break; sleep 0.5; done; rm -f /var/log/containerd-build.log"
            )
            run(
                [
                    "docker",
                    "commit",
                    "--change",
                    'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]',
                    "--change",
                    'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""',
                    "--change",
                    f"LABEL {KEY_LABEL}={key}",
                    name,
                    tag,
                ]
            )
        finally:
            subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
        if previous and previous != docker_image_id(tag):
            # the replaced node image (about 1 GB); kept while a container still uses it
            subprocess.run(["docker", "rmi", previous], capture_output=True, check=False)
        self.report(f"node image {tag} built in {time.monotonic() - started:.0f}s")
        return tag

    def load_descheduler(self, images: dict[str, Path]) -> str:
        tag = self.pins.versions.descheduler_image
        want = archive_config_digest(images["descheduler"])
        if docker_image_id(tag) != want:
            with open(images["descheduler"], "rb") as fh:
                run(["docker", "load"], stdin=fh, text=False)
            self.report(f"loaded {tag} into Docker")
        return tag

    def all(self) -> dict[str, str]:
        started = time.monotonic()
        self.binaries()
        images = self.images()
        base = self.base_image()
        node = self.node_image(base, images)
        desched = self.load_descheduler(images)
        self.report(f"kind node image ready in {time.monotonic() - started:.0f}s")
        return {"node_image": node, "base_image": base, "descheduler_image": desched}
