"""A port another process takes after the provider chose it: the cluster is created again.

The lock ports.reserve_ports chooses under lives in the cache root, so a run with another
cache root (or any process) can bind a chosen port before the component does; in a cold
CI run etcd then died at start ("bind: address already in use") and the run had no cluster.
Here the test holds a port bound and listening, and the first reservation is made to hand
it out as etcd's peer port: etcd really dies on it, and the creation must delete the partial
cluster, choose new ports and come up, saying so. The held port is one the kernel gave this
test (port 0), so no other xdist worker's cluster is ever given it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pytest_desched.providers.embedded import cluster as embedded_cluster
from pytest_desched.providers.embedded.cluster import EmbeddedProvider, unique_name
from pytest_desched.providers.embedded.owners import read_record, write_record
from pytest_desched.tools.toolchain import Toolchain

pytestmark = pytest.mark.desched_selftest


def test_a_port_taken_after_it_was_chosen_is_chosen_again(
    desched_toolchain: Toolchain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("0.0.0.0", 0))
    held.listen()
    port = held.getsockname()[1]
    real = embedded_cluster.reserve_ports
    chosen: list[dict[str, int]] = []

    def first_choice_taken(root: Path, name: str, *args, **kw) -> dict[str, int]:
        ports = real(root, name, *args, **kw)
        if not chosen:  # as another run's etcd took it between the choice and the bind
            ports["etcdPeerPort"] = port
            owner = root / "owners" / f"{name}.json"
            write_record(owner, {**(read_record(owner) or {}), "ports": ports})
        chosen.append(dict(ports))
        return ports

    monkeypatch.setattr(embedded_cluster, "reserve_ports", first_choice_taken)
    said: list[str] = []
    provider = EmbeddedProvider(
        desched_toolchain,
        name=unique_name("taken"),
        workers=2,
        kubeconfig_dir=tmp_path,
        report=said.append,
    )
    try:
        cluster = provider.start()
        nodes = {n.metadata.name for n in cluster.core.list_node().items}
        assert nodes == set(cluster.workers), f"{cluster.name}: nodes {nodes}"
        ports = read_record(provider.root / "owners" / f"{cluster.name}.json") or {}
    finally:
        provider.stop()
        held.close()
    retry = (
        f"port {port} was taken by another process after it was chosen; creating "
        f"{provider.cluster_name} again with new ports (2 of 3)"
    )
    assert retry in said, said
    assert len(chosen) == 2, chosen  # created twice: once on the taken port, once not
    assert port not in chosen[1].values() and chosen[1] == provider.ports, chosen
    assert ports.get("ports") == provider.ports, ports  # the owner record: the new ports
    assert provider.teardown is not None and not provider.teardown["left"], provider.teardown
