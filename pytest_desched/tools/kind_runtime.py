"""What a run on kind needs of the images `dev/kind_node` builds: their names, kwok's stages and
the engine's runtime name.

The builder (Debian packages, a dockerd of its own, image assembly; `make kind-image`) is
development tooling and stays out of the installed package; the kind provider and a host
replay only name what it built, so those names live here, the one place both sides read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_desched.tools.gobuild import module_dir
from pytest_desched.tools.locate import cached_text
from pytest_desched.tools.versions import load_versions

if TYPE_CHECKING:
    from pytest_desched.tools.toolchain import Toolchain
    from pytest_desched.tools.versions import Versions

# The OCI runtime the builder's dockerd gets on a VM lacking CAP_SYS_RESOURCE (runc minus that
# capability); the kind provider adapts its node config when the engine's default is this one.
VM_RUNTIME = "desched-vm"
KWOK_IMAGE_REPO = "desched.local/kwok"


def kind_image_command(versions: Versions) -> str:
    """How to build the node image of `versions` (the pin, or `at_kubernetes`'s version)."""
    kube = versions.kubernetes.version
    if kube == load_versions().kubernetes.version:
        return "`make kind-image` (python -m dev.kind_node)"
    return f"`make kind-image KIND_KUBERNETES={kube}` (python -m dev.kind_node --kubernetes {kube})"


def kwok_image_tag(version: str) -> str:
    """The kwok controller image a host replay uses by default (`make kind-image` builds it)."""
    return f"{KWOK_IMAGE_REPO}:{version}"


# kwokctl's own defaults for a cluster whose kwok keeps node leases (runtime/cluster.go:
# getDefaultNodeStages(lease=True), getDefaultPodStages): without stages kwok v0.8 exits with
# "no stages found", so an in-cluster kwok gets the same ones the embedded cluster runs.
KWOK_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def kwok_stages(module_root: Path) -> str:
    """kwok's configuration file: the pinned module's own default Stage documents, in order."""
    docs = []
    for rel in KWOK_STAGE_FILES:
        path = module_root / rel
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: kwok's stage file is missing from its module; the kwok pin changed "
                "its layout: update KWOK_STAGE_FILES (tools/kind_runtime.py)"
            )
        docs.append(path.read_text().strip())
    return "\n---\n".join(docs) + "\n"


def pinned_kwok_stages(tc: Toolchain) -> str:
    """The stages of the pinned kwok module (downloaded from the Go module proxy, cached)."""
    comp = tc.versions.kwok
    text = cached_text(
        f"kwok-{comp.version}-stages.yaml",
        lambda: kwok_stages(module_dir(comp.module, comp.version)),
    )
    assert text is not None  # kwok_stages returns text or raises
    return text
