"""The kind node image at a Kubernetes version other than the pin (dev/kind_node --kubernetes):
what moves with the version (binaries, staging modules, the image tag, kubeadm's etcd, coredns
and pause), what stays pinned, and the refusal of an unserved version before anything is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev.kind_node import __main__ as kind_node_main
from dev.kind_node.binaries import Pins, components_at, kubeadm_image_versions, node_groups
from pytest_desched.errors import ToolError
from pytest_desched.tools.kind_runtime import kind_image_command
from pytest_desched.tools.kube_versions import at_kubernetes
from pytest_desched.tools.versions import load_versions

CONSTANTS = """
const (
	// DefaultEtcdVersion indicates the default etcd version that kubeadm uses
	DefaultEtcdVersion = "3.7.0-0"
	CoreDNSVersion = "v1.14.6"
	PauseVersion = "3.10.2"
)
"""


def _kube_dir(tmp_path: Path, text: str = CONSTANTS) -> Path:
    path = tmp_path / "cmd/kubeadm/app/constants/constants.go"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return tmp_path


def test_kubeadm_image_versions_are_read_from_its_constants(tmp_path: Path) -> None:
    got = kubeadm_image_versions(_kube_dir(tmp_path))
    assert got == {"etcd": "v3.7.0", "coredns": "v1.14.6", "pause": "3.10.2"}


def test_a_moved_kubeadm_constant_is_named(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"CoreDNSVersion.*_KUBEADM_CONSTANTS"):
        kubeadm_image_versions(_kube_dir(tmp_path, CONSTANTS.replace("CoreDNSVersion", "X")))


def test_only_kubeadms_images_move_with_the_version(tmp_path: Path) -> None:
    pins = Pins.load()
    moved = components_at(pins.components, _kube_dir(tmp_path))
    assert moved["etcd"]["version"] == "v3.7.0" and moved["etcd"]["module"]
    assert moved["coredns"]["version"] == "v1.14.6"
    for name in ("containerd", "cni_plugins", "crictl", "local_path_provisioner", "debian"):
        assert moved[name] == pins.components[name]
    assert pins.components["etcd"]["version"] != "v3.7.0"  # the pinned ones are untouched


def test_the_pin_is_the_default_and_keeps_components_yaml() -> None:
    pins = Pins.load()
    assert pins.versions == load_versions()
    assert Pins.load(pins.versions.kubernetes.version).key() == pins.key()


def test_a_served_version_moves_the_node_builds_and_the_image_tag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kube_dir = _kube_dir(tmp_path)
    monkeypatch.setattr("dev.kind_node.binaries.module_dir", lambda module, version: kube_dir)
    pinned = Pins.load()
    pins = Pins.load("1.37.2")
    assert pins.versions.kubernetes.version == "v1.37.2"
    assert pins.versions.kind_node_image.endswith(":v1.37.2")
    assert pins.versions == at_kubernetes(load_versions(), "v1.37.2")
    groups = node_groups(pins)
    assert groups["kube-node"].version == "v1.37.2"
    assert groups["kindnetd"].version == "v0.37.2"  # client-go of that minor
    assert groups["etcd-kubeadm"].version == "v3.7.0"
    assert groups["coredns"].version == "v1.14.6"
    assert groups["containerd"].version == node_groups(pinned)["containerd"].version
    assert pins.key() != pinned.key()  # cached apart from the pinned image


def test_an_unserved_version_exits_2_before_anything_is_built(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*a: object, **k: object) -> None:
        raise AssertionError("nothing may be built or started for an unserved version")

    monkeypatch.setattr(kind_node_main, "Toolchain", never)
    monkeypatch.setattr(kind_node_main, "ensure_packages", never)
    assert kind_node_main.main(["build", "--kubernetes", "v1.33.1"]) == 2
    err = capsys.readouterr().err
    assert "v1.33.1" in err and "served:" in err and "v1.37.2" in err


def test_the_kind_providers_hint_names_the_version_to_build() -> None:
    v = load_versions()
    assert "KIND_KUBERNETES" not in kind_image_command(v)
    assert "make kind-image KIND_KUBERNETES=v1.37.2" in kind_image_command(
        at_kubernetes(v, "v1.37.2")
    )


def test_only_the_policy_checker_is_probed_for_the_descheduler_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kindnetd is a source_dir group against client-go: probing it for the descheduler's API
    refused the whole kind build (`func NewProfile` missing in client-go)."""
    from pytest_desched.tools import toolchain
    from pytest_desched.tools.groups import build_groups

    def never(*a: object) -> None:
        raise AssertionError("probed")

    monkeypatch.setattr(toolchain, "module_source_dir", never)
    kindnetd = node_groups(Pins.load())["kindnetd"]
    assert kindnetd.source_dir is not None
    assert toolchain.checker_tags(kindnetd, {}) == ()
    with pytest.raises(AssertionError, match="probed"):  # the checker still is
        toolchain.checker_tags(build_groups(load_versions())["policycheck"], {})
