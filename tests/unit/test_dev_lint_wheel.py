"""`make wheel-lint`: the staged package, its manifest and the wheel hatchling builds from it.

The binaries are fake scripts in a tmp cache and `go version -m` is a fake `go` on PATH, so
the staging, the manifest and the real `pip wheel` + hatchling build run in a few seconds;
tests/e2e/test_lint_wheel_e2e.py installs a wheel of the real binaries.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from dev import lint_wheel
from pytest_desched import __version__
from pytest_desched.descheduler import chart_source
from pytest_desched.descheduler.chart_source import ChartRef, sha256_file
from pytest_desched.errors import ToolError, UnsafeRender
from pytest_desched.tools import lint_bin
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import load_versions
from tests.unit import REPO
from tests.unit.tools.test_lint_bin import fake_wheel
from tests.unit.tools.test_toolchain import exe, script

V = load_versions()
TAG = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64"


def fake_go(bin_dir: Path, cgo: str = "0") -> None:
    """`go version -m BINARY` as Go 1.26 prints it for a static linux/amd64 build that links
    two modules, one of them replaced; `go mod download -json` as it answers for them, from
    module folders beside `bin_dir` (one with a licence and a notice, one with none)."""
    mods = bin_dir.parent / "gomod"
    for name, files in (("a@v1.0.0", ("LICENSE", "NOTICE")), ("b@v2.0.0", ())):
        (mods / name).mkdir(parents=True, exist_ok=True)
        (mods / name / "go.mod").write_text("module x\n")
        for f in files:
            (mods / name / f).write_text(f"{f} of {name}\n")
    download = (
        f'{{"Path":"example.com/a","Version":"v1.0.0","Dir":"{mods / "a@v1.0.0"}"}}\n'
        f'{{"Path":"example.com/b","Version":"v2.0.0","Dir":"{mods / "b@v2.0.0"}"}}'
    )
    script(
        bin_dir / "go",
        f"if [ \"$1\" = mod ]; then echo '{download}'; exit 0; fi\n"
        f'echo "$3: go1.26.8"; printf "\\tpath\\tx\\n\\tmod\\tx\\t(devel)\\t\\n'
        f"\\tdep\\texample.com/a\\tv1.0.0\\th1:a=\\n\\tdep\\texample.com/old\\tv0.1.0\\n"
        f'\\t=>\\texample.com/b\\tv2.0.0\\th1:b=\\n\\tbuild\\t-ldflags=\\"-s -w\\"\\n'
        f'\\tbuild\\tCGO_ENABLED={cgo}\\n\\tbuild\\tGOARCH=amd64\\n\\tbuild\\tGOOS=linux\\n"',
    )


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Toolchain:
    """A toolchain whose cache holds helm and the policy checker, and the pinned chart."""
    tc = Toolchain(cache_dir=tmp_path / "cache", use_path=False, report=lambda _m: None)
    for tool in lint_bin.TOOLS:
        exe(tc.bin_dir(tc.groups[tool]) / tool)
    fake_go(tmp_path / "gobin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'gobin'}{os.pathsep}{os.environ['PATH']}")
    tgz = tmp_path / f"{V.chart_name}-{V.chart_version}.tgz"
    with tarfile.open(tgz, "w:gz") as tf:
        data = f"name: {V.chart_name}\nversion: {V.chart_version}\n".encode()
        info = tarfile.TarInfo(f"{V.chart_name}/Chart.yaml")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    ref = ChartRef(tgz, "module", V.chart_version, V.chart_app_version, sha256_file(tgz))
    monkeypatch.setattr(lint_wheel, "obtain_chart", lambda *a, **kw: ref)
    return tc


def test_go_build_info_is_the_binarys_own_record(cached: Toolchain, tmp_path: Path) -> None:
    info = lint_wheel.go_build_info(tmp_path / "any")
    assert info["go"] == "go1.26.8"
    assert (info["CGO_ENABLED"], info["GOOS"], info["GOARCH"]) == ("0", "linux", "amd64")
    assert info["-ldflags"] == '"-s -w"'


def test_static_linux_binaries_get_a_manylinux_and_musllinux_tag() -> None:
    assert lint_wheel.wheel_tag("linux", "amd64") == TAG
    assert lint_wheel.wheel_tag("linux", "arm64").endswith("musllinux_1_1_aarch64")
    with pytest.raises(ToolError, match="darwin/arm64"):
        lint_wheel.wheel_tag("darwin", "arm64")


def test_a_binary_built_with_cgo_is_refused(cached: Toolchain, tmp_path: Path) -> None:
    fake_go(tmp_path / "gobin", cgo="1")
    with pytest.raises(ToolError, match="CGO_ENABLED=1"):
        lint_wheel.stage(cached, tmp_path / "stage")


def test_the_wheel_carries_both_binaries_the_chart_and_a_manifest_that_locate_accepts(
    cached: Toolchain, tmp_path: Path
) -> None:
    wheel, manifest = lint_wheel.build_wheel(cached, tmp_path / "dist")
    assert wheel.name == f"pytest_desched_lint_bin-{__version__}-{TAG}.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for tool in lint_bin.TOOLS:
            member = zf.getinfo(f"pytest_desched_lint_bin/bin/{tool}")
            assert (member.external_attr >> 16) & 0o111, f"{tool} lost its executable bit"
        assert f"pytest_desched_lint_bin/charts/{V.chart_name}-{V.chart_version}.tgz" in names
        info = f"pytest_desched_lint_bin-{__version__}.dist-info"
        wheel_meta = zf.read(f"{info}/WHEEL").decode()
        metadata = zf.read(f"{info}/METADATA").decode()
        shipped = json.loads(zf.read("pytest_desched_lint_bin/manifest.json"))
        zf.extractall(tmp_path / "site")
    assert "Root-Is-Purelib: false" in wheel_meta
    tags = {line.split(": ", 1)[1] for line in wheel_meta.splitlines() if line.startswith("Tag:")}
    assert tags == {f"py3-none-{p}" for p in TAG.split("-")[2].split(".")}
    assert "Name: pytest-desched-lint-bin" in metadata and f"Version: {__version__}" in metadata
    assert shipped == manifest
    assert manifest["tools"]["policycheck"]["key"] == cached.groups["policycheck"].key
    assert manifest["tools"]["helm"]["from"] == "cache"
    # what the wheel holds is what locate takes (sha256 and keys recomputed from the files)
    root = tmp_path / "site" / "pytest_desched_lint_bin"
    for tool in lint_bin.TOOLS:
        (root / "bin" / tool).chmod(0o755)  # zipfile does not restore modes; pip does
        found = lint_bin.installed(root)
        assert lint_bin.pick(tool, cached.groups[tool].key, found) == (
            root / "bin" / tool,
            "lint-bin",
        )


def test_the_extra_pins_the_wheel_of_this_version() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'lint-bin = ["pytest-desched-lint-bin=={__version__}"]' in pyproject


class HelmOnly:
    """A toolchain double: a cache folder and a helm that records its calls and fails."""

    def __init__(self, root: Path) -> None:
        self.cache_dir = root / "cache"
        self.calls = root / "helm-calls"
        self.helm = script(root / "helm", f'echo "$@" >> {self.calls}; exit 1')

    def path(self, tool: str) -> Path:
        assert tool == "helm"
        return self.helm


def test_the_wheels_chart_is_taken_before_the_network_and_a_stale_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_wheel(tmp_path / "wheel")
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, _read(root)))
    tc = HelmOnly(tmp_path)
    monkeypatch.setattr(chart_source, "chart_meta", lambda tgz: {"version": V.chart_version})
    ref = chart_source.obtain_chart(tc, V, "auto", report=lambda _m: None)  # type: ignore[arg-type]
    assert (ref.path, ref.source) == (root / "charts" / "descheduler.tgz", "module")
    assert ref.origin == "pytest-desched-lint-bin 0.1.0"
    assert not tc.calls.exists()  # no helm pull, no packaging
    # asked for the repo's chart explicitly, the wheel's is not an answer
    with pytest.raises(UnsafeRender):
        chart_source.obtain_chart(tc, V, "repo", report=lambda _m: None)  # type: ignore[arg-type]
    assert tc.calls.read_text().split()[0] == "pull"
    stale = _read(root)
    stale["chart"]["version"] = "0.35.0"
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, stale))
    assert chart_source.lint_bin_chart(V) is None


def _read(root: Path) -> dict[str, Any]:
    return dict(json.loads((root / lint_bin.MANIFEST).read_text()))


def test_the_wheel_carries_the_licence_of_every_module_its_binaries_link(
    cached: Toolchain, tmp_path: Path
) -> None:
    assert lint_wheel.go_modules(tmp_path / "any") == [
        ("example.com/a", "v1.0.0"),
        ("example.com/b", "v2.0.0"),  # the replacement that was built, not example.com/old
    ]
    wheel, manifest = lint_wheel.build_wheel(cached, tmp_path / "dist")
    assert manifest["licenses"] == {"modules": 2, "files": 2, "without": ["example.com/b@v2.0.0"]}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"pytest_desched_lint_bin-{__version__}.dist-info/METADATA").decode()
    lic = f"pytest_desched_lint_bin-{__version__}.dist-info/licenses"
    assert {f"{lic}/LICENSE", f"{lic}/licenses/example.com%2Fa@v1.0.0/LICENSE",
            f"{lic}/licenses/example.com%2Fa@v1.0.0/NOTICE"} <= names  # fmt: skip
    assert zf_text_has(wheel, f"{lic}/LICENSE", "Apache License")
    assert "License-File: licenses/example.com%2Fa@v1.0.0/NOTICE" in metadata
    assert not any("example.com/old" in n or "b@v2.0.0" in n for n in names)


def zf_text_has(wheel: Path, member: str, text: str) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        return text in zf.read(member).decode()
