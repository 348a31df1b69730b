"""metrics-server's start-up race: spared and restarted, any other death still one."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_desched.errors import ProviderError
from pytest_desched.providers.embedded import metrics_restart
from pytest_desched.providers.embedded.metrics_restart import START_RACE, restart, start_race

# A live component: its command line names the cluster's folder, as kwokctl's do
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
PANIC = (
    f'panic: {START_RACE}: Get "https://127.0.0.1:1/api/v1/...": net/http: TLS handshake timeout'
)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture
def cdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "pids").mkdir()
    (tmp_path / "logs").mkdir()
    live = subprocess.Popen([*SLEEPER, str(tmp_path)])
    (tmp_path / "pids" / "etcd.pid").write_text(str(live.pid))
    try:
        yield tmp_path
    finally:
        live.kill()
        live.wait()


def _died(cdir: Path, component: str, log: str) -> None:
    (cdir / "pids" / f"{component}.pid").write_text(str(_dead_pid()))
    (cdir / "logs" / f"{component}.log").write_text(log + "\n")


def test_only_metrics_servers_start_race_is_spared(cdir: Path) -> None:
    assert not start_race(cdir)
    _died(cdir, "metrics-server", PANIC)
    assert start_race(cdir)
    _died(cdir, "etcd", "out of memory")  # another death beside it: no longer spared
    assert not start_race(cdir)


def test_another_metrics_server_death_is_not_spared(cdir: Path) -> None:
    _died(cdir, "metrics-server", "panic: something else")
    assert not start_race(cdir)


def test_restart_starts_it_again(cdir: Path) -> None:
    _died(cdir, "metrics-server", PANIC)
    procs: list[subprocess.Popen[bytes]] = []

    def kwokctl(*args: str, timeout: float = 0) -> None:
        assert args[:2] == ("start", "cluster")
        assert not (cdir / "pids" / "metrics-server.pid").exists()  # removed first
        p = subprocess.Popen([*SLEEPER, str(cdir)])
        procs.append(p)
        (cdir / "pids" / "metrics-server.pid").write_text(str(p.pid))

    said: list[str] = []
    try:
        assert restart(cdir, "c", kwokctl, said.append) == 1
        assert not start_race(cdir) and said
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_restart_gives_up_when_it_keeps_dying(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_restart, "ATTEMPTS", 2)
    _died(cdir, "metrics-server", PANIC)
    starts: list[int] = []

    def kwokctl(*args: str, timeout: float = 0) -> None:
        starts.append(1)
        _died(cdir, "metrics-server", PANIC)

    with pytest.raises(ProviderError, match="died at start 3 times"):
        restart(cdir, "c", kwokctl, lambda _: None)
    assert len(starts) == 2
