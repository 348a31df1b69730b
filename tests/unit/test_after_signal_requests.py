"""After a signal, API requests are bounded and a server that stopped answering is latched.

Real sockets: a listener that accepts and never answers is kube-apiserver with etcd dead
(every request hangs); a closed port is kube-apiserver dead (refused).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from pytest_desched import interrupts
from pytest_desched.kube import AFTER_SIGNAL_TIMEOUT_S, ApiGone, bound_requests


@pytest.fixture
def signalled() -> Iterator[None]:
    interrupts.reset()
    interrupts._received.append((15, time.monotonic()))  # as the SIGTERM handler records it
    yield
    interrupts.reset()


def _core(port: int):
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    return client.CoreV1Api(bound_requests(client.ApiClient(cfg)))


def test_a_hanging_server_costs_one_read_deadline_then_nothing(signalled: None) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)  # accepts (the kernel does), never answers
        core = _core(srv.getsockname()[1])
        t0 = time.monotonic()
        with pytest.raises(Exception) as first:
            core.delete_namespace("lab")
        took = time.monotonic() - t0
        assert not isinstance(first.value, ApiGone)
        assert took < AFTER_SIGNAL_TIMEOUT_S[1] + 1.0, f"{took:.2f}s"  # not the 10 s default
        t1 = time.monotonic()
        with pytest.raises(ApiGone, match="stopped answering after the signal"):
            core.list_node()
        assert time.monotonic() - t1 < 0.1


def test_a_refusing_server_is_latched_at_once(signalled: None) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens
    core = _core(port)
    with pytest.raises(Exception) as first:
        core.list_node()
    assert "refused" in str(first.value)
    with pytest.raises(ApiGone, match="connection refused"):
        core.list_node()


def test_without_a_signal_nothing_is_latched() -> None:
    interrupts.reset()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    core = _core(port)
    for _ in range(2):
        with pytest.raises(Exception) as exc:
            core.list_node()
        assert not isinstance(exc.value, ApiGone)
