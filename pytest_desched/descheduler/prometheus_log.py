"""What a round's log says about its Prometheus source: the descheduler's own error lines.

v0.36.0 reads Prometheus once per balance extension point (nodeutilization/usageclients.go
NodeUsageFromPrometheusMetrics and prometheusUsageClient.sync). Each way it refuses a round
ends in the balance extension point's error line (`"running balance extension point failed
with error"`, descheduler/descheduler.go), whose err says why:

* `unable to capture prometheus metrics: ...`: the query failed (Prometheus down or
  unreachable: *missing*);
* `unable to find metric entry for <node>`: the answer had no sample whose `instance` is that
  node (*stale*: nothing within the lookback; *wrong labels*: `instance` is not a node name,
  or a node is absent);
* `the collected metrics sample is missing 'instance' key`, `... outside of <0; 1> interval`;
* `prometheus client not initialized`: no client yet (the token Secret not read, #1840).

The token Secret's reconciler logs its own failures (`key failed with : unable to get
<ns>/<name> secret`, prom_client_controller.go via utilruntime.HandleError).
"""

from __future__ import annotations

import json
from typing import Any

from pytest_desched.descheduler.utilization_log import BALANCE_FAILED

QUERY_FAILED = "unable to capture prometheus metrics"
NO_ENTRY = "unable to find metric entry for"
NO_INSTANCE = "missing 'instance' key"
NO_CLIENT = "prometheus client not initialized"
SECRET_FAILED = "secret"  # in the reconciler's "failed with : unable to get ns/name secret"
MARKERS = (QUERY_FAILED, NO_ENTRY, NO_INSTANCE, NO_CLIENT, "outside of <0; 1> interval")


def _record(line: str) -> dict[str, Any] | None:
    start = line.find("{")
    if start < 0:
        return None
    try:
        rec = json.loads(line[start:])
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def prometheus_errors(text: str) -> list[str]:
    """The log's own lines where the Prometheus source stopped the round, as written."""
    out = []
    for line in text.splitlines():
        rec = _record(line)
        if rec is None:
            continue
        msg, err = str(rec.get("msg", "")), str(rec.get("err", ""))
        if (msg == BALANCE_FAILED and any(m in err for m in MARKERS)) or (
            "failed with" in msg and SECRET_FAILED in msg
        ):
            out.append(line.strip())
    return out


def says(lines: list[str], marker: str) -> bool:
    """Whether one of `lines` carries `marker` (one of this module's constants)."""
    return any(marker in line for line in lines)
