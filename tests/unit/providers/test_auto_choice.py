"""`auto` never picks a provider whose tools are missing, and says what it chose (issue 40).

A hosted CI runner has Docker but no kind binary: auto picked kind there and the e2e
step failed. Now kind needs Docker *and* kind's tools; the choice is said with its reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.config import build_config
from pytest_desched.providers import base, make_provider
from pytest_desched.providers.base import kind_tools_missing, provider_choice
from pytest_desched.tools.toolchain import Toolchain


def test_docker_without_kind_tools_is_embedded_with_the_reason() -> None:
    name, why = provider_choice("auto", True, lambda: "no kind binary")
    assert name == "embedded"
    assert why == "a Docker engine answers, but no kind binary"
    assert provider_choice("auto", True, lambda: None)[0] == "kind"
    assert provider_choice("auto", False, lambda: None) == ("embedded", "no Docker engine answers")
    assert provider_choice("kind", False, lambda: "x") == ("kind", "asked for")  # explicit: as is


def test_kind_tools_missing_names_the_binary_and_needs_no_python_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pytest_kind" else real(n, *a)
    )
    monkeypatch.setenv("PATH", str(tmp_path))  # no kind, no go
    assert "no kind binary and no Go" in (kind_tools_missing(tmp_path / "kind") or "")
    (tmp_path / "kind").write_text("")
    assert kind_tools_missing(tmp_path / "kind") is None  # a cached kind is enough, no package


def test_make_provider_says_what_auto_chose(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(base, "docker_available", lambda: True)
    monkeypatch.setenv("PATH", str(tmp_path))  # Docker "answers", but no kind and no Go
    said: list[str] = []
    config = build_config({"--desched-provider": "auto"}, run_dir=tmp_path)
    provider = make_provider(config, Toolchain(cache_dir=tmp_path / "cache"), said.append)
    assert provider.name == "embedded"
    assert said == [
        "provider: auto chose embedded (a Docker engine answers, but no kind binary and no Go "
        "to build one (`desched tools kind`)); pin it with --desched-provider embedded"
    ]
