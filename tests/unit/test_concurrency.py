"""The suite's own concurrency (tests/concurrency.py): the worker count a machine gets, and the
tests that stay on one worker because they share a module-scoped fixture."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from tests.concurrency import auto_workers, machine_lock, workers_for

pytest_plugins = ["pytester"]
GIB = 2**30


@pytest.mark.parametrize(
    ("cores", "gib", "want"),
    [
        (2, 22, 4),  # the development VM: two workers a core
        (2, 5, 2),  # memory for two workers' clusters only
        (2, 1, 1),  # never none
        (64, 512, 8),  # capped
        (1, 24, 2),
    ],
)
def test_workers_for_a_machine(cores: int, gib: int, want: int) -> None:
    assert workers_for(cores, gib * GIB) == want


def test_the_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESCHED_TEST_WORKERS", "3")
    assert auto_workers() == 3
    monkeypatch.setenv("DESCHED_TEST_WORKERS", "many")
    with pytest.raises(pytest.UsageError, match="DESCHED_TEST_WORKERS"):
        auto_workers()


SHARED = """
import os
import pytest

@pytest.fixture(scope="module")
def built():
    return os.getpid()

@pytest.mark.parametrize("i", range(4))
def test_shared(i, built):
    assert built == os.getpid()

@pytest.mark.parametrize("i", range(4))
def test_alone(i):
    pass
"""


def test_module_fixture_tests_stay_on_one_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under loadgroup a module's tests that share its module-scoped fixture run on one
    worker (the fixture built once); the others spread. Read from xdist's own report."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))  # tests.concurrency
    pytester.makepyfile(test_mod=SHARED)
    pytester.makeconftest(
        "from tests.concurrency import make_scheduler, write_groups\n"
        "import pytest\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_xdist_make_scheduler(config, log):\n"
        "    return make_scheduler(config, log)\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    write_groups(config, items)\n"
    )
    res = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v"
    )
    assert res.ret == 0, res.stdout.str()
    out = res.stdout.str()
    shared = [ln for ln in out.splitlines() if "PASSED" in ln and "test_shared" in ln]
    assert len(shared) == 4, out
    assert len({ln.split("]", 1)[0] for ln in shared}) == 1, shared  # one worker ([gwN])
    alone = [ln for ln in out.splitlines() if "PASSED" in ln and "test_alone" in ln]
    assert len(alone) == 4, out


def _can(folder: Path, name: str, mode: int) -> bool:
    """Whether another holder could take `name`'s lock in `mode` right now (non-blocking)."""
    with open(folder / name, "a+") as f:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_a_serial_test_excludes_every_other(tmp_path: Path) -> None:
    with machine_lock(tmp_path, exclusive=True):
        assert not _can(tmp_path, "machine", fcntl.LOCK_SH)  # no test runs beside it
        assert not _can(tmp_path, "gate", fcntl.LOCK_SH)  # and none starts
    assert _can(tmp_path, "machine", fcntl.LOCK_EX) and _can(tmp_path, "gate", fcntl.LOCK_EX)


def test_tests_share_and_a_waiting_serial_one_stops_new_ones(tmp_path: Path) -> None:
    with machine_lock(tmp_path, exclusive=False):
        assert _can(tmp_path, "machine", fcntl.LOCK_SH)  # other tests run beside it
        assert not _can(tmp_path, "machine", fcntl.LOCK_EX)  # a serial one waits for it
        assert _can(tmp_path, "gate", fcntl.LOCK_EX)  # ... holding the gate meanwhile
    assert _can(tmp_path, "machine", fcntl.LOCK_EX)


TIMED = """
import time
from pathlib import Path

import pytest

LOG = Path({log!r})


def _run(name):
    start = time.monotonic()
    deadline = start + 1.5
    while time.monotonic() < deadline:  # busy on purpose: an interval others must not share
        pass
    with LOG.open("a") as f:
        f.write(f"{{name}} {{start}} {{time.monotonic()}}\\n")


@pytest.mark.serial
def test_serial():
    _run("serial")


@pytest.mark.serial
def test_serial_next():  # consecutive serial tests hold the machine from the first to the last
    _run("serial_next")


@pytest.mark.parametrize("i", range(3))
def test_other(i):
    _run(f"other{{i}}")
"""


def test_no_test_runs_beside_a_serial_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The root conftest's lock under two workers: the serial test's interval overlaps no
    other test's (the others may overlap each other)."""
    root = Path(__file__).parents[2]
    monkeypatch.setenv("PYTHONPATH", str(root))
    log = tmp_path / "intervals.txt"
    pytester.makepyfile(test_timed=TIMED.format(log=str(log)))
    pytester.makeconftest(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('root_conftest', {str(root / 'conftest.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(mod)\n"
        "pytest_runtest_protocol = mod.pytest_runtest_protocol\n"
        "pytest_xdist_make_scheduler = mod.pytest_xdist_make_scheduler\n"
        "pytest_collection_modifyitems = mod.pytest_collection_modifyitems\n"
    )
    pytester.makeini("[pytest]\nmarkers =\n    serial: x\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup")
    assert res.ret == 0, res.stdout.str()
    spans = {
        n: (float(a), float(b)) for n, a, b in (ln.split() for ln in log.read_text().splitlines())
    }
    assert len(spans) == 5, spans
    serial = [spans.pop("serial"), spans.pop("serial_next")]
    for name, (a, b) in spans.items():
        for s0, s1 in serial:
            assert b <= s0 or a >= s1, f"{name} ran {a:.2f}-{b:.2f} beside serial {s0:.2f}-{s1:.2f}"
