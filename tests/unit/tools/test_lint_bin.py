"""The lint-bin wheel's binaries: taken only when their build key and sha256 match, else the
cache or a build as before; a fake wheel folder in tmp_path stands for the installed package."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import ToolError
from pytest_desched.tools import lint_bin
from pytest_desched.tools.groups import build_groups
from pytest_desched.tools.locate import select_binary
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import load_versions
from tests.unit.tools.test_toolchain import exe, script

V = load_versions()
GROUPS = build_groups(V)


def fake_wheel(root: Path, **changes: Any) -> Path:
    """A lint-bin package folder as `make wheel-lint` stages it, with `changes` to its tools."""
    tools = {}
    for tool in lint_bin.TOOLS:
        path = script(root / "bin" / tool, f"echo {tool}")
        entry = {
            "file": f"bin/{tool}",
            "version": GROUPS[tool].version,
            "key": GROUPS[tool].key,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
        tools[tool] = entry | changes.get(tool, {})
    chart = root / "charts" / "descheduler.tgz"
    chart.parent.mkdir(parents=True, exist_ok=True)
    chart.write_bytes(b"not a real chart")
    manifest = {
        "schema": lint_bin.SCHEMA,
        "version": "0.1.0",
        "tools": tools,
        "chart": {
            "file": "charts/descheduler.tgz",
            "name": V.chart_name,
            "version": V.chart_version,
            "app_version": V.chart_app_version,
            "source": "module",
            "sha256": hashlib.sha256(chart.read_bytes()).hexdigest(),
        },
    }
    (root / lint_bin.MANIFEST).write_text(json.dumps(manifest))
    return root


def test_a_binary_built_as_pinned_is_taken_from_the_wheel(tmp_path: Path) -> None:
    found = lint_bin.installed(fake_wheel(tmp_path))
    for tool in lint_bin.TOOLS:
        assert lint_bin.pick(tool, GROUPS[tool].key, found) == (
            tmp_path / "bin" / tool,
            "lint-bin",
        )


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"helm": {"key": "helm-v3.21.0"}}, "carries helm-v3.21.0, this pytest-desched pins"),
        # the policy checker's own Go source changed: its digest is part of the key
        (
            {"policycheck": {"key": f"policycheck-{V.descheduler.version}-000000000000"}},
            "000000000000, this pytest-desched pins",
        ),
        ({"helm": {"sha256": "0" * 64}}, "does not match its sha256"),
        ({"helm": {"file": "../../etc/passwd"}}, "missing or not executable"),
    ],
)
def test_a_stale_or_altered_binary_is_not_taken(
    tmp_path: Path, changes: dict[str, Any], why: str
) -> None:
    found = lint_bin.installed(fake_wheel(tmp_path, **changes))
    tool = next(iter(changes))
    path, said = lint_bin.pick(tool, GROUPS[tool].key, found)
    assert path is None
    assert why in said and "pytest-desched-lint-bin 0.1.0" in said


def test_a_non_executable_binary_or_an_unknown_manifest_is_not_taken(tmp_path: Path) -> None:
    root = fake_wheel(tmp_path)
    (root / "bin" / "helm").chmod(0o644)
    assert lint_bin.pick("helm", GROUPS["helm"].key, lint_bin.installed(root))[0] is None
    manifest = json.loads((root / lint_bin.MANIFEST).read_text())
    (root / lint_bin.MANIFEST).write_text(json.dumps(manifest | {"schema": 99}))
    assert lint_bin.installed(root) is None
    assert lint_bin.pick("helm", GROUPS["helm"].key, None) == (
        None,
        "pytest-desched-lint-bin is not installed",
    )


def test_the_wheels_chart_must_be_the_pinned_one(tmp_path: Path) -> None:
    found = lint_bin.installed(fake_wheel(tmp_path))
    pinned = (V.chart_name, V.chart_version, V.chart_app_version)
    assert lint_bin.chart(found, *pinned) == (tmp_path / "charts" / "descheduler.tgz", "module")
    path, why = lint_bin.chart(found, V.chart_name, "9.9.9", V.chart_app_version)
    assert path is None and "9.9.9" in why
    (tmp_path / "charts" / "descheduler.tgz").write_bytes(b"altered")
    assert lint_bin.chart(lint_bin.installed(tmp_path), *pinned)[0] is None


def test_select_binary_order_path_then_wheel_then_cache(tmp_path: Path) -> None:
    on_path, wheel, cached = (exe(tmp_path / d / "helm") for d in ("path", "wheel", "cache"))
    answers = {on_path: V.helm.version}
    probe = lambda tool, p: answers.get(p)  # noqa: E731
    pinned = V.helm.version
    assert select_binary("helm", pinned, None, on_path, cached, probe, wheel) == (on_path, "PATH")
    assert select_binary("helm", pinned, None, None, cached, probe, wheel) == (wheel, "lint-bin")
    assert select_binary("helm", pinned, None, None, cached, probe, None) == (cached, "cache")


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Toolchain, group: object) -> None:
        raise ToolError("a build was started")

    monkeypatch.setattr(Toolchain, "build", refuse)


def test_toolchain_takes_lint_tools_from_the_wheel_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_build: None
) -> None:
    root = fake_wheel(tmp_path / "wheel")
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, _manifest(root)))
    tc = Toolchain(cache_dir=tmp_path / "cache", use_path=False)
    assert not tc.needs_build("helm") and not tc.needs_build("policycheck")
    assert tc.ensure(["helm", "policycheck"]) == {
        "helm": root / "bin" / "helm",
        "policycheck": root / "bin" / "policycheck",
    }
    assert tc.sources == {"helm": "lint-bin", "policycheck": "lint-bin"}
    assert not (tmp_path / "cache").exists()  # nothing built, nothing cached


def test_toolchain_falls_back_to_the_cache_when_the_wheel_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_build: None
) -> None:
    root = fake_wheel(tmp_path / "wheel", helm={"key": "helm-v3.21.0"})
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, _manifest(root)))
    tc = Toolchain(cache_dir=tmp_path / "cache", use_path=False)
    cached = exe(tc.bin_dir(tc.groups["helm"]) / "helm")
    assert tc.path("helm") == cached and tc.sources["helm"] == "cache"
    assert "carries helm-v3.21.0" in tc.lint_bin_skipped["helm"]
    assert tc.where("policycheck") == (root / "bin" / "policycheck", "lint-bin")


def test_a_candidate_or_another_descheduler_never_takes_the_wheels_policy_checker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_wheel(tmp_path / "wheel")
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, _manifest(root)))
    tc = Toolchain(cache_dir=tmp_path / "cache", use_path=False, descheduler_version="v0.35.1")
    assert tc.where("policycheck") == (None, "build")
    assert tc.where("helm") == (root / "bin" / "helm", "lint-bin")  # helm's pin is unchanged


def _manifest(root: Path) -> dict[str, Any]:
    return dict(json.loads((root / lint_bin.MANIFEST).read_text()))
