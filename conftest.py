"""Repo-level conftest: the plugin itself is loaded through its pytest11 entry point.

The suite's concurrency (pytest-xdist in `make test`) is decided here: tests/concurrency.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
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


# The exclusive lock a run of consecutive `serial` tests holds from the first to the last:
# each release would let the other workers start tests, and each take would wait for all of
# them to finish again (one drain of the machine per serial test, not per serial run).
_SERIAL_HELD: list[ExitStack] = []


def _serial(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker(SERIAL) is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """Under xdist: a `serial` test runs while no other test of this run does, set-up and
    teardown included (a module's or the session's fixtures start inside a test's protocol)."""
    basetemp = getattr(item.config.option, "basetemp", None)
    if not hasattr(item.config, "workerinput") or not basetemp:
        return (yield)
    # the workers' basetemps (popen-gwN) share their parent: one folder for the run
    folder = Path(basetemp).parent / "machine-lock"
    if not _serial(item):
        with machine_lock(folder, False):
            return (yield)
    if not _SERIAL_HELD:
        stack = ExitStack()
        stack.enter_context(machine_lock(folder, True))
        _SERIAL_HELD.append(stack)
    try:
        return (yield)
    finally:
        if not _serial(nextitem):  # the last of this run of serial tests: the machine is free
            _SERIAL_HELD.pop().close()
