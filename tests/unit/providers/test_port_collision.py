"""A port taken after it was chosen: which death at create is one, and how often it is retried.

The death reports are made by processes.death_report from a real dead process (a sleeper
whose command line names the cluster's folder, as kwokctl's components do) and the log
lines etcd and kwok-controller wrote in the cold CI run that lost a port.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.providers.embedded.port_collision import (
    CREATE_ATTEMPTS,
    retry_after,
    retry_line,
    taken_ports,
)
from pytest_desched.providers.embedded.ports import reserve_ports
from pytest_desched.providers.embedded.processes import death_report
from tests.unit.processes import start_sleeper

NAME = "desched-main-1-abcd"
ETCD = (
    '{"level":"error","ts":"2026-12-06T23:41:07.5Z","caller":"embed/etcd.go:540",'
    '"msg":"creating peer listener failed","error":"listen tcp 0.0.0.0:32747: bind: '
    'address already in use"}\n'
    '{"level":"fatal","msg":"discovery failed","error":"listen tcp 0.0.0.0:32747: bind: '
    'address already in use"}\n'
)
KWOK = 'E1206 23:41:09 Failed to run server err="listen tcp 0.0.0.0:32751: bind: address already in use"\n'
OOM = "starting\nmmap failed: cannot allocate memory\n"


def died_with(tmp_path: Path, component: str, log: str) -> str:
    """The death report of a cluster whose `component` died after writing `log`."""
    cdir = tmp_path / "clusters" / NAME
    (cdir / "pids").mkdir(parents=True)
    (cdir / "logs").mkdir()
    proc = start_sleeper(f"--data-dir={cdir}/{component}", start_new_session=True)
    (cdir / "pids" / f"{component}.pid").write_text(f"{proc.pid}\n")
    (cdir / "logs" / f"{component}.log").write_text(log)
    proc.kill()
    proc.wait()
    said = death_report(cdir, NAME)
    assert said and f"{component} (pid {proc.pid}) exited" in said, said
    return said


@pytest.mark.parametrize(
    ("component", "log", "ports"),
    [("etcd", ETCD, (32747,)), ("kwok-controller", KWOK, (32751,)), ("etcd", OOM, None)],
    ids=["etcd-peer-port", "kwok-controller", "out-of-memory"],
)
def test_only_a_death_by_a_taken_port_is_a_collision(
    tmp_path: Path, component: str, log: str, ports: tuple[int, ...] | None
) -> None:
    said = died_with(tmp_path, component, log)
    assert taken_ports(said) == ports
    assert retry_after(said, 1) == ports


def test_the_words_without_a_death_or_a_port() -> None:
    # kwokctl's own failure quoting its logs is no death report: it fails as before
    timeout = f"kwokctl could not start cluster {NAME} within 120s: ...\n--- etcd.log\n{ETCD}"
    assert taken_ports(timeout) is None
    # a death whose lines say the words but name no port: retried, no port to avoid
    bare = f"embedded cluster {NAME}: its control plane died: x exited: address already in use"
    assert taken_ports(bare) == ()
    assert retry_line(NAME, (), 2).startswith("a port was taken by another process")


def test_created_at_most_three_times(tmp_path: Path) -> None:
    said = died_with(tmp_path, "etcd", ETCD)
    assert CREATE_ATTEMPTS == 3
    assert [retry_after(said, a) for a in (1, 2, 3, 4)] == [(32747,), (32747,), None, None]
    assert retry_line(NAME, (32747,), 2) == (
        f"port 32747 was taken by another process after it was chosen; creating {NAME} "
        "again with new ports (2 of 3)"
    )


def test_a_taken_port_is_not_chosen_again(tmp_path: Path) -> None:
    first = reserve_ports(tmp_path, "a", {"pid": 1})
    (tmp_path / "owners" / "a.json").unlink()  # deleted after the failed create
    again = reserve_ports(tmp_path, "a", {"pid": 1}, avoid={first["etcdPeerPort"]})
    assert first["etcdPeerPort"] not in again.values()
