"""Prometheus on the embedded cluster: kwok's emulated kubelet metrics, a recording rule, a token.

The descheduler's Prometheus source (v0.36.0 `metricsProviders: [{source: Prometheus,
prometheus: {url, authToken: {secretReference: {namespace, name}}}}]`) runs one instant query,
the policy's `metricsUtilization.prometheus.query`, and reads each sample's `instance` label as
a node name and its value (0..1) as the node's usage (nodeutilization/usageclients.go
NodeUsageFromPrometheusMetrics). This module gives it a real Prometheus to ask:

* **The binary:** github.com/prometheus/prometheus v0.316.0 (Prometheus 3.16.0), built like
  every pinned tool, without the service-discovery plugins (tag `remove_all_sd`; http_sd and
  file_sd stay).
* **What it scrapes:** the same emulated kubelet endpoints metrics-server reads,
  `/metrics/nodes/<node>/metrics/resource` on kwok-controller, found through kwok's own
  http_sd endpoint `/discovery/prometheus` (what kwokctl's own Prometheus config uses,
  pkg/kwokctl/components/prometheus_config.go). The endpoints come with kwokctl's metrics
  wiring (metrics_server.py), so a cluster with Prometheus runs that wiring too. Each target's
  node name goes to a `node` label (relabelled from the path); `instance` stays the scrape
  address, as kube-prometheus leaves it.
* **The recording rule** the policy's query reads: `instance:node_cpu:rate:sum`, a node's CPU
  use as a fraction of its allocatable CPU, with `instance` set to the node name (the
  upstream README's query name).
* **The token:** Prometheus' web config knows TLS and basic auth, not bearer tokens, so an
  authenticating front (prometheus_front.py) checks `Authorization: Bearer <token>` and
  forwards to Prometheus on loopback. The policy's URL is the front's. It takes the lab's
  token (a 0600 file of the cluster's folder; the lab puts it in a Secret the policy
  references) or a ServiceAccount token the API server authenticates (TokenReview: the
  descheduler's in-cluster token, when the policy names no `authToken`).

Every file and process lives in `<cluster>/prometheus/` and names it, so a deletion or the
reaper stops them with the cluster (processes.py). The pids are not in `<cluster>/pids/`: a
Prometheus stopped on purpose (the *missing* and *stale* experiments) is no component death.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import ProviderError
from pytest_desched.kube import wait_for
from pytest_desched.providers.embedded.processes import running, unreaped

PROMETHEUS = "prometheus"
FOLDER = "prometheus"
# Ports chosen with the cluster's own (ports.reserve_ports), never given to kwokctl.
PORT_FIELDS = ("desched.prometheusPort", "desched.prometheusFrontPort")
# The series the policy's query reads (the descheduler README's example query).
NODE_CPU = "instance:node_cpu:rate:sum"
SCRAPE_INTERVAL = "2s"
RATE_WINDOW = "10s"  # five scrapes: a node's CPU rate is served one window after a change
# How far back an instant query looks for a series' last sample (Prometheus' 5m by default):
# short, so the *stale* experiment's series pass it within seconds, not minutes.
LOOKBACK = "20s"
LOOKBACK_S = 20.0
# The Secret key the descheduler reads the token from (v0.36.0 prom_client_controller.go).
TOKEN_KEY = "prometheusAuthToken"
# The lab's token: a fixed fake, so a test can search every artifact, log and report of a run
# for it (tests/e2e/test_prometheus_e2e.py). It must never appear in any of them.
LAB_TOKEN = "desched-lab-fake-prom-token-6f1d2c9a4b7e0358"


def node_label_relabel() -> list[dict[str, Any]]:
    """The node's name from kwok's per-node path into `node`: without it every node's series
    would carry the same labels (one address serves them all) and overwrite each other."""
    return [
        {
            "source_labels": ["__metrics_path__"],
            "regex": "/metrics/nodes/([^/]+)/metrics/resource",
            "target_label": "node",
            "replacement": "$1",
        }
    ]


def prometheus_config(kwok_port: int, ingest: bool = True) -> dict[str, Any]:
    """prometheus.yml: kwok's per-node resource metrics through its http_sd, and the rules.

    `ingest=False` is the same Prometheus with nothing to scrape and no rule to evaluate: the
    series it holds only age (the *stale* experiment)."""
    conf: dict[str, Any] = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL}
    }
    if ingest:
        conf["rule_files"] = ["rules.yml"]
        conf["scrape_configs"] = [
            {
                "job_name": "kwok-kubelet-resource",
                "http_sd_configs": [
                    {
                        "url": f"http://127.0.0.1:{kwok_port}/discovery/prometheus",
                        "refresh_interval": "2s",
                    }
                ],
                "relabel_configs": node_label_relabel(),
            }
        ]
    return conf


def rules(cores: float) -> dict[str, Any]:
    """The recording rule: each node's CPU use over the rate window, as a fraction of its
    `cores` (every kwok worker has the same allocatable), `instance` set to the node's name."""
    expr = (
        f"label_replace(sum by (node) (rate(node_cpu_usage_seconds_total[{RATE_WINDOW}])) / "
        f'{cores:g}, "instance", "$1", "node", "(.+)")'
    )
    return {
        "groups": [{"name": "desched-node-usage", "rules": [{"record": NODE_CPU, "expr": expr}]}]
    }


@dataclass
class PrometheusSource:
    """One cluster's Prometheus and its front: start, stop, restart, ask."""

    folder: Path
    binary: str
    port: int
    front_port: int
    kwok_port: int
    cores: float
    apiserver_port: int = 0  # for the front's TokenReviews of ServiceAccount tokens

    @property
    def url(self) -> str:
        """What the policy's `prometheus.url` names: the authenticating front."""
        return f"http://127.0.0.1:{self.front_port}"

    @property
    def token_file(self) -> Path:
        return self.folder / "token"

    def token(self) -> str:
        return self.token_file.read_text().strip()

    # -- files -----------------------------------------------------------------------------
    def write_files(self, ingest: bool = True, token: str = LAB_TOKEN) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "prometheus.yml").write_text(
            yaml.safe_dump(prometheus_config(self.kwok_port, ingest), sort_keys=False)
        )
        (self.folder / "rules.yml").write_text(yaml.safe_dump(rules(self.cores), sort_keys=False))
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        state = {k: v for k, v in asdict(self).items() if k != "folder"}
        (self.folder / "state.json").write_text(json.dumps(state))

    @classmethod
    def of(cls, cluster_dir: Path) -> PrometheusSource:
        """The Prometheus of the cluster whose folder is `cluster_dir` (ProviderError: none)."""
        folder = cluster_dir / FOLDER
        try:
            state = json.loads((folder / "state.json").read_text())
        except (OSError, ValueError):
            raise ProviderError(
                f"the cluster at {cluster_dir} runs no Prometheus: start it with the source "
                "(session.need_metrics(('Prometheus',), ...) before the cluster starts)"
            ) from None
        return cls(folder=folder, **state)

    @classmethod
    def start_for(
        cls, cluster_dir: Path, binary: Path, ports: dict[str, int], cores: float
    ) -> PrometheusSource:
        """Write the configuration and start Prometheus and its front (`wait_ready` next)."""
        src = cls(
            folder=cluster_dir / FOLDER,
            binary=str(binary),
            port=ports[PORT_FIELDS[0]],
            front_port=ports[PORT_FIELDS[1]],
            kwok_port=ports["kwokControllerPort"],
            cores=cores,
            apiserver_port=ports.get("kubeApiserverPort", 0),
        )
        src.write_files()
        src.start()
        return src

    # -- processes -------------------------------------------------------------------------
    def _argv(self) -> dict[str, list[str]]:
        return {
            PROMETHEUS: [
                self.binary,
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--query.lookback-delta={LOOKBACK}",
                "--storage.tsdb.retention.time=2h",
            ],
            "prometheus-front": [
                sys.executable,
                "-m",
                "pytest_desched.providers.embedded.prometheus_front",
                f"--dir={self.folder}",
                f"--listen={self.front_port}",
                f"--upstream={self.port}",
                *(
                    [
                        f"--apiserver=https://127.0.0.1:{self.apiserver_port}",
                        f"--pki={self.folder.parent / 'pki'}",
                    ]
                    if self.apiserver_port
                    else []
                ),
            ],
        }

    def _pid_file(self, name: str) -> Path:
        return self.folder / "pids" / f"{name}.pid"

    def start(self, which: tuple[str, ...] = (PROMETHEUS, "prometheus-front")) -> None:
        """Start the processes named (default both) in sessions of their own, logging to
        `<cluster>/logs/<name>.log` (the artifacts collect them with the others)."""
        logs = self.folder.parent / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (self.folder / "pids").mkdir(parents=True, exist_ok=True)
        argv = self._argv()
        for name in which:
            with open(logs / f"{name}.log", "ab") as log:
                proc = subprocess.Popen(
                    argv[name],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.folder,
                    start_new_session=True,
                )
            self._pid_file(name).write_text(str(proc.pid))

    def stop(self, which: tuple[str, ...] = (PROMETHEUS, "prometheus-front")) -> list[int]:
        """SIGKILL the processes named (as a node losing the pod does: Prometheus writes no
        staleness markers) and wait until they are gone; returns the pids stopped."""
        pids = []
        for name in which:
            f = self._pid_file(name)
            with contextlib.suppress(OSError, ValueError):
                pid = int(f.read_text().strip())
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                pids.append(pid)
            f.unlink(missing_ok=True)

        wait_for(
            "the stopped Prometheus processes to exit",
            lambda: unreaped(pids),
            lambda x: not x,
            timeout=20,
        )
        return pids

    def restart_ingesting(self, ingest: bool, timeout: float = 60) -> list[int]:
        """Kill Prometheus (SIGKILL: no staleness markers, as a crashed or wedged ingest leaves
        none) and start it again on the same storage and token, scraping kwok and evaluating
        the rule only when `ingest`; the front keeps running. Waits until it answers through
        the front; returns the pids killed. The stale experiments' fault, and its undoing."""
        killed = self.stop((PROMETHEUS,))
        self.write_files(ingest=ingest, token=self.token())
        self.start((PROMETHEUS,))
        self.wait_ready(timeout)
        return killed

    def alive(self) -> dict[str, bool]:
        out = {}
        for name in (PROMETHEUS, "prometheus-front"):
            try:
                out[name] = running(int(self._pid_file(name).read_text().strip()))
            except (OSError, ValueError):
                out[name] = False
        return out

    # -- asking ----------------------------------------------------------------------------
    def get(self, path: str, params: dict[str, str] | None = None, timeout: float = 5) -> Any:
        """GET through the front with the token; the decoded JSON answer."""
        q = f"?{urllib.parse.urlencode(params)}" if params else ""
        req = urllib.request.Request(
            f"{self.url}{path}{q}", headers={"Authorization": f"Bearer {self.token()}"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body.startswith((b"{", b"[")) else body.decode()

    def query(self, expr: str) -> list[dict[str, Any]] | None:
        """An instant query's vector ([{metric, value}]); None when Prometheus does not answer."""
        try:
            ans = self.get("/api/v1/query", {"query": expr})
        except (OSError, ValueError, urllib.error.URLError):
            return None
        if not isinstance(ans, dict) or ans.get("status") != "success":
            return None
        return list(ans["data"]["result"])

    def node_usage(self, expr: str = NODE_CPU) -> dict[str, float] | None:
        """{instance: value} of `expr` now (the policy's view); None when nothing answers."""
        res = self.query(expr)
        if res is None:
            return None
        return {r["metric"].get("instance", ""): float(r["value"][1]) for r in res}

    def wait_ready(self, timeout: float = 60) -> float:
        """Until Prometheus answers `/-/ready` through the front, with the token; seconds."""
        t0 = time.monotonic()

        def ready() -> str | None:
            try:
                return str(self.get("/-/ready", timeout=2))
            except (OSError, urllib.error.URLError) as exc:
                return f"not yet: {exc}"

        wait_for(
            "Prometheus to answer /-/ready through its front",
            ready,
            lambda s: bool(s) and "Ready" in str(s),
            timeout=timeout,
            max_interval=0.1,
            describe=lambda s: f"{s}; running {self.alive()}",
        )
        return time.monotonic() - t0
