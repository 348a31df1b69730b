"""Repo-level conftest: the plugin itself is loaded through its pytest11 entry point.

The suite's concurrency (pytest-xdist in `make test`) is decided here: tests/concurrency.py.
"""

from __future__ import annotations

import pytest

from tests.concurrency import auto_workers, group_shared_fixtures, hide_worker_env


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return auto_workers()


@pytest.hookimpl(tryfirst=True)  # before xdist names a grouped test `id@group`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group_shared_fixtures(config, items)


@pytest.fixture(autouse=True)
def _inner_runs_are_no_workers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_worker_env(request, monkeypatch)
