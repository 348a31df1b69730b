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
from dataclasses import dataclass, field, replace
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


def _line_records(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each line that carries a JSON object (after any prefix), with that object."""
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            rec = json.loads(line[start:])
        except ValueError:
            continue
        if isinstance(rec, dict):
            yield line, rec


def _records(text: str) -> Iterator[dict[str, Any]]:
    for _, rec in _line_records(text):
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
    for line, rec in _line_records(text):
        msg, err = rec.get("msg"), str(rec.get("err", ""))
        if msg == FETCH_ERROR or (msg == BALANCE_FAILED and NO_NODE_METRICS in err):
            out.append(line.strip())
    return out


# -- a long-lived descheduler's log: one process, many cycles (--descheduling-interval) -------
# descheduler.go logs CYCLE_START (V3, :235) as each runDeschedulerLoop begins and CYCLE_END
# (V1, :252) as it ends; the metrics collector runs every COLLECT_PERIOD_S between and during
# cycles (metricscollector.go:63-66) and logs FETCH_ERROR per node whose fetch failed.
CYCLE_START = "Resetting pod evictor counters"
CYCLE_END = "Number of evictions/requests"
EVICTED = "Evicted pod"
COLLECT_PERIOD_S = 5.0
# A collect's own fetches take milliseconds; this much of the period is left for them.
COLLECT_SLACK_S = 0.5


@dataclass(frozen=True)
class Cycle:
    """One descheduling cycle of a long-lived process, as its own log tells it."""

    number: int  # 1-based, in log order
    start_ms: float  # the log's `ts` (ms since the epoch) of CYCLE_START
    end_ms: float | None  # of CYCLE_END; None: the process was stopped inside the cycle
    classified: dict[str, NodeUsage] = field(default_factory=dict)
    evicted: tuple[str, ...] = ()  # "namespace/name" of each "Evicted pod" line
    errors: tuple[str, ...] = ()  # the source's error lines inside the cycle (source_errors)
    # node -> `ts` of the newest FETCH_ERROR for it logged before this cycle began
    last_fetch_error_ms: dict[str, float] = field(default_factory=dict)
    # node -> `ts` of the first FETCH_ERROR for it logged after this cycle began
    next_fetch_error_ms: dict[str, float] = field(default_factory=dict)

    def fetch_failed_last(self, node: str) -> bool:
        """The node's value at the cycle is the one kept over a failed fetch (a successful
        fetch logs nothing). Either its newest error is less than one collect period (minus
        the fetches' own time) before the cycle began, so no later collect ran in between; or
        the collects just before and just after the start both failed (their errors less
        than a period and its slack apart: consecutive collects, none between them)."""
        prev = self.last_fetch_error_ms.get(node)
        if prev is None or prev > self.start_ms:
            return False
        if self.start_ms - prev < (COLLECT_PERIOD_S - COLLECT_SLACK_S) * 1000:
            return True
        nxt = self.next_fetch_error_ms.get(node)
        return nxt is not None and nxt - prev < (COLLECT_PERIOD_S + COLLECT_SLACK_S) * 1000

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycle": self.number,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "classified": {n: u.to_dict() for n, u in self.classified.items()},
            "evicted": list(self.evicted),
            "errors": list(self.errors),
            "last_fetch_error_ms": self.last_fetch_error_ms,
            "next_fetch_error_ms": self.next_fetch_error_ms,
        }


def cycles(text: str) -> list[Cycle]:
    """Split a long-lived process's log into its cycles (a one-shot log is one cycle)."""
    out = _cycles(text)
    errors = sorted(fetch_errors(text), key=lambda e: e[1])
    for i, c in enumerate(out):
        nxt: dict[str, float] = {}
        for node, ts in errors:
            if ts > c.start_ms:
                nxt.setdefault(node, ts)
        out[i] = replace(c, next_fetch_error_ms=nxt)
    return out


def fetch_errors(text: str) -> list[tuple[str, float]]:
    """(node, `ts`) of every FETCH_ERROR line, in log order."""
    out = []
    for rec in _records(text):
        ts = rec.get("ts")
        if rec.get("msg") == FETCH_ERROR and isinstance(ts, int | float):
            out.append((_node_name(rec.get("node")), float(ts)))
    return out


def _cycles(text: str) -> list[Cycle]:
    out: list[Cycle] = []
    last_error: dict[str, float] = {}
    cur: dict[str, Any] | None = None

    def close(end_ms: float | None) -> None:
        assert cur is not None
        body = "\n".join(cur["lines"])
        out.append(
            Cycle(
                number=len(out) + 1,
                start_ms=cur["start"],
                end_ms=end_ms,
                classified=node_usage(body),
                evicted=tuple(cur["evicted"]),
                errors=tuple(e for e in source_errors(body) if FETCH_ERROR not in e),
                last_fetch_error_ms=cur["errors_before"],
            )
        )

    for line, rec in _line_records(text):
        msg, ts = rec.get("msg"), rec.get("ts")
        ts = float(ts) if isinstance(ts, int | float) else None
        if msg == FETCH_ERROR and ts is not None:
            last_error[_node_name(rec.get("node"))] = ts
        if msg == CYCLE_START and ts is not None:
            if cur is not None:  # a start without an end: the previous cycle was cut short
                close(None)
            cur = {"start": ts, "lines": [], "evicted": [], "errors_before": dict(last_error)}
            continue
        if cur is None:
            continue
        cur["lines"].append(line)
        if msg == EVICTED:
            pod = rec.get("pod")
            if isinstance(pod, dict):
                cur["evicted"].append(f"{pod.get('namespace', '')}/{pod.get('name', '')}")
        if msg == CYCLE_END:
            close(ts)
            cur = None
    if cur is not None:
        close(None)
    return out


def classified_on_failed_fetch(cyc: Cycle) -> list[str]:
    """The nodes `cyc` classified although the collector's last fetch of each had failed:
    read on a value kept from before ("duplicate the previous value", metricscollector.go)."""
    return sorted(n for n in cyc.classified if cyc.fetch_failed_last(n))


def fetch_errors_since(text: str, since_ms: float) -> dict[str, float]:
    """Node -> `ts` of the first FETCH_ERROR for it at or after `since_ms` (wall-clock ms)."""
    out: dict[str, float] = {}
    for rec in _records(text):
        ts = rec.get("ts")
        if rec.get("msg") != FETCH_ERROR or not isinstance(ts, int | float) or ts < since_ms:
            continue
        out.setdefault(_node_name(rec.get("node")), float(ts))
    return out
