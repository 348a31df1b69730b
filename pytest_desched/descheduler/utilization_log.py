"""What a utilization round's log says: each node's usage as the descheduler saw it, and why
a metrics source failed.

Read from the descheduler's own JSON log (`--logging-format=json`), v0.36.0:

* `"Node has been classified"` (category underutilized or overutilized) and `"Node is
  appropriately utilized"`, with `node` (a KObj), `usage` (the absolute figures it read: CPU
  and memory quantities, pods) and `usagePercentage` (of allocatable), logged at V0 by
  framework/plugins/nodeutilization/lownodeutilization.go:231 and :257 (the calls; the log names the first);
* the metrics source's errors: `"Error fetching metrics"` per node from
  descheduler/metricscollector/metricscollector.go:131 (the source answered nothing; the
  collector keeps no value for the node), and the balance extension point's
  `"running balance extension point failed with error"` (descheduler/descheduler.go:300),
  whose err names the plugin and, for a node the collector has no value for, "unable to find
  node ... in the collected metrics" (nodeutilization/usageclients.go:212).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CLASSIFIED = "Node has been classified"
APPROPRIATE = "Node is appropriately utilized"
FETCH_ERROR = "Error fetching metrics"
BALANCE_FAILED = "running balance extension point failed with error"
NO_NODE_METRICS = "in the collected metrics"


@dataclass(frozen=True)
class NodeUsage:
    """One node as the descheduler classified it in a round."""

    node: str
    category: str  # underutilized | overutilized | appropriate
    usage: dict[str, str] = field(default_factory=dict)  # "cpu": "3200m", "pods": "4"
    percent: dict[str, float] = field(default_factory=dict)  # "cpu": 80.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "category": self.category,
            "usage": self.usage,
            "usage_percent": self.percent,
        }


def _records(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            rec = json.loads(line[start:])
        except ValueError:
            continue
        if isinstance(rec, dict):
            yield rec


def _node_name(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("name", ""))
    return str(value or "")


def node_usage(text: str) -> dict[str, NodeUsage]:
    """Each node's usage as the round's log classified it (the last line per node wins)."""
    out: dict[str, NodeUsage] = {}
    for rec in _records(text):
        msg = rec.get("msg")
        if msg not in (CLASSIFIED, APPROPRIATE):
            continue
        node = _node_name(rec.get("node"))
        if not node:
            continue
        raw_usage, raw_pct = rec.get("usage"), rec.get("usagePercentage")
        usage = raw_usage if isinstance(raw_usage, dict) else {}
        pct = raw_pct if isinstance(raw_pct, dict) else {}
        out[node] = NodeUsage(
            node,
            str(rec.get("category", "")) if msg == CLASSIFIED else "appropriate",
            {str(k): str(v) for k, v in usage.items()},
            {str(k): float(v) for k, v in pct.items() if isinstance(v, int | float)},
        )
    return out


def source_errors(text: str) -> list[str]:
    """The log's own lines that say the metrics source failed, as they were written."""
    out = []
    for line in text.splitlines():
        start = line.find("{")
        try:
            rec = json.loads(line[start:]) if start >= 0 else None
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            continue
        msg, err = rec.get("msg"), str(rec.get("err", ""))
        if msg == FETCH_ERROR or (msg == BALANCE_FAILED and NO_NODE_METRICS in err):
            out.append(line.strip())
    return out
