"""metrics-server on the embedded cluster: asked by capability, started by kwokctl's own flags,
its port reserved like the others, its manifests from the module cache (never GitHub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched.capabilities import CAPABILITIES, KUBERNETES_METRICS, PROMETHEUS
from pytest_desched.errors import ConfigError
from pytest_desched.providers.embedded import metrics_server
from pytest_desched.providers.embedded.ports import (
    METRICS_SERVER_PORT,
    PORT_FIELDS,
    handed_out,
    ports_config,
    reserve_ports,
)


def test_only_the_embedded_provider_starts_a_metrics_source() -> None:
    for source in (KUBERNETES_METRICS, PROMETHEUS):
        assert CAPABILITIES["embedded"].metrics_refusal(source) is None
        for provider in ("kind", "existing"):
            why = CAPABILITIES[provider].metrics_refusal(source)
            assert why and provider in why and "--desched-provider embedded" in why


def test_a_provider_refuses_a_source_it_cannot_start(tmp_path: Path) -> None:
    """Asked by capability before any cluster: the provider's own refusal, not a late failure."""
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider
    from pytest_desched.providers.existing import ExistingProvider
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain(cache_dir=tmp_path, use_path=False)
    emb = EmbeddedProvider(tc, root=tmp_path)
    emb.use_metrics((KUBERNETES_METRICS,))
    emb.use_metrics((KUBERNETES_METRICS,))  # asked twice: started once
    assert emb.metrics_sources == (KUBERNETES_METRICS,)
    with pytest.raises(ConfigError, match="unknown"):
        emb.use_metrics(("Graphite",))
    assert ExistingProvider.capabilities.metrics_sources == ()
    with pytest.raises(ConfigError, match="existing provider cannot start it"):
        ExistingProvider.use_metrics(object.__new__(ExistingProvider), (KUBERNETES_METRICS,))


def test_a_session_starts_its_cluster_with_what_its_experiments_read(tmp_path: Path) -> None:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.session import DeschedSession

    s = DeschedSession(DeschedConfig(run_dir=tmp_path))
    s.need_metrics((), "positive")
    assert s.metrics_sources == ()
    s.need_metrics((KUBERNETES_METRICS,), "utilization")
    s.need_metrics((KUBERNETES_METRICS,), "utilization-missing")
    assert s.metrics_sources == (KUBERNETES_METRICS,)
    s2 = DeschedSession(DeschedConfig(run_dir=tmp_path))
    s2._cluster = object()  # type: ignore[assignment]  # up already, without the source
    with pytest.raises(ConfigError, match="was not started with"):
        s2.need_metrics((KUBERNETES_METRICS,), "utilization")


def test_kwokctl_starts_metrics_server_and_points_nodes_at_kwok(tmp_path: Path) -> None:
    binary = tmp_path / "metrics-server"
    args = metrics_server.kwokctl_args(binary)
    assert args == ["--enable", "metrics-server", "--metrics-server-binary", str(binary)]
    # no --extra-args for two components: kwokctl v0.8.0 panics on a second one's second
    assert "--extra-args" not in args
    patches = {p["name"]: p["extraArgs"] for p in metrics_server.component_patches()}
    # without a node IP on the host, metrics-server scrapes an address nothing listens on
    assert patches["kwok-controller"] == [
        {"key": "node-ip", "value": "127.0.0.1", "override": True}
    ]
    # 10s is metrics-server's floor; its kubelet timeout must stay under 9/10 of it
    assert {"key": "metric-resolution", "value": "10s", "override": True} in patches[
        "metrics-server"
    ]
    assert {"key": "kubelet-request-timeout", "value": "5s", "override": False} in patches[
        "metrics-server"
    ]
    doc = yaml.safe_load(ports_config({"etcdPort": 1}, None, metrics_server.component_patches()))
    assert doc["componentsPatches"][1]["name"] == "metrics-server"
    assert "componentsPatches" not in yaml.safe_load(ports_config({"etcdPort": 1}))


def test_ports_config_carries_the_manifests_and_the_reserved_port(tmp_path: Path) -> None:
    fields = (*PORT_FIELDS, METRICS_SERVER_PORT)
    ports = reserve_ports(tmp_path, "c1", {"pid": 1}, fields)
    assert set(ports) == set(fields) and len(set(ports.values())) == len(fields)
    opts = {"metricsServerManifests": ["/mod/manifests/base"], "kubectlBinary": "/bin/kubectl"}
    doc = yaml.safe_load(ports_config(ports, opts))
    assert doc["kind"] == "KwokctlConfiguration"
    assert doc["options"]["metricsServerManifests"] == ["/mod/manifests/base"]
    assert doc["options"][METRICS_SERVER_PORT] == ports[METRICS_SERVER_PORT]
    # a cluster's kwok.yaml naming the port keeps it handed out, like every other port
    conf = tmp_path / "clusters" / "old" / "kwok.yaml"
    conf.parent.mkdir(parents=True)
    conf.write_text(f"options:\n  {METRICS_SERVER_PORT}: 12345\n")
    assert 12345 in handed_out(tmp_path)


def test_manifests_come_from_the_module_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    base = tmp_path / "metrics-server@v0.8.0" / "manifests" / "base"
    base.mkdir(parents=True)
    (base / "kustomization.yaml").write_text("resources: []\n")
    seen: list[list[str]] = []

    class Done:
        returncode, stderr = 0, ""
        stdout = '{"Dir": "%s"}' % (tmp_path / "metrics-server@v0.8.0")

    def fake_run(cmd: list[str], **kw: object) -> Done:
        seen.append(cmd)
        return Done()

    monkeypatch.setattr(metrics_server.subprocess, "run", fake_run)

    class TC:
        from pytest_desched.tools.versions import load_versions

        versions = load_versions()

    assert metrics_server.manifests_dir(TC()) == base  # type: ignore[arg-type]
    assert seen == [["go", "mod", "download", "-json", "sigs.k8s.io/metrics-server@v0.8.0"]]
    (base / "kustomization.yaml").unlink()
    with pytest.raises(Exception, match="no manifests/base"):
        metrics_server.manifests_dir(TC())  # type: ignore[arg-type]


def test_nodes_of_a_metrics_cluster_name_their_kwok_metrics_path() -> None:
    from pytest_desched.providers.embedded.cluster import NodeSpec, node_manifest

    ann = node_manifest("w-1", "zone-a", NodeSpec(), metrics=True)["metadata"]["annotations"]
    assert ann["metrics.k8s.io/resource-metrics-path"] == "/metrics/nodes/w-1/metrics/resource"
    plain = node_manifest("w-1", "zone-a", NodeSpec())["metadata"]["annotations"]
    assert "metrics.k8s.io/resource-metrics-path" not in plain  # no change without metrics


def test_baseline_pods_wait_for_kube_systems_service_account() -> None:
    """kube-controller-manager makes kube-system/default a moment after the API answers; the
    ServiceAccount admission refuses pods until then (seen: 403 on a fresh cluster)."""
    from kubernetes.client.rest import ApiException

    def refused(status: int, body: str) -> ApiException:
        exc = ApiException(status=status, reason="x")
        exc.body = body
        return exc

    answers: list[Any] = [
        refused(
            403,
            'error looking up service account kube-system/default: serviceaccount "default" not found',
        ),
        None,
        refused(409, "already exists"),  # an earlier attempt's answer was lost
        None,
    ]
    made: list[str] = []

    class Core:
        def create_namespaced_pod(self, ns: str, body: dict) -> None:
            answer = answers.pop(0)
            if answer is not None:
                raise answer
            made.append(f"{ns}/{body['metadata']['name']}")

    metrics_server.create_baseline_pods(Core(), ["w-1", "w-2", "w-3"], "pause", timeout=10)
    assert made == ["kube-system/node-baseline-w-1", "kube-system/node-baseline-w-3"]
    assert answers == []
    pod = metrics_server.baseline_pod("w-1", "pause")
    assert pod["spec"]["nodeName"] == "w-1"
    assert pod["metadata"]["annotations"] == metrics_server.NODE_BASELINE

    class Broken:
        def create_namespaced_pod(self, ns: str, body: dict) -> None:
            raise refused(403, "forbidden: quota")  # any other refusal is not waited out

    with pytest.raises(ApiException):
        metrics_server.create_baseline_pods(Broken(), ["w-1"], "pause", timeout=5)


def test_the_frozen_metric_registers_the_default_metrics_descriptors() -> None:
    """kwok keeps one registry per node: a frozen series whose help differs from the resource
    path's refuses the other registration, and that node's resource path then serves no node
    CPU (seen in a concurrent run: two nodes out of three without node_cpu_usage_seconds_total)."""
    from pytest_desched.providers.embedded.metrics_endpoints import frozen_metric, same_descriptors

    default = {
        "spec": {
            "metrics": [
                {"name": "scrape_error", "dimension": "node", "help": "[ALPHA] 1 if error\n"},
                {"name": "node_cpu_usage_seconds_total", "dimension": "node", "help": "[A] cpu\n"},
                {"name": "node_memory_working_set_bytes", "dimension": "node"},
            ]
        }
    }
    frozen = same_descriptors(frozen_metric(), default)
    by_name = {m["name"]: m for m in default["spec"]["metrics"]}
    shared = [m for m in frozen["spec"]["metrics"] if m["name"] in by_name]
    assert {m["name"] for m in shared} == set(by_name)
    for m in shared:
        assert m.get("help") == by_name[m["name"]].get("help"), m["name"]
        assert m["dimension"] == by_name[m["name"]]["dimension"]
