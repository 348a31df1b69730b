"""The kwok controller image, built here from the pinned kwok Go module (never pulled).

A host replay (`desched replay --host`) runs kwok in the host cluster; on kind it is loaded
into the nodes as the descheduler image is (`kind load docker-image`). One layer: the
toolchain's static kwok binary (`CGO_ENABLED=0`), the same one the embedded provider runs;
its own archive and cache key, so adding it changes neither the node image nor its preloaded
images.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from dev.kind_node import archive
from dev.kind_node.archive import ImageSpec, archive_config_digest
from dev.kind_node.engine import docker_image_id
from pytest_desched.log import Reporter
from pytest_desched.tools.kind_runtime import kwok_image_tag
from pytest_desched.tools.toolchain import Toolchain

BUILT_FROM = "io.github.pytest-desched.built-from"


def kwok_image_spec(binary: Path, version: str, module: str, layer: Path) -> ImageSpec:
    """The image: kwok at /usr/local/bin/kwok, its entrypoint, labelled with its module."""
    archive.write_layer(
        [
            archive.file("usr/local/bin/kwok", binary),
            archive.text("etc/nsswitch.conf", "hosts: files dns\n"),
            archive.text("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"),
            archive.directory("tmp", 0o1777),
            archive.directory("root", 0o700),
        ],
        layer,
    )
    return ImageSpec(
        [kwok_image_tag(version)],
        [layer],
        entrypoint=["/usr/local/bin/kwok"],
        env=["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"],
        labels={
            "org.opencontainers.image.source": "https://github.com/kubernetes-sigs/kwok",
            BUILT_FROM: f"{module}@{version}",
        },
    )


def build_kwok_image(tc: Toolchain, report: Reporter) -> str:
    """Build the image archive and `docker load` it unless Docker holds that very image."""
    comp = tc.versions.kwok
    binary = tc.path("kwok")
    dest = tc.cache_dir / "kind" / "kwok-image" / f"kwok-{comp.version}.tar"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as d:
        spec = kwok_image_spec(binary, comp.version, comp.module, Path(d) / "layer.tar")
        archive.write_archive(spec, dest)
    tag = kwok_image_tag(comp.version)
    if docker_image_id(tag) != archive_config_digest(dest):
        with open(dest, "rb") as fh:
            subprocess.run(["docker", "load"], stdin=fh, check=True, capture_output=True)
        report(f"loaded {tag} into Docker (kwok {comp.version} from {comp.module})")
    return tag
