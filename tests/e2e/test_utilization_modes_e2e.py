"""The Kubernetes Metrics source's stale and absent-node failure modes (issue 50), each a
negative experiment on a cluster of this module's own with metrics-server.

`utilization-absent` fails closed on the pinned release (the descheduler's own lines name the
absent node); `utilization-stale` does not: v0.36.0 reads a node whose counters stopped as
idle and evicts, an expected failure excused only by its proven cause
(known_bugs `desched:stale-read-as-idle`), while the same lab on live metrics evicts nothing.
See docs/utilization.md.
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
def modes_session(
    desched_settings: DeschedConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeschedSession]:
    """A session whose embedded cluster serves metrics.k8s.io (its own, deleted after)."""
    config = desched_settings.with_(provider="embedded", run_dir=tmp_path_factory.mktemp("msmodes"))
    session = DeschedSession(config)
    session.need_metrics((KUBERNETES_METRICS,), "utilization-absent")
    with session:
        yield session


def _checks(res: Any) -> dict[str, bool]:
    return {c.id: c.ok for c in res.checks}


def test_utilization_absent_node_evicts_nothing(modes_session: DeschedSession) -> None:
    res = modes_session.run("utilization-absent")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in (
        "source-absent-node",
        "descheduler-says-node-missing",
        "no-node-read-as-idle",
        "uids-unchanged",
        "no-replacement",
        "no-eviction-succeeded",
        "no-eviction-request",
    ):
        assert checks.get(cid), (cid, res.message)
    assert res.evictions == 0
    assert res.records[-1]["deciding_layer"] == "metrics", res.records[-1]["verdict"]


def test_utilization_stale_node_is_read_as_idle(modes_session: DeschedSession) -> None:
    """v0.36.0 fails open on frozen counters: the xfail's cause is proven, and only the
    checks it explains failed; the live round (the intended behaviour) passed."""
    res = modes_session.run("utilization-stale")
    checks = _checks(res)
    for cid in (
        "live-busy-nodes-appropriate",
        "live-round-evicts-nothing",
        "source-stale",
        "descheduler-logged-stale-reading",
    ):
        assert checks.get(cid), (cid, res.message)
    assert res.outcome == "xfail", res.message
    assert res.classification["bug"] == "desched:stale-read-as-idle", res.classification
    failed = {c.id for c in res.checks if not c.ok}
    assert "stale-node-not-read-as-idle" in failed, res.message
    assert failed <= {
        "stale-node-not-read-as-idle",
        "uids-unchanged",
        "no-replacement",
        "no-eviction-succeeded",
        "no-eviction-request",
    }, res.message


def _logged(res: Any) -> dict[str, Any]:
    return dict(res.records[-1]["utilization"]["node_usage_logged"])


def test_deprecated_form_through_the_chart_reads_nothing(modes_session: DeschedSession) -> None:
    """chart 0.36.0 grants metrics.k8s.io only for metricsProviders: the old form's every
    fetch is forbidden, the round fails closed (lint DL029 finds it beforehand)."""
    res = modes_session.run("utilization-legacy")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in ("descheduler-says-forbidden", "no-node-read-as-idle", "uids-unchanged"):
        assert checks.get(cid), (cid, res.message)
    policy = res.records[-1]["effective_policy"]
    assert policy.get("metricsCollector") == {"enabled": True}, policy
    assert not policy.get("metricsProviders"), policy
    assert res.evictions == 0
    assert res.records[-1]["deciding_layer"] == "metrics", res.records[-1]["verdict"]


def test_deprecated_and_new_metrics_forms_read_the_same_usage(
    modes_session: DeschedSession,
) -> None:
    """The migration in behaviour: with the read granted, v0.36.0 reads the old form as the
    new one: a round on each classifies every node alike, at the same usage, one eviction."""
    new = modes_session.run("utilization")
    old = modes_session.run("utilization-legacy-rbac")
    for res in (new, old):
        assert res.outcome == "pass", res.message
        assert res.evictions == 1
    policy = old.records[-1]["effective_policy"]
    assert policy.get("metricsCollector") == {"enabled": True}, policy
    assert not policy.get("metricsProviders"), policy
    a, b = _logged(new), _logged(old)
    assert set(a) == set(b) == set(modes_session.cluster.workers), (a, b)
    assert {n: u["category"] for n, u in a.items()} == {n: u["category"] for n, u in b.items()}
    for node in a:  # the same source read: each node's CPU share within a few points
        pa, pb = a[node]["usage_percent"]["cpu"], b[node]["usage_percent"]["cpu"]
        assert abs(pa - pb) <= 5, (node, a[node], b[node])
    print(f"new form {a}\nold form {b}")
