"""A port taken after it was chosen: which death at create is one, and how often it is retried.

The death reports are made by processes.death_report from a real dead process (a sleeper
whose command line names the cluster's folder, as kwokctl's components do) and the log
lines etcd and kwok-controller wrote in the cold CI run that lost a port.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.errors import ProviderError
from pytest_desched.providers.embedded.cluster import EmbeddedProvider
from pytest_desched.providers.embedded.port_collision import (
    CREATE_ATTEMPTS,
    retry_after,
    retry_line,
    taken_ports,
)
from pytest_desched.providers.embedded.ports import reserve_ports
from pytest_desched.providers.embedded.processes import death_report
from pytest_desched.tools.toolchain import Toolchain
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
KWOK_DEATH = f"embedded cluster {NAME}: its control plane died: kwok-controller (pid 7) exited; the last lines of its log:\n  {KWOK}"


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


class Creations:
    """Doubles for one provider's creation steps: each creation fails with the next error
    (None: comes up), each deletion is checked clean unless `left`."""

    def __init__(self, provider: EmbeddedProvider, errors: list[str | None], left: bool = False):
        self.errors, self.left = errors, left
        self.created: list[dict[str, int]] = []
        self.deleted = 0
        self.avoided: list[set[int]] = []
        self.provider = provider
        provider.ports = {"etcdPeerPort": 32747}
        provider._create_control_plane = self.create  # type: ignore[method-assign]
        provider._delete_for_retry = self.delete  # type: ignore[method-assign]
        provider._reserve_ports = self.reserve  # type: ignore[method-assign]

    def create(self, *_: object) -> None:
        self.created.append(dict(self.provider.ports))
        error = self.errors.pop(0)
        if error is not None:
            raise ProviderError(error)

    def delete(self) -> bool:
        self.deleted += 1
        return not self.left

    def reserve(self, fields: tuple[str, ...], avoid: set[int]) -> dict[str, int]:
        self.avoided.append(set(avoid))
        return {"etcdPeerPort": 30000 - len(self.avoided)}


@pytest.fixture
def provider(tmp_path: Path) -> tuple[EmbeddedProvider, list[str]]:
    said: list[str] = []
    tc = Toolchain(cache_dir=tmp_path / "cache", use_path=False)
    return EmbeddedProvider(tc, root=tmp_path / "root", name=NAME, report=said.append), said


def test_the_provider_creates_at_most_three_times(
    tmp_path: Path, provider: tuple[EmbeddedProvider, list[str]]
) -> None:
    p, said = provider
    etcd, kwok = died_with(tmp_path, "etcd", ETCD), KWOK_DEATH
    steps = Creations(p, [etcd, kwok, etcd, None])
    with pytest.raises(ProviderError) as err:
        p._create_retrying({}, {}, False, ("etcdPeerPort",))
    assert str(err.value) == etcd  # the third collision: the message it always had
    assert len(steps.created) == 3 and steps.deleted == 2, steps.created
    assert steps.avoided == [{32747}, {32747, 32751}]
    assert said == [retry_line(NAME, (32747,), 2), retry_line(NAME, (32751,), 3)]


def test_another_death_or_a_deletion_that_left_something_is_not_retried(
    tmp_path: Path, provider: tuple[EmbeddedProvider, list[str]]
) -> None:
    p, said = provider
    oom = died_with(tmp_path, "etcd", OOM)
    steps = Creations(p, [oom, None])
    with pytest.raises(ProviderError, match="cannot allocate memory"):
        p._create_retrying({}, {}, False, ("etcdPeerPort",))
    assert (len(steps.created), steps.deleted, said) == (1, 0, [])
    steps = Creations(p, [KWOK_DEATH, None], left=True)
    with pytest.raises(ProviderError, match="32751"):
        p._create_retrying({}, {}, False, ("etcdPeerPort",))
    assert (len(steps.created), steps.deleted, said) == (1, 1, [])


def test_a_collision_then_a_cluster(provider: tuple[EmbeddedProvider, list[str]]) -> None:
    p, said = provider
    steps = Creations(p, [KWOK_DEATH, None])
    assert p._create_retrying({}, {}, False, ("etcdPeerPort",)) is None
    assert steps.created == [{"etcdPeerPort": 32747}, {"etcdPeerPort": 29999}]
    assert p.ports == {"etcdPeerPort": 29999} and said == [retry_line(NAME, (32751,), 2)]
