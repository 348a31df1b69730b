"""Whether a round's own log proves its metrics source decided it (`Layer.METRICS`).

A utilization plugin on actual usage (`metricsUtilization`) that has no usage for a node
fails the balance extension point, so it picks no pod: the round's record would otherwise read
`no-candidates`, as if the policy had found nothing to move. The proof is the descheduler's
own line, `running balance extension point failed with error` (descheduler.go:300), whose
error says why usage was missing: a node the collector holds no value for
(`unable to find node ... in the collected metrics`, usageclients.go:212), or the Prometheus
source's own failures (prometheus_log.MARKERS: the query failed, no entry for a node, no
`instance` key, no client). A fetch error alone (`Error fetching metrics`) is no proof: a
long-lived collector keeps the previous value and the round goes on.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_desched.descheduler.prometheus_log import MARKERS
from pytest_desched.descheduler.utilization_log import BALANCE_FAILED, NO_NODE_METRICS

_WANT_OF_USAGE = (NO_NODE_METRICS, *MARKERS)


def metrics_stopped(errors: Iterable[str]) -> str | None:
    """The first of a round's error lines (logparse `RoundResult.errors`: "msg: err") that
    proves the metrics source stopped the balance extension point, else None."""
    for e in errors:
        if e.startswith(BALANCE_FAILED) and any(m in e for m in _WANT_OF_USAGE):
            return e
    return None
