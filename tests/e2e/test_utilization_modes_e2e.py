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
    config = desched_settings.with_(run_dir=tmp_path_factory.mktemp("msmodes"))
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
