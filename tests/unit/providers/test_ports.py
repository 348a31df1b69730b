"""An embedded cluster's ports: chosen under a short lock, never twice, kwokctl run unlocked.

No cluster is made: the ports are chosen for owner records in a temporary root, and
`kwokctl` is a fake script.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_desched.providers.embedded.bring_up import kwokctl_create_args
from pytest_desched.providers.embedded.cluster import EmbeddedProvider
from pytest_desched.providers.embedded.owners import read_record
from pytest_desched.providers.embedded.ports import (
    HIGHEST,
    LOWEST,
    PORT_FIELDS,
    handed_out,
    ports_config,
    reserve_ports,
)
from pytest_desched.tools.toolchain import Toolchain

RESERVER = """
import json, sys, time
from pathlib import Path
from pytest_desched.providers.embedded.ports import reserve_ports
root, name, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
while not go.exists():  # all start choosing at once
    time.sleep(0.001)
print(json.dumps(reserve_ports(root, name, {"pid": 1})), flush=True)
"""


def test_concurrent_reservations_never_hand_out_a_port_twice(tmp_path: Path) -> None:
    """Six processes choose at once; none of the chosen ports is bound meanwhile (as under
    `kwokctl create`), yet no port goes to two clusters."""
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RESERVER, str(tmp_path), f"c{i}", str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    go.touch()
    chosen = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ports = [port for got in chosen for port in got.values()]
    assert all(sorted(got) == sorted(PORT_FIELDS) for got in chosen)
    assert len(ports) == len(set(ports)) == 6 * len(PORT_FIELDS)
    assert all(LOWEST <= p <= HIGHEST for p in ports)
    for i, got in enumerate(chosen):  # each owner record holds its cluster's ports
        assert (read_record(tmp_path / "owners" / f"c{i}.json") or {})["ports"] == got


def test_ports_of_records_listeners_and_kwok_yaml_are_skipped(tmp_path: Path) -> None:
    """A record's ports stay taken while it exists; a listener's port and one an existing
    cluster's kwok.yaml names (kwokctl's own bookkeeping) are never handed out."""
    first = reserve_ports(tmp_path, "a", {"pid": 1, "keep": True})
    second = reserve_ports(tmp_path, "b", {"pid": 1})
    assert not set(first.values()) & set(second.values())
    assert handed_out(tmp_path) == {*first.values(), *second.values()}

    (tmp_path / "owners" / "a.json").unlink()  # cluster a deleted: its ports are free again
    (tmp_path / "owners" / "b.json").unlink()
    listened, named = first["etcdPeerPort"], first["etcdPort"]
    old = tmp_path / "clusters" / "older"  # made by kwokctl's own choice: no ports in a record
    old.mkdir(parents=True)
    old.joinpath("kwok.yaml").write_text(
        "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokctlConfiguration\n"
        f"options:\n  etcdPort: {named}\n  kubeApiserverBinary: /x\n"
        "---\nkind: Stage\nspec:\n  Port: {{ . }}\n"
    )
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", listened))
        listener.listen()
        third = reserve_ports(tmp_path, "c", {"pid": 1})
    assert listened not in third.values() and named not in third.values()


def test_the_config_gives_kwokctl_every_port() -> None:
    text = ports_config(dict(zip(PORT_FIELDS, range(20001, 20007), strict=True)))
    assert "kind: KwokctlConfiguration\noptions:\n" in text
    for i, field in enumerate(PORT_FIELDS):
        assert f"\n  {field}: {20001 + i}\n" in text
    tools = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "etcd")
    args = kwokctl_create_args("n", dict.fromkeys(tools, Path("/b")), 60, "a", Path("/c/p.yaml"))
    assert args[args.index("/c/p.yaml") - 1] == "-c"


@pytest.fixture
def overlapping_kwokctl(tmp_path: Path) -> Path:
    """A kwokctl whose `create` ends well only once another `create` runs at the same time,
    and fails if the cluster-creation lock is held while it runs (a shared flock: the other
    one's own check does not exclude it)."""
    fake = tmp_path / "kwokctl"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "--version" ] && { echo "kwokctl version v0.8.0"; exit 0; }\n'
        'flock -s -n "$KWOK_WORKDIR/create.lock" true || { echo "lock held" >&2; exit 3; }\n'
        'touch "$KWOK_WORKDIR/in-$4"\n'
        "i=0; while [ $i -lt 600 ]; do\n"  # up to 30 s for the other one
        '  [ "$(ls "$KWOK_WORKDIR" | grep -c "^in-")" -ge 2 ] && exit 0\n'
        "  sleep 0.05; i=$((i + 1))\n"
        "done\n"
        'echo "ran alone" >&2; exit 4\n'
    )
    fake.chmod(0o755)
    return fake


def test_two_creations_run_at_once_outside_the_lock(
    tmp_path: Path, overlapping_kwokctl: Path
) -> None:
    """The canary's two tracks create their clusters at the same time: neither kwokctl runs
    under `<root>/create.lock` (it used to, so the second waited out the first's bring-up)."""
    tc = Toolchain(
        cache_dir=tmp_path / "cache", overrides={"kwokctl": overlapping_kwokctl}, use_path=False
    )
    root = tmp_path / "root"
    root.mkdir()
    errors: list[BaseException] = []

    def create(name: str) -> None:
        provider = EmbeddedProvider(tc, root=root, name=name, wait_timeout=60)
        try:
            provider._create(["create", "cluster", "--name", name])
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(f"track-{t}",)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert {p.name for p in root.glob("in-*")} == {"in-track-a", "in-track-b"}
