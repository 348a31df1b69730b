"""The embedded cluster's Prometheus: its configuration, its token front, the round log's lines
and the pod's ServiceAccount volume (pure logic and loopback servers; the e2e runs the rest)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import stat
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from pytest_desched.descheduler.prometheus_log import (
    NO_ENTRY,
    QUERY_FAILED,
    prometheus_errors,
    says,
)
from pytest_desched.providers.embedded import prometheus_front
from pytest_desched.providers.embedded.pod_run import SA_MOUNT, in_pod_mounts, write_sa_volume
from pytest_desched.providers.embedded.prometheus import (
    LAB_TOKEN,
    NODE_CPU,
    PORT_FIELDS,
    PROMETHEUS,
    PrometheusSource,
    prometheus_config,
    rules,
)

FRONT = "prometheus-front"


def test_prometheus_scrapes_kwok_through_its_http_sd_and_names_the_node() -> None:
    conf = prometheus_config(32001)
    [job] = conf["scrape_configs"]
    assert job["http_sd_configs"][0]["url"] == "http://127.0.0.1:32001/discovery/prometheus"
    [relabel] = job["relabel_configs"]
    assert relabel["target_label"] == "node" and "{" not in relabel["regex"]
    assert conf["rule_files"] == ["rules.yml"]
    idle = prometheus_config(32001, ingest=False)  # the stale experiment: nothing new comes in
    assert "scrape_configs" not in idle and "rule_files" not in idle


def test_the_rule_records_each_nodes_cpu_fraction_under_instance() -> None:
    [group] = rules(4)["groups"]
    [rule] = group["rules"]
    assert rule["record"] == NODE_CPU
    assert "/ 4" in rule["expr"] and '"instance", "$1", "node"' in rule["expr"]


def test_the_state_round_trips_and_the_token_file_is_private(tmp_path: Path) -> None:
    ports = {PORT_FIELDS[0]: 31001, PORT_FIELDS[1]: 31002, "kwokControllerPort": 31003}
    src = PrometheusSource(tmp_path / "prometheus", "/bin/prometheus", 31001, 31002, 31003, 4.0)
    src.write_files()
    assert stat.S_IMODE(src.token_file.stat().st_mode) == 0o600
    assert src.token() == LAB_TOKEN
    again = PrometheusSource.of(tmp_path)
    assert again == src and again.url == "http://127.0.0.1:31002"
    assert LAB_TOKEN not in (src.folder / "state.json").read_text()
    assert LAB_TOKEN not in (src.folder / "prometheus.yml").read_text()
    assert {ports[PORT_FIELDS[1]]} == {again.front_port}


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class Upstream(BaseHTTPRequestHandler):
    """Prometheus' place: answers the query and says which auth header reached it."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "success", "auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def get(port: int, auth: str | None) -> tuple[int, bytes]:
    headers = {"Authorization": auth} if auth else {}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/query?query=up", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_front_forwards_only_the_token_and_never_logs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = io.StringIO()
    monkeypatch.setattr(prometheus_front.sys, "stderr", err)
    with serving(Upstream) as up:
        handler = prometheus_front.handler_for(b"s3cret-lab-token", up)
        with serving(handler) as front:
            assert get(front, None)[0] == 401
            assert get(front, "Bearer wrong")[0] == 401
            assert get(front, "Basic czNjcmV0LWxhYi10b2tlbg==")[0] == 401
            code, body = get(front, "Bearer s3cret-lab-token")
    assert code == 200
    assert json.loads(body) == {"status": "success", "auth": None}  # not passed on upstream
    assert "s3cret" not in err.getvalue() and "/api/v1/query" in err.getvalue()


def test_a_front_with_a_reviewer_takes_a_service_account_token() -> None:
    class Reviewer:
        def service_account(self, token: bytes) -> bool:
            return token == b"sa-token"

    with serving(Upstream) as up:
        handler = prometheus_front.handler_for(b"lab", up, Reviewer())  # type: ignore[arg-type]
        with serving(handler) as front:
            assert get(front, "Bearer sa-token")[0] == 200
            assert get(front, "Bearer other")[0] == 401
            assert get(front, "sa-token")[0] == 401  # the scheme is required


def test_the_front_says_502_when_prometheus_is_down() -> None:
    with serving(Upstream) as up:
        pass  # closed: nothing listens there any more
    with serving(prometheus_front.handler_for(b"t", up)) as front:
        code, body = get(front, "Bearer t")
    assert code == 502 and b"upstream" in body


class Ready(BaseHTTPRequestHandler):
    """The front's place in the restart test: says Prometheus is ready to a bearer token."""

    def do_GET(self) -> None:
        ok = self.path == "/-/ready" and self.headers.get("Authorization", "").startswith("Bearer")
        body = b"Prometheus Server is Ready.\n" if ok else b"no"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_restart_ingesting_kills_prometheus_and_starts_it_on_the_new_configuration(
    tmp_path: Path,
) -> None:
    """The stale experiments' fault and its undoing: a new Prometheus process each time, the
    scrape and the rule off then on again, the token kept, the front left alone."""
    fake = tmp_path / "prometheus-bin"
    fake.write_text("#!/bin/sh\nexec sleep 300\n")
    fake.chmod(0o755)
    with serving(Ready) as front:
        src = PrometheusSource(tmp_path / "c" / "prometheus", str(fake), 1, front, 31003, 4.0)
        src.write_files(token="kept-token")
        src.start((PROMETHEUS,))
        try:
            [first] = src.restart_ingesting(False, timeout=10)
            assert src.alive() == {PROMETHEUS: True, FRONT: False}
            idle = yaml.safe_load((src.folder / "prometheus.yml").read_text())
            assert "scrape_configs" not in idle and "rule_files" not in idle
            assert src.token() == "kept-token"
            [second] = src.restart_ingesting(True, timeout=10)
            conf = yaml.safe_load((src.folder / "prometheus.yml").read_text())
            assert conf["scrape_configs"] and conf["rule_files"] == ["rules.yml"]
            assert src.token() == "kept-token"
        finally:
            [last] = src.stop((PROMETHEUS,))
    assert len({first, second, last}) == 3  # a new process each time
    assert src.alive()[PROMETHEUS] is False


LOG = "\n".join(
    json.dumps(rec)
    for rec in (
        {"ts": 1.0, "msg": "Resetting pod evictor counters"},
        {
            "ts": 2.0,
            "msg": "running balance extension point failed with error",
            "err": 'plugin "LowNodeUtilization" finished with error: error getting node usage: '
            "unable to find metric entry for w-1",
        },
        {
            "ts": 3.0,
            "msg": "running balance extension point failed with error",
            "err": "unable to capture prometheus metrics: connection refused",
        },
        {"ts": 4.0, "msg": "running balance extension point failed with error", "err": "other"},
    )
)


def test_the_rounds_own_prometheus_lines_are_picked() -> None:
    lines = prometheus_errors(LOG)
    assert len(lines) == 2
    assert says(lines, NO_ENTRY) and says(lines, QUERY_FAILED)
    assert prometheus_errors('{"msg":"Node has been classified"}') == []


def test_the_pods_service_account_volume_and_in_cluster_env(tmp_path: Path) -> None:
    kc = {
        "clusters": [
            {
                "cluster": {
                    "server": "https://127.0.0.1:32764",
                    "certificate-authority-data": base64.b64encode(b"CA PEM").decode(),
                }
            }
        ],
        "users": [{"user": {"token": "pod-token"}}],
    }
    (tmp_path / "kc.yaml").write_text(yaml.safe_dump(kc))
    env = write_sa_volume(tmp_path / "kc.yaml", "kube-system", tmp_path / "sa")
    assert env == {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "32764"}
    assert (tmp_path / "sa" / "ca.crt").read_bytes() == b"CA PEM"
    assert (tmp_path / "sa" / "namespace").read_text() == "kube-system"
    assert stat.S_IMODE((tmp_path / "sa" / "token").stat().st_mode) == 0o600
    argv = in_pod_mounts(["/bin/descheduler", "--v=4"], tmp_path / "sa")
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert argv[-2:] == ["/bin/descheduler", "--v=4"] and SA_MOUNT.split("/")[-1] in argv[6]
