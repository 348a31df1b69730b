"""Unit tests write no evidence into the checkout: the default ./desched-artifacts/<run>/
folder is claimed by every `desched` command, so point it at a temp folder (tests of the
default itself unset DESCHED_ARTIFACTS)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _unit_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("unit-artifacts")


@pytest.fixture(autouse=True)
def _no_artifacts_in_checkout(monkeypatch: pytest.MonkeyPatch, _unit_artifacts: Path) -> None:
    monkeypatch.setenv("DESCHED_ARTIFACTS", str(_unit_artifacts))
