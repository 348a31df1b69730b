"""The missing metrics source under a long-lived descheduler (issue 50), on a cluster of this
module's own with metrics-server, the pinned release (v0.36.0).

`utilization-long-lived-missing`: the round Job from the suspended CronJob, kept running with
`--descheduling-interval`, reads live usage in cycle 1 and evicts one hot pod; metrics-server
is stopped and the next cycle still classifies every node on the collector's kept values
(known_bugs `desched:long-lived-keeps-pre-outage-usage`, the only check it excuses) while
evicting nothing (each pod's usage is fetched live and fails); a plain Job round under the
same outage fails closed. `utilization-long-lived-absent`: one node's metrics fail instead,
and the next cycle reads it on its kept value and evicts (the same cause). See
docs/utilization.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.config import DeschedConfig
from pytest_desched.session import DeschedSession

pytestmark = pytest.mark.desched_selftest

NAME = "utilization-long-lived-missing"


@pytest.fixture(scope="module")
def long_lived_session(
    desched_settings: DeschedConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeschedSession]:
    """A session whose embedded cluster serves metrics.k8s.io (its own, deleted after)."""
    config = desched_settings.with_(
        provider="embedded", run_dir=tmp_path_factory.mktemp("longlived")
    )
    session = DeschedSession(config)
    session.need_metrics((KUBERNETES_METRICS,), NAME)
    with session:
        yield session


def _checks(res: Any) -> dict[str, bool]:
    return {c.id: c.ok for c in res.checks}


def test_long_lived_descheduler_reads_nodes_on_kept_usage_and_evicts_nothing(
    long_lived_session: DeschedSession,
) -> None:
    res = long_lived_session.run(NAME)
    checks = _checks(res)
    for cid in (  # never excused: cycle 1 on live metrics, the outage, the stop, the Job mode
        "ll-first-cycle-reads-usage",
        "ll-first-cycle-evicts-one",
        "ll-source-missing",
        "ll-collector-fetch-failed",
        "ll-outage-cycle-evicts-nothing",
        "ll-outage-cycle-no-eviction-request",
        "ll-process-stopped-log-kept",
        "job-says-source-failed",
        "job-no-node-read-as-idle",
        "uids-unchanged",
        "no-replacement",
        "no-eviction-succeeded",
        "no-eviction-request",
    ):
        assert checks.get(cid), (cid, res.message)
    assert res.outcome == "xfail", res.message
    assert res.classification["bug"] == "desched:long-lived-keeps-pre-outage-usage"
    failed = {c.id for c in res.checks if not c.ok}
    assert failed == {"ll-outage-cycle-classifies-nothing"}, res.message
    # the process's log and cycles are filed with the Job round's record
    rnd = res.rounds[-1]
    assert rnd.result.dry_run is False  # the evictions are the point: as the CronJob has it
    assert any(f"{NAME} (--descheduling-interval=" in n for n in res.notes), res.notes


def test_long_lived_descheduler_reads_an_absent_node_as_idle_and_evicts(
    long_lived_session: DeschedSession,
) -> None:
    """One node's metrics endpoint fails after cycle 1 (the node cycle 1's replacement landed
    on, 21% declared): v0.36.0 classifies it on its kept 1% and evicts, where the Job round
    under the same fault refuses the cycle. Excused only by its proven cause."""
    res = long_lived_session.run("utilization-long-lived-absent")
    checks = _checks(res)
    for cid in (
        "ll-first-cycle-reads-usage",
        "ll-first-cycle-evicts-one",
        "ll-source-absent-node",
        "ll-absent-node-not-idle",
        "ll-collector-fetch-failed",
        "ll-process-stopped-log-kept",
        "job-says-node-missing",
        "job-no-node-read-as-idle",
        "uids-unchanged",
        "no-replacement",
        "no-eviction-succeeded",
        "no-eviction-request",
    ):
        assert checks.get(cid), (cid, res.message)
    assert res.outcome == "xfail", res.message
    assert res.classification["bug"] == "desched:long-lived-keeps-pre-outage-usage"
    failed = {c.id for c in res.checks if not c.ok}
    assert failed == {
        "ll-outage-cycle-classifies-nothing",
        "ll-outage-cycle-evicts-nothing",
        "ll-outage-cycle-no-eviction-request",
    }, res.message
