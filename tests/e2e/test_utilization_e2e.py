"""Actual utilization from a real Kubernetes Metrics source on the embedded cluster (issue 50).

One cluster for the module, started with metrics-server (kwokctl `--enable metrics-server`,
the pinned v0.8.0 binary) scraping kwok's emulated kubelets; the lab declares each pod's usage.
The positive experiment moves a pod off the over-used node within the caps; the negative one
stops metrics-server before its round and proves nothing is evicted, by the descheduler's own
error lines. See docs/utilization.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.config import DeschedConfig
from pytest_desched.session import DeschedSession

pytestmark = pytest.mark.desched_selftest


@pytest.fixture(scope="module")
def metrics_session(
    desched_settings: DeschedConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeschedSession]:
    """A session whose embedded cluster serves metrics.k8s.io (its own, deleted after)."""
    config = desched_settings.with_(provider="embedded", run_dir=tmp_path_factory.mktemp("metrics"))
    session = DeschedSession(config)
    session.need_metrics((KUBERNETES_METRICS,), "utilization")  # before the cluster starts
    with session:
        yield session


def _checks(res: Any) -> dict[str, bool]:
    return {c.id: c.ok for c in res.checks}


def test_metrics_server_serves_kwok_usage(metrics_session: DeschedSession) -> None:
    """The cluster came up with the source, and metrics.k8s.io answers for every worker."""
    from pytest_desched.lab import Lab

    cluster = metrics_session.cluster
    assert cluster.metrics_sources == (KUBERNETES_METRICS,)
    lab = Lab(cluster, "desched-metrics-probe")
    served = lab.wait_node_usage({n: (lambda m: m >= 0) for n in cluster.workers}, timeout=90)
    assert all(served[n] is not None for n in cluster.workers), served
    bring_up = metrics_session.timings["bring_up"]
    print(f"bring-up with metrics-server: {bring_up:.1f}s; served {served}")


def test_declared_usage_changes_between_rounds(metrics_session: DeschedSession) -> None:
    """Lab.set_usage on a live pod: the source the round reads follows it (issue 50's lab API)."""
    from pytest_desched.lab import Deployment, Lab

    cluster = metrics_session.cluster
    node = cluster.workers[1]
    lab = Lab(cluster, "desched-usage-change")
    try:
        snap = lab.apply(Deployment("shift", usage={"cpu": "100m"}), only_on=node)
        [pod] = snap.live
        before = lab.wait_node_usage({node: lambda m: 120 <= m < 400}, timeout=90)[node]
        lab.set_usage({"cpu": "1500m"}, pods=[pod.name])
        after = lab.wait_node_usage({node: lambda m: m >= 1400}, timeout=90)[node]
        assert before is not None and after is not None
        assert after["cpu"] - before["cpu"] >= 1200, (before, after)
        assert lab.snapshot().uids == snap.uids  # the same pod: usage changed, nothing restarted
    finally:
        lab.teardown()


def test_utilization_moves_a_pod_off_the_overused_node(metrics_session: DeschedSession) -> None:
    res = metrics_session.run("utilization")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in ("usage-logged-overutilized", "usage-logged-underutilized", "one-node-overused"):
        assert checks.get(cid), (cid, res.message)
    assert res.evictions == 1  # usage alone would move two: maxNoOfPodsToEvictPerNode holds one
    assert (
        res.records
        and res.records[-1]["experiment"] == "utilization-kubernetes-metrics[own-policy]"
    )


def test_utilization_missing_source_evicts_nothing(metrics_session: DeschedSession) -> None:
    res = metrics_session.run("utilization-missing")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in (
        "source-missing",
        "descheduler-says-source-failed",
        "no-node-read-as-idle",
        "uids-unchanged",
        "no-eviction-succeeded",
    ):
        assert checks.get(cid), (cid, res.message)
    assert res.evictions == 0
    # the metrics source decided the round, proven by the descheduler's own line
    assert res.blocking_layer == "metrics", res.records[-1]["deciding_layer"]
    assert res.records[-1]["verdict"] == "stopped-by:metrics"
