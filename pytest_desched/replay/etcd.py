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
(etcd batches concurrent commits itself).
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import urllib.parse
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import ProviderError

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


class Etcd:
    """Create-only writes of API objects, as the API server would store them."""

    def __init__(self, url: str, prefix: str = "/registry", timeout: float = 30) -> None:
        self.url, self.prefix, self.timeout = url.rstrip("/"), prefix.rstrip("/"), timeout
        self._local = threading.local()  # one keep-alive connection per thread

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            u = urllib.parse.urlsplit(self.url)
            conn = self._local.conn = http.client.HTTPConnection(
                u.hostname or "127.0.0.1", u.port or 2379, timeout=self.timeout
            )
        return conn

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        for attempt in (1, 2):  # a kept-alive connection the server closed: once more, fresh
            conn = self._conn()
            try:
                conn.request("POST", path, data, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise EtcdError(f"etcd {self.url}{path}: {exc}") from None
                continue
            if resp.status != 200:
                raise EtcdError(f"etcd {self.url}{path}: HTTP {resp.status}: {raw[:300]!r}")
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
        body = {
            "compare": [
                {"key": _b64(k), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
            ],
            "success": [{"request_put": {"key": _b64(k), "value": _b64(v)}}],
        }
        out = self._post("/v3/kv/txn", body)
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
