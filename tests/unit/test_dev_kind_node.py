"""The offline kind node build's pure parts (dev/kind_node): archives, kind's constants, the VM
runtime, patches."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from dev.kind_node import archive
from dev.kind_node.engine import bounding_lacks
from dev.kind_node.go_constants import _go_string_expr, kind_go_constants
from pytest_desched.providers.kind import (
    CGROUP_V1_PATCH,
    OOM_SCORE_PATCH,
    add_audit_log,
    apply_patches,
    host_patches,
    render_kind_config,
)
from pytest_desched.tools.kind_runtime import (
    KWOK_STAGE_FILES,
    VM_RUNTIME,
    kwok_stages,
    pinned_kwok_stages,
)
from tests.unit import REPO

WRAPPER = REPO / "dev/kind_node/runc_vm_wrapper.py"


def test_archive_is_what_docker_load_reads(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF fake")
    layer = tmp_path / "layer.tar"
    archive.write_layer(
        [archive.file("usr/local/bin/tool", binary), archive.symlink("bin/sh", "busybox")], layer
    )
    with tarfile.open(layer) as tar:
        names = tar.getnames()
        assert names == sorted(names)
        assert {"usr", "usr/local", "usr/local/bin", "usr/local/bin/tool", "bin/sh"} <= set(names)
        assert tar.getmember("usr/local/bin/tool").mode == 0o755
        assert tar.getmember("bin/sh").issym()
    spec = archive.ImageSpec(["example.test/tool:v1"], [layer], entrypoint=["/tool"], user="1000")
    out = tmp_path / "image.tar"
    image_id = archive.write_archive(spec, out)
    again = archive.write_archive(spec, tmp_path / "again.tar")
    assert image_id == again  # deterministic
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(tar.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
    assert manifest[0]["RepoTags"] == ["example.test/tool:v1"]
    assert "sha256:" + manifest[0]["Config"].removesuffix(".json") == image_id
    assert config["config"]["Entrypoint"] == ["/tool"] and config["config"]["User"] == "1000"
    assert len(config["rootfs"]["diff_ids"]) == 1


def test_go_string_constants_are_evaluated(tmp_path: Path) -> None:
    src = 'const a = "x:v1"\nconst b = `one\n` + a + `\ntwo`\n'
    consts: dict[str, str] = {"a": "x:v1"}
    start = src.index("`")
    assert _go_string_expr(src, start, consts) == "one\nx:v1\ntwo"
    d = tmp_path / "pkg/build/nodeimage"
    d.mkdir(parents=True)
    (d / "const_cni.go").write_text(
        'package nodeimage\n\nconst kindnetdImage = "docker.io/kindest/kindnetd:v1"\n\n'
        "const defaultCNIManifest = `\nimage: ` + kindnetdImage + `\n`\n"
    )
    (d / "const_storage.go").write_text('package nodeimage\nconst storageHelperImage = "h:v2"\n')
    (d / "defaults.go").write_text(
        'package nodeimage\nconst DefaultImage = "kindest/node:latest"\n'
    )
    consts = kind_go_constants(tmp_path)
    assert consts["defaultCNIManifest"] == "\nimage: docker.io/kindest/kindnetd:v1\n"
    assert consts["storageHelperImage"] == "h:v2"


def _fake_runc(tmp_path: Path) -> Path:
    fake = tmp_path / "runc"
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\n')
    fake.chmod(0o755)
    return fake


def test_vm_runtime_drops_only_sys_resource(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    caps = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]
    spec = {"process": {"capabilities": {k: list(caps) for k in ("bounding", "effective")}}}
    (bundle / "config.json").write_text(json.dumps(spec))
    env = {"DESCHED_RUNC": str(_fake_runc(tmp_path)), "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, str(WRAPPER), "--root", "/x", "create", "--bundle", str(bundle), "id"]
    subprocess.run(argv, env=env, check=True)
    got = json.loads((bundle / "config.json").read_text())["process"]["capabilities"]
    assert got == {k: ["CAP_CHOWN", "CAP_SYS_ADMIN"] for k in ("bounding", "effective")}
    assert (tmp_path / "args").read_text().split() == argv[2:]

    process = tmp_path / "process.json"
    process.write_text(json.dumps({"capabilities": {"effective": list(caps)}}))
    subprocess.run(
        [sys.executable, str(WRAPPER), "exec", "--process", str(process), "id"], env=env, check=True
    )
    assert json.loads(process.read_text())["capabilities"]["effective"] == [
        "CAP_CHOWN",
        "CAP_SYS_ADMIN",
    ]


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"{{.CgroupVersion}}": "2", "{{.DefaultRuntime}}": "runc"}, {}),
        (
            {"{{.CgroupVersion}}": "1", "{{.DefaultRuntime}}": "runc"},
            {"kubeadmConfigPatches": [CGROUP_V1_PATCH]},
        ),
        (
            {"{{.CgroupVersion}}": "1", "{{.DefaultRuntime}}": VM_RUNTIME},
            {
                "kubeadmConfigPatches": [CGROUP_V1_PATCH],
                "containerdConfigPatches": [OOM_SCORE_PATCH],
            },
        ),
        ({}, {}),  # no engine answers: nothing
    ],
)
def test_host_patches_follow_the_engine(facts: dict[str, str], expected: dict) -> None:
    assert host_patches(facts.get) == expected


def test_patches_and_audit_keep_the_standard_config(tmp_path: Path) -> None:
    base = render_kind_config(3, "kindest/node:vX")
    patched = add_audit_log(
        apply_patches(base, {"kubeadmConfigPatches": [CGROUP_V1_PATCH]}),
        tmp_path / "audit",
        tmp_path / "policy.yaml",
    )
    assert [n["role"] for n in patched["nodes"]] == [n["role"] for n in base["nodes"]]
    plane = patched["nodes"][0]
    assert {m["containerPath"] for m in plane["extraMounts"]} == {
        "/etc/kubernetes/audit/policy.yaml",
        "/var/log/kubernetes/audit",
    }
    assert all("extraMounts" not in n for n in patched["nodes"][1:])
    ops = yaml.safe_load(patched["kubeadmConfigPatchesJSON6902"][0]["patch"])
    assert [o["path"] for o in ops] == ["/apiServer/extraArgs/-"] * 2 + ["/apiServer/extraVolumes"]
    assert yaml.safe_load(patched["kubeadmConfigPatches"][0]) == {
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
    }
    assert "kubeadmConfigPatches" not in base  # inputs are not mutated


def test_bounding_set_is_read() -> None:
    assert isinstance(bounding_lacks(), bool)


def test_the_kwok_image_is_the_pinned_binary_labelled_with_its_module(tmp_path: Path) -> None:
    from dev.kind_node.kwok_image import BUILT_FROM, kwok_image_spec
    from pytest_desched.replay.host.kwok import kwok_image, kwok_objects

    binary = tmp_path / "kwok"
    binary.write_bytes(b"\x7fELF kwok")
    spec = kwok_image_spec(binary, "v0.8.0", "sigs.k8s.io/kwok", tmp_path / "layer.tar")
    out = tmp_path / "kwok.tar"
    archive.write_archive(spec, out)
    assert archive.archive_tags(out) == ["desched.local/kwok:v0.8.0"] == [kwok_image("v0.8.0")]
    with tarfile.open(spec.layers[0]) as layer:
        member = layer.getmember("usr/local/bin/kwok")
        assert layer.extractfile(member).read() == binary.read_bytes()  # type: ignore[union-attr]
    assert spec.labels[BUILT_FROM] == "sigs.k8s.io/kwok@v0.8.0"
    # the host replay's Deployment runs exactly that image, never pulled
    (container,) = kwok_objects("r1", kwok_image("v0.8.0"), "kind: Stage\n")[-1]["spec"][
        "template"
    ]["spec"]["containers"]
    assert container["image"] == kwok_image("v0.8.0")
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_the_host_kwok_runs_with_the_pinned_modules_default_stages(tmp_path: Path) -> None:
    """kwok v0.8 exits with "no stages found" when given none (the first kind host replay's
    nodes never became Ready): the Deployment mounts kwokctl's own default stages as its
    --config, and is Ready only when kwok serves /healthz."""
    from pytest_desched.replay.host.kwok import kwok_image, kwok_objects

    root = tmp_path / "kwok@v0.8.0"
    for i, rel in enumerate(KWOK_STAGE_FILES):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"kind: Stage\nmetadata:\n  name: s{i}\n")
    stages = kwok_stages(root)
    docs = list(yaml.safe_load_all(stages))
    assert [d["metadata"]["name"] for d in docs] == [f"s{i}" for i in range(len(KWOK_STAGE_FILES))]
    objs = kwok_objects("r1", kwok_image("v0.8.0"), stages)
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    pod = objs[-1]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (mount,) = container["volumeMounts"]
    assert cm["data"]["kwok.yaml"] == stages
    assert pod["volumes"] == [
        {"name": mount["name"], "configMap": {"name": cm["metadata"]["name"]}}
    ]
    assert f"--config={mount['mountPath']}/kwok.yaml" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    (root / KWOK_STAGE_FILES[0]).unlink()
    with pytest.raises(FileNotFoundError, match="KWOK_STAGE_FILES"):
        kwok_stages(root)


def test_the_pinned_kwok_module_has_every_stage_file() -> None:
    """The real module (in the Go module cache once the tools are built): each file a Stage."""
    from pytest_desched.tools.toolchain import Toolchain

    docs = list(yaml.safe_load_all(pinned_kwok_stages(Toolchain())))
    assert [d["kind"] for d in docs] == ["Stage"] * len(KWOK_STAGE_FILES)
    kinds = [d["spec"]["resourceRef"]["kind"] for d in docs]
    assert kinds.count("Node") == 2 and kinds.count("Pod") == 3
