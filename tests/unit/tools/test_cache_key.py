"""`desched tools --cache-key`: the CI cache key changes with a pin or the platform, not with
anything else (issue 40: the recipe keyed on the user's requirements files)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.tools.cache_key import cache_key
from pytest_desched.tools.groups import build_groups
from pytest_desched.tools.versions import load_versions


def _key(versions=None, **kw: str) -> str:  # type: ignore[no-untyped-def]
    v = versions or load_versions()
    return cache_key(build_groups(v, None).values(), v, **kw)


def test_key_is_stable_and_names_the_platform() -> None:
    key = _key(system="Linux", machine="x86_64")
    assert re.fullmatch(r"desched-tools-linux-x86_64-[0-9a-f]{16}", key)
    assert key == _key(system="Linux", machine="x86_64")
    assert key != _key(system="Linux", machine="aarch64")
    assert key != _key(system="Darwin", machine="x86_64")


def test_a_pin_change_changes_the_key() -> None:
    v = load_versions()
    helm = dataclasses.replace(v.helm, version="v0.0.1")
    assert _key(dataclasses.replace(v, helm=helm)) != _key(v)
    assert _key(dataclasses.replace(v, chart_version="0.0.1")) != _key(v)


def test_the_command_prints_the_key_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no go: a build would fail
    cache = tmp_path / "cache"
    assert cli.main(["tools", "--cache-key", "--cache-dir", str(cache)]) == 0
    assert capsys.readouterr().out.strip() == _key()
    assert not cache.exists()
