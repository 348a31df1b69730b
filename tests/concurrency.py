"""How the project's own suite runs concurrently: the worker count and which tests stay together.

`make test` runs pytest-xdist with `-n auto --dist loadgroup` (Makefile `TEST_WORKERS`;
`make test TEST_WORKERS=0` runs one process as before). The suite mostly waits on clusters
(6-24% of 2 cores busy, issue 54), so two workers a core is the figure, bounded by the
memory an embedded cluster needs: every worker brings up its own session cluster and, for a
test that makes its own, one or two more (kube-apiserver ~290 MB, controller-manager ~100 MB,
etcd, scheduler, kwok and the stand-in kubelet: ~0.6 GB each), so WORKER_GIB per worker.
`DESCHED_TEST_WORKERS=N` overrides the count.

Tests stay together on one worker when they share a module- or class-scoped fixture (a
module's own cluster or run, built once): split over workers, each worker would build it
again. `group_of` reads that from the fixtures a test uses, so a new module gets this without
doing anything; `make_scheduler` keeps each group on one worker.

Tests that must have the machine to themselves are marked `@pytest.mark.serial`: those whose
assertion is a wall-clock bound (signal to exit, a watchdog's delay, a cycle budget), which
other workers' clusters would stretch. They form one group (one worker, one after another)
and each holds the run's lock exclusively while every other test holds it shared
(`machine_lock`, around each test's whole protocol: set-up, call, teardown): while a
serial test runs, no other test of this run does.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

WORKERS_PER_CORE = 2  # the e2e part waits on clusters; measured in bench/RESULTS.md
WORKER_GIB = 2.0  # a worker's session cluster, a test's own cluster or two, pytest itself
MAX_WORKERS = 8
SERIAL = "serial"  # the marker, and the one group, of tests that need the machine's quiet
GROUPS_DIR = "xdist-groups"  # in the run's basetemp: each worker's {test id: group}
_SHARED_SCOPES = ("module", "class", "package")


def workers_for(cores: int, available_bytes: int) -> int:
    """Workers for a machine: WORKERS_PER_CORE a core, at most what the memory holds."""
    by_memory = int(available_bytes / (WORKER_GIB * 2**30))
    return max(1, min(cores * WORKERS_PER_CORE, by_memory, MAX_WORKERS))


def auto_workers() -> int:
    """`-n auto`: DESCHED_TEST_WORKERS, else from this machine's cores and available memory."""
    given = os.environ.get("DESCHED_TEST_WORKERS", "").strip()
    if given:
        if not given.isdigit():
            raise pytest.UsageError(f"DESCHED_TEST_WORKERS={given!r}: give a whole number >= 0")
        return int(given)
    import psutil  # a dependency of the plugin already; here only when xdist asks

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return workers_for(cores or 1, psutil.virtual_memory().available)


def shared_scope_group(item: pytest.Item) -> str | None:
    """The group of a test that uses a module/class/package-scoped fixture: its module's path."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for defs in info.name2fixturedefs.values():
        if any(d.scope in _SHARED_SCOPES for d in defs[-1:]):
            return item.nodeid.split("::", 1)[0]
    return None


def group_of(item: pytest.Item) -> str | None:
    """A test's group: `serial`, an explicit xdist_group, or its module's when it shares a
    module-scoped fixture; None: it goes wherever a worker is free."""
    if item.get_closest_marker(SERIAL) is not None:
        return SERIAL
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return shared_scope_group(item)


def write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: which of its collected tests belong to a group, for the controller.

    xdist's own loadgroup renames a grouped test `id@group` through `item._nodeid`, which
    pytest 9 no longer reads, so every test went wherever a worker was free. Each worker
    writes its groups into the run's basetemp (the parent of its own) and the controller's
    scheduler (`make_scheduler`) reads them before it hands out the first test.
    """
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not config.option.basetemp:
        return
    groups = {it.nodeid: g for it in items if (g := group_of(it)) is not None}
    folder = Path(config.option.basetemp).parent / GROUPS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{workerinput['workerid']}.tmp"
    tmp.write_text(json.dumps(groups), encoding="utf-8")
    tmp.replace(folder / f"{workerinput['workerid']}.json")


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: xdist's scope scheduling over our groups (None: xdist's own)."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # only under xdist, which brings it

    folder = config._tmp_path_factory.getbasetemp() / GROUPS_DIR  # type: ignore[attr-defined]

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """A grouped test's scope is its group (one worker runs the group's tests one after
        another), any other test is a scope of its own: what loadgroup means."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker wrote its file before it reported its tests
                self.groups = {}
                for f in sorted(folder.glob("*.json")):
                    self.groups.update(json.loads(f.read_text(encoding="utf-8")))
            group = self.groups.get(nodeid)
            return f"group:{group}" if group else nodeid

    return GroupScheduling(config, log)


XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def hide_worker_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytest run inside a test (`pytester`) is a run of its own, not this worker's: without
    the worker's variables it names its namespace, cluster and evidence folder as a user's run
    would."""
    if "pytester" in request.fixturenames:
        for name in XDIST_ENV:
            monkeypatch.delenv(name, raising=False)


@contextmanager
def machine_lock(folder: Path, exclusive: bool) -> Iterator[None]:
    """Hold the run's machine lock: shared for a test, exclusive for a `serial` one.

    Two flock files in a folder every worker of the run shares: `gate` first, so a serial
    test waiting for its turn stops new tests from starting (flock itself would let shared
    holders overtake it forever), then `machine` for as long as the test runs.
    """
    folder.mkdir(parents=True, exist_ok=True)
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with open(folder / "gate", "a+") as gate, open(folder / "machine", "a+") as machine:
        fcntl.flock(gate, mode)
        try:
            fcntl.flock(machine, mode)
        finally:
            if not exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
