"""Bulk writes into the embedded cluster's own etcd: the fast, age-preserving restore path.

Why bypass the API server for pods and their owners: the API server stamps
`creationTimestamp` itself (PodLifeTime reads it, so the API cannot restore an age), and at
~300 pod creates per second on two cores it cannot restore 10,000 pods in a minute. etcd
accepts 128 puts per transaction; the API server reads JSON from storage (its storage
decoder recognises JSON beside protobuf) and applies the defaults on read, its watch cache
sees the writes like any other, so controllers, the scheduler, kwok and the descheduler all
get ordinary watch events. Only ever used on a throwaway embedded cluster this package
created: the endpoint comes from that cluster's own kwokctl configuration (plain HTTP on
localhost, no credentials). Each transaction only creates (compare createRevision == 0):
an object that already exists is an error, never overwritten.

One object per transaction, never more: objects written in one transaction share one
revision, and a watch resumed "from resourceVersion R" (client-go does that whenever the API
server drops a slow watcher) skips every other event at R. Seen: a controller's cache lost
whole 128-pod batches at 3,000 pods. Throughput comes from concurrent requests instead
(etcd batches concurrent commits itself), over a minimal HTTP/1.1 client (`_Conn`): the write
phase is CPU-bound on two cores shared with etcd and the API server, and http.client cost more
of our CPU than the JSON encoding of the objects.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import ProviderError

# A create-only transaction (compare: the key does not exist yet), formatted, not dumped.
TXN = (
    '{"compare":[{"key":"%s","target":"CREATE","result":"EQUAL","create_revision":"0"}],'
    '"success":[{"request_put":{"key":"%s","value":"%s"}}]}'
)
MAX_TXN_BYTES = 1 << 20  # below etcd's default --max-request-bytes (1.5 MiB)
# The API server's storage keys for the resources restored this way (its default prefixes:
# apps resources are stored without their group).
RESOURCE_KEY = {
    "Pod": "pods",
    "ReplicaSet": "replicasets",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "Node": "minions",  # the API server's historical storage name for nodes
    "PersistentVolume": "persistentvolumes",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "PodDisruptionBudget": "poddisruptionbudgets",
}


class EtcdError(ProviderError):
    """etcd refused a write (or is unreachable); says which object and why."""


def _b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def endpoint_of(cluster_dir: Path) -> tuple[str, str]:
    """(http://127.0.0.1:PORT, key prefix) from the cluster's kwokctl configuration."""
    cfg = cluster_dir / "kwok.yaml"
    try:
        docs = [d for d in yaml.safe_load_all(cfg.read_text()) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError) as exc:
        raise EtcdError(f"no readable kwokctl configuration at {cfg}: {exc}") from None
    conf = next((d for d in docs if d.get("kind") == "KwokctlConfiguration"), {})
    opts = conf.get("options") or {}
    port = opts.get("etcdPort")
    if not port:
        raise EtcdError(f"{cfg} names no etcdPort")
    return f"http://127.0.0.1:{int(port)}", str(opts.get("etcdPrefix") or "/registry")


class _Conn:
    """One keep-alive HTTP/1.1 connection to etcd's JSON gateway, reading only the status and
    Content-Length of an answer: http.client cost 0.26 ms of our CPU per transaction (2.6 CPU
    s for 10,000 pods, on a write phase bound by two shared cores), this 0.11 ms."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def post(self, path: str, data: bytes) -> tuple[int, bytes]:
        self.sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data)
        )
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._fill()
        lines = self.buf[:end].split(b"\r\n")
        status, length = int(lines[0].split()[1]), None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" or (
                name == b"connection" and value.strip().lower() == b"close"
            ):
                raise ValueError(f"etcd answered with {line!r}: not read here")
        if length is None:
            raise ValueError("etcd's answer has no Content-Length")
        while len(self.buf) < end + 4 + length:
            self._fill()
        body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
        return status, body

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("etcd closed the connection")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()


class Etcd:
    """Create-only writes of API objects, as the API server would store them."""

    def __init__(self, url: str, prefix: str = "/registry", timeout: float = 30) -> None:
        self.url, self.prefix, self.timeout = url.rstrip("/"), prefix.rstrip("/"), timeout
        self._local = threading.local()  # one keep-alive connection per thread

    def _conn(self) -> _Conn:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            u = urllib.parse.urlsplit(self.url)
            conn = self._local.conn = _Conn(
                u.hostname or "127.0.0.1", u.port or 2379, timeout=self.timeout
            )
        return conn

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post_raw(path, json.dumps(body).encode())

    def _post_raw(self, path: str, data: bytes) -> dict[str, Any]:
        for attempt in (1, 2):  # a kept-alive connection the server closed: once more, fresh
            try:
                conn = self._conn()
                status, raw = conn.post(path, data)
            except (OSError, ValueError) as exc:
                stale = getattr(self._local, "conn", None)
                if stale is not None:
                    stale.close()
                self._local.conn = None
                if attempt == 2:
                    raise EtcdError(f"etcd {self.url}{path}: {exc}") from None
                continue
            if status != 200:
                raise EtcdError(f"etcd {self.url}{path}: HTTP {status}: {raw[:300]!r}")
            return json.loads(raw or b"{}")
        raise AssertionError("unreachable")

    def key(self, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        where = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        return f"{self.prefix}/{RESOURCE_KEY[obj['kind']]}/{where}"

    def ping(self) -> None:
        """One read: the endpoint answers and holds this cluster's data."""
        out = self._post(
            "/v3/kv/range", {"key": _b64(f"{self.prefix}/namespaces/default"), "count_only": True}
        )
        if int(out.get("count", 0)) != 1:
            raise EtcdError(f"etcd {self.url} holds no {self.prefix}/namespaces/default")

    def _txn(self, item: tuple[str, bytes]) -> None:
        k, v = item
        if len(v) > MAX_TXN_BYTES:
            raise EtcdError(f"{k}: {len(v)} bytes, more than etcd takes in one request")
        kb = _b64(k)  # base64: nothing in it to escape in JSON
        data = TXN % (kb, kb, _b64(v))
        out = self._post_raw("/v3/kv/txn", data.encode())
        if not out.get("succeeded"):
            raise EtcdError(
                f"refusing to overwrite {k}: it exists already; the replay cluster must be fresh"
            )

    def exists(self, key: str) -> bool:
        out = self._post("/v3/kv/range", {"key": _b64(key), "count_only": True})
        return int(out.get("count", 0)) > 0

    def create_chains(self, chains: list[list[dict[str, Any]]], workers: int = 16) -> int:
        """Write each chain's objects in order (each committed before the next starts: an
        owner before its dependents), the chains concurrently, longest first; returns the
        count."""
        encoded = [
            [(self.key(o), json.dumps(o, separators=(",", ":")).encode()) for o in chain]
            for chain in sorted(chains, key=len, reverse=True)
        ]

        def run(chain: list[tuple[str, bytes]]) -> None:
            for item in chain:
                self._txn(item)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(run, encoded))
        return sum(map(len, encoded))

    def create(self, objects: Iterable[dict[str, Any]], workers: int = 16) -> int:
        """Write every object, each in its own create-only transaction; returns the count."""
        items = [(self.key(o), json.dumps(o, separators=(",", ":")).encode()) for o in objects]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(self._txn, items))
        return len(items)
