"""A utilization round's log read back: node usage as the descheduler saw it, source errors.

The lines follow v0.36.0's JSON log (klog's JSON format: msg, node as a KObj, usage as
quantities, usagePercentage as numbers); see pytest_desched/descheduler/utilization_log.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_desched.descheduler.utilization_log import node_usage, source_errors


def _line(**rec: object) -> str:
    return json.dumps({"ts": 1.0, "caller": "x.go:1", "v": 0, **rec})


CLASSIFIED = [
    _line(
        msg="Node has been classified",
        category="overutilized",
        node={"name": "w-1"},
        usage={"cpu": "3200m", "memory": "256Mi", "pods": "4"},
        usagePercentage={"cpu": 80, "memory": 1.56, "pods": 3.64},
    ),
    _line(
        msg="Node has been classified",
        category="underutilized",
        node={"name": "w-2"},
        usage={"cpu": "2m", "memory": "2Mi", "pods": "1"},
        usagePercentage={"cpu": 0.05, "memory": 0.01, "pods": 0.9},
    ),
    _line(
        msg="Node is appropriately utilized",
        node={"name": "w-3"},
        usage={"cpu": "1"},
        usagePercentage={"cpu": 25},
    ),
]


def test_each_node_usage_as_logged() -> None:
    seen = node_usage("\n".join(["I1206 not json", *CLASSIFIED, "{broken"]))
    assert set(seen) == {"w-1", "w-2", "w-3"}
    assert seen["w-1"].category == "overutilized"
    assert seen["w-1"].usage == {"cpu": "3200m", "memory": "256Mi", "pods": "4"}
    assert seen["w-1"].percent["cpu"] == 80.0
    assert seen["w-2"].category == "underutilized"
    assert seen["w-3"].to_dict() == {
        "node": "w-3",
        "category": "appropriate",
        "usage": {"cpu": "1"},
        "usage_percent": {"cpu": 25.0},
    }


def test_source_errors_are_the_logs_own_lines() -> None:
    fetch = _line(
        msg="Error fetching metrics",
        node="w-1",
        err="the server is currently unable to handle the request (get nodes.metrics.k8s.io w-1)",
    )
    balance = _line(
        msg="running balance extension point failed with error",
        profile="lab",
        err='plugin "LowNodeUtilization" finished with error: error getting node usage: '
        'unable to find node "w-1" in the collected metrics',
    )
    other = _line(msg="running balance extension point failed with error", err="something else")
    assert source_errors("\n".join([*CLASSIFIED, fetch, other, balance])) == [fetch, balance]
    assert node_usage(fetch + "\n" + balance) == {}  # no node read: none taken as idle


DATA = Path(__file__).resolve().parents[1] / "data" / "descheduler-v0.36.0"


def test_a_real_round_on_kubernetes_metrics() -> None:
    """The e2e round's own log: the loaded node read as overutilized, the idle ones under."""
    text = (DATA / "utilization-kubernetes-metrics.log").read_text()
    seen = node_usage(text)
    assert sorted(u.category for u in seen.values()) == [
        "overutilized",
        "underutilized",
        "underutilized",
    ]
    [hot] = [u for u in seen.values() if u.category == "overutilized"]
    assert hot.percent["cpu"] > 50 and hot.usage["pods"] == "5"
    assert source_errors(text) == []


def test_a_real_round_with_metrics_server_down() -> None:
    text = (DATA / "utilization-metrics-server-down.log").read_text()
    errors = source_errors(text)
    assert sum('"Error fetching metrics"' in e for e in errors) == 3  # one per worker
    assert any("in the collected metrics" in e for e in errors[-1:])
    assert node_usage(text) == {}  # no node read at all, none as idle
