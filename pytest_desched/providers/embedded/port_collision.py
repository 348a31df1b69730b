"""A port taken after it was chosen: told apart from other deaths at create, and retried.

ports.reserve_ports chooses free ports under `<root>/create.lock`, but that lock orders
only this cache root's creations: a run with another cache root (DESCHED_CACHE_DIR, HOME),
a plain kwokctl or any other process can bind a chosen port before the component does. The
component then dies at start ("bind: address already in use": etcd's peer listener,
kwok-controller's server), and the cluster is deleted and created again with new ports,
at most CREATE_ATTEMPTS times in all, and only while it is being created (never once a
test has it). Every other death fails the creation as before.
"""

from __future__ import annotations

import re

from pytest_desched.providers.embedded.processes import DIED

CREATE_ATTEMPTS = 3  # the first creation and at most 2 more
IN_USE = "address already in use"
_BIND = re.compile(r":(\d+): bind: address already in use")


def taken_ports(error: str) -> tuple[int, ...] | None:
    """The ports a death report (processes.death_report) says another process had bound;
    () when its log lines say so without a port; None when it is no such death (another
    death, or kwokctl's own failure)."""
    if DIED not in error or IN_USE not in error:
        return None
    return tuple(dict.fromkeys(int(p) for p in _BIND.findall(error)))


def retry_after(error: str, attempt: int) -> tuple[int, ...] | None:
    """The ports to avoid when creation `attempt` (1-based) failed with `error` and is to be
    made again; None: fail with `error` (not a taken port, or the last attempt)."""
    if attempt >= CREATE_ATTEMPTS:
        return None
    return taken_ports(error)


def retry_line(name: str, ports: tuple[int, ...], attempt: int) -> str:
    """The progress line of creation `attempt` (the next one, 2-based)."""
    what = (
        f"port {ports[0]} was"
        if len(ports) == 1
        else f"ports {', '.join(map(str, ports))} were"
        if ports
        else "a port was"
    )
    return (
        f"{what} taken by another process after it was chosen; creating {name} again with "
        f"new ports ({attempt} of {CREATE_ATTEMPTS})"
    )
