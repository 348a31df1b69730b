"""`desched --version` says where lint's helm and policy checker come from, building nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.commands import version
from pytest_desched.tools import lint_bin
from tests.unit.test_dev_lint_wheel import _read
from tests.unit.tools.test_lint_bin import fake_wheel


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty tool cache and a PATH with no helm on it."""
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    return tmp_path


def test_without_the_wheel_lint_says_it_builds_on_first_use(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lint_bin, "installed", lambda: None)
    said = version.version_info()["lint_tools"]
    assert said.startswith("helm: build, policycheck: build (built with Go on first lint")
    assert not (bare / "cache").exists()


def test_with_the_wheel_lint_names_it(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_wheel(bare / "wheel")
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, _read(root)))
    assert version.lint_tools() == (
        "helm: lint-bin, policycheck: lint-bin (pytest-desched-lint-bin 0.1.0)"
    )


def test_a_stale_wheel_is_named_with_why_it_is_not_used(
    bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_wheel(bare / "wheel", policycheck={"key": "policycheck-v0.35.0-000000000000"})
    monkeypatch.setattr(lint_bin, "installed", lambda: lint_bin.LintBin(root, _read(root)))
    said = version.lint_tools()
    assert said.startswith(
        "helm: lint-bin, policycheck: build (not used: pytest-desched-lint-bin 0.1.0 carries "
        "policycheck-v0.35.0-000000000000, this pytest-desched pins policycheck-v0.36.0-"
    )
