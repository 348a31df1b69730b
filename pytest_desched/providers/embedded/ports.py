"""An embedded cluster's ports, picked here under a short lock, not by kwokctl during create.

kwokctl v0.8.0 picks each port it leaves at 0 itself (pkg/kwokctl/runtime/binary
cluster_setup.go `setupPorts`, pkg/utils/net `GetUnusedPort`): downward from 32766, the
first one no listener holds (its `GetUsedPorts` counts only components' host ports, which
the binary runtime leaves 0). Two creations at once see the same free ports, so creations
once ran one after another under `<root>/create.lock`, each with kwokctl's whole wait for
its components. Here the lock is held only while the ports are chosen and recorded in the
cluster's owner record; `kwokctl create` then runs outside it with the ports given (`-c`).

The owner records are the registry of ports handed out: a record lives as long as its
cluster (a verified deletion removes it last, processes.remove_cluster), so a port handed
out but not yet bound, or a component a fault holds down, is never handed out again. The
ports every cluster's `kwok.yaml` names count too: clusters created by an older version of
this code, or by kwokctl directly (bench/plain_runbook.sh). Those, picking their own ports,
see only bound ones: one run beside a cluster coming up here can take a port it was given
and not yet bound (kwok-controller binds last, once the API server answers).
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterable
from pathlib import Path

from pytest_desched.providers.embedded.owners import read_record, write_record
from pytest_desched.tools.locate import file_lock

# Every port kwokctl v0.8.0's binary runtime binds for the components this project runs
# (the KwokctlConfiguration option of each; none has a flag: etcdPeerPort). kubectl proxy
# (kubeApiserverInsecurePort), Prometheus, Jaeger and the dashboard are not started, so
# their ports stay 0 and kwokctl binds nothing for them; metrics-server's (METRICS_SERVER_PORT)
# is chosen here too when the cluster runs it (metrics_server.py).
PORT_FIELDS = (
    "etcdPeerPort",
    "etcdPort",
    "kubeApiserverPort",
    "kwokControllerPort",
    "kubeControllerManagerPort",
    "kubeSchedulerPort",
)
METRICS_SERVER_PORT = "metricsServerPort"
# kwokctl's range: below the kernel's ephemeral ports (32768 up), which an outgoing
# connection could take between the choice and the component's bind.
HIGHEST, LOWEST = 32766, 10001
LOCK = "create.lock"  # the same lock faults.Faults.hold_create_lock and plain runs take
CONFIG = "ports.yaml"  # in the cluster's folder: the `-c` kwokctl create reads the ports from
_KWOK_YAML_PORT = re.compile(
    rf"^\s+({'|'.join((*PORT_FIELDS, METRICS_SERVER_PORT))}):\s*(\d+)\s*$", re.M
)


def _binds(family: socket.AddressFamily, host: str, port: int) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # Go's listeners (etcd, kube-apiserver, ...) set SO_REUSEADDR: a port left in
        # TIME_WAIT by a deleted cluster is as free to them as to this probe.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_free(port: int) -> bool:
    """No listener holds `port` on loopback nor on all addresses (kwokctl's isPortUnused);
    all addresses dual-stack where IPv6 exists, as Go's `net.Listen(":port")` binds."""
    if not _binds(socket.AF_INET, "127.0.0.1", port):
        return False
    try:
        return _binds(socket.AF_INET6, "::", port)
    except OSError:  # no IPv6 on this host: the socket itself cannot be made
        return _binds(socket.AF_INET, "0.0.0.0", port)


def handed_out(root: Path) -> set[int]:
    """Ports the owner records hold and those every cluster's `kwok.yaml` names."""
    taken: set[int] = set()
    for rec in (root / "owners").glob("*.json"):
        ports = (read_record(rec) or {}).get("ports") or {}
        if isinstance(ports, dict):
            taken.update(int(p) for p in ports.values())
    for conf in (root / "clusters").glob("*/kwok.yaml"):
        with contextlib.suppress(OSError):
            taken.update(int(p) for _, p in _KWOK_YAML_PORT.findall(conf.read_text()))
    return taken


def reserve_ports(
    root: Path,
    name: str,
    record: dict,
    fields: tuple[str, ...] = PORT_FIELDS,
    avoid: Iterable[int] = (),
) -> dict[str, int]:
    """Choose cluster `name`'s ports (one per KwokctlConfiguration option in `fields`) and
    write its owner record (`record` plus them).

    Under `<root>/create.lock` for the choice only (milliseconds): no two clusters of this
    root get the same port, and none gets one a live or kept cluster was given. `avoid`:
    ports not to choose even when free now (one another process took at a failed create,
    port_collision.py, may be free again for a moment).
    """
    owners = root / "owners"
    owners.mkdir(parents=True, exist_ok=True)
    with file_lock(root / LOCK):
        taken = handed_out(root) | set(avoid)
        ports: dict[str, int] = {}
        candidates = (p for p in range(HIGHEST, LOWEST - 1, -1) if p not in taken)
        for field in fields:
            port = next((p for p in candidates if port_free(p)), None)
            if port is None:
                raise OSError(f"no free port in {LOWEST}-{HIGHEST} for {field} of {name}")
            ports[field] = port
        write_record(owners / f"{name}.json", {**record, "ports": ports})
    return ports


def ports_config(
    ports: dict[str, int],
    options: dict[str, object] | None = None,
    patches: list[dict[str, object]] | None = None,
) -> str:
    """The KwokctlConfiguration kwokctl create reads the ports from (a `-c` file), with
    other `options` of it and `componentsPatches` (metrics_server.py's), as JSON (valid YAML)."""
    import json

    lines = "".join(f"  {field}: {port}\n" for field, port in ports.items())
    lines += "".join(f"  {k}: {json.dumps(v)}\n" for k, v in (options or {}).items())
    more = f"componentsPatches: {json.dumps(patches)}\n" if patches else ""
    return (
        f"apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokctlConfiguration\noptions:\n{lines}"
        + more
    )
