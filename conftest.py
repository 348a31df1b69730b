"""Repo-level conftest: the plugin itself is loaded through its pytest11 entry point.

The suite's concurrency (pytest-xdist in `make test`) is decided here: tests/concurrency.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.concurrency import (
    SERIAL,
    auto_workers,
    hide_worker_env,
    machine_lock,
    make_scheduler,
    write_groups,
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return auto_workers()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return make_scheduler(config, log)


@pytest.hookimpl(trylast=True)  # after every other plugin changed the selection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    write_groups(config, items)


@pytest.fixture(autouse=True)
def _inner_runs_are_no_workers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_worker_env(request, monkeypatch)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """Under xdist: a `serial` test runs while no other test of this run does, set-up and
    teardown included (a module's or the session's fixtures start inside a test's protocol)."""
    basetemp = getattr(item.config.option, "basetemp", None)
    if not hasattr(item.config, "workerinput") or not basetemp:
        return (yield)
    # the workers' basetemps (popen-gwN) share their parent: one folder for the run
    folder = Path(basetemp).parent / "machine-lock"
    with machine_lock(folder, item.get_closest_marker(SERIAL) is not None):
        return (yield)
