"""The runbook's rule for actual utilization, on a real Kubernetes Metrics source (issue 50).

The runbook: "when LowNodeUtilization uses actual utilization (`metricsProviders`: Kubernetes
Metrics or Prometheus; the old `metricsCollector` is deprecated), a metrics source that is
missing, stale or selected by the wrong labels must make the policy fail closed or skip the
round, never read a node as idle."

Both experiments run LowNodeUtilization with `metricsUtilization: {source:
KubernetesMetrics}` and the top-level `metricsProviders: [{source: KubernetesMetrics}]`
(v0.36.0's shape) on the embedded cluster, whose metrics-server scrapes kwok's emulated
kubelets. The lab declares usage per pod: `hot` (four pods) requests 100m CPU each but uses
800m, all on one node: 80% of its 4 CPUs by usage and 10% by requests, so only actual usage
makes it overutilized (a requests-based policy sees every node under its thresholds).

* `utilization` (positive): the round evicts from the over-used node, one pod (the runbook's
  per-node cap, though usage alone would move two), its replacement lands elsewhere, and the
  evidence carries each node's usage as the descheduler logged it.
* `utilization-missing` (negative, *missing*): metrics-server is stopped before the round.
  v0.36.0 in a Job fails closed: its collector keeps no value for a node it could not fetch
  (metricscollector.go:131-132 "duplicate the previous value": none on a fresh start) and
  LowNodeUtilization's usage client refuses a node without one ("unable to find node ... in
  the collected metrics", usageclients.go:212), so the balance extension point fails and
  nothing is evicted. UIDs stay, no eviction reaches the API server, and the descheduler's own
  error lines are the evidence of the layer that stopped it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.lint_rules import runbook_numbers
from pytest_desched.descheduler.utilization_log import node_usage, source_errors
from pytest_desched.experiments.strategies.base import (
    SAFETY_CAP,
    StrategyExperiment,
    strategy_policy,
)
from pytest_desched.experiments.utilization_checks import assess_moved_one, assess_nothing_read
from pytest_desched.lab.snapshot import Snapshot
from pytest_desched.lab.workloads import Deployment

STRATEGY = "LowNodeUtilization"
HOT_PODS, HOT_REQUEST_M, HOT_USAGE_M = 4, 100, 800
LOW, TARGET = 20, 50  # percent of allocatable CPU, by actual usage


def usage_args(exp: StrategyExperiment) -> dict[str, Any]:
    """LowNodeUtilization's args on actual CPU usage from metrics.k8s.io, in the lab's scope:
    thresholds LOW / TARGET percent."""
    return {
        **exp.lab_scope(),
        "thresholds": {"cpu": LOW},
        "targetThresholds": {"cpu": TARGET},
        "metricsUtilization": {"source": KUBERNETES_METRICS},
    }


def usage_policy(
    exp: StrategyExperiment, caps: Mapping[str, int], what: str, cap: int | None = SAFETY_CAP
) -> Policy:
    """`exp`'s one-strategy policy reading the top-level `metricsProviders` v0.36.0 reads
    (KubernetesMetrics), with its eviction `caps` declared on top of the total `cap`."""
    doc = strategy_policy(exp.strategy, exp.strategy_args(), exp.evictor_args(), cap=cap).to_dict()
    doc["metricsProviders"] = [{"source": KUBERNETES_METRICS}]
    doc.update(caps)
    return Policy.from_dict(doc, source=f"<{exp.name} {what}>")


def deploy_hot(exp: StrategyExperiment) -> tuple[str, Deployment, Snapshot]:
    """`hot` (HOT_PODS pods using HOT_USAGE_M, requesting HOT_REQUEST_M) all on the first
    worker, checked as `one-node-overused`: the node every utilization round should read as
    overutilized, whatever source it reads. Returns the node, the Deployment and the lab."""
    node = exp.workers[0]
    hot = Deployment(
        "hot",
        replicas=HOT_PODS,
        requests={"cpu": f"{HOT_REQUEST_M}m"},
        usage={"cpu": f"{HOT_USAGE_M}m", "memory": "64Mi"},
    )
    s1 = exp.lab.apply(hot, only_on=node)
    exp.r.check(
        "one-node-overused",
        f"all {HOT_PODS} hot pods ({HOT_USAGE_M}m used, {HOT_REQUEST_M}m requested) on {node}",
        s1.by_node() == {node: HOT_PODS},
        f"distribution {s1.by_node()}",
    )
    return node, hot, s1


def _idle(m: int) -> bool:
    return m < 300


def _at_least(floor: float) -> Callable[[int], bool]:
    return lambda m: m >= floor


class _UtilizationBase(StrategyExperiment):
    """The policy and lab the utilization experiments share; not registered."""

    strategy = STRATEGY
    metrics_sources = (KUBERNETES_METRICS,)
    upstream = "test/e2e/e2e_lownodeutilization_kubernetesmetrics_test.go"

    def strategy_args(self) -> dict[str, Any]:
        return usage_args(self)

    def policy(self) -> Policy:
        # the runbook's caps: per node 1, namespace 1, total 2
        return usage_policy(self, runbook_numbers().caps, "lab policy")

    def arrange(self) -> None:
        self.node, self.hot, self.s1 = deploy_hot(self)
        busy = self.deploy_more()
        used = HOT_PODS * HOT_USAGE_M
        want: dict[str, Callable[[int], bool]] = {self.node: lambda m: m >= used * 0.9}
        for n in self.workers:
            if n != self.node:  # an idle node, or a variant's busy one at its declared usage
                want[n] = _idle if n not in busy else _at_least(busy[n] * 0.9)
        # What the round will read: metrics-server serving the declared usage (a CPU rate needs
        # two scrapes, so this waits one --metric-resolution after the pods start).
        self.served = self.lab.wait_node_usage(want, timeout=90)
        self.lab.wait_pod_usage([p.name for p in self.s1.live], timeout=90)
        self.r.result.notes.append(f"metrics-server served before the round: {self.served}")

    def deploy_more(self) -> dict[str, int]:
        """A variant's own pods beside `hot`, applied before the usage wait so that one wait
        (one or two metrics-server scrapes) covers both: node -> the CPU millicores they
        declare there. None by default."""
        return {}

    def usage_seen(self, view: Any) -> dict[str, dict[str, Any]]:
        """Each node's usage as the round's descheduler logged it, filed with the round."""
        seen = {n: u.to_dict() for n, u in node_usage(view.rnd.logs).items()}
        view.extra["utilization"] = {
            "node_usage_logged": seen,
            "node_usage_served_before": self.served,
            "metrics_source_errors": source_errors(view.rnd.logs),
        }
        return seen


class Utilization(_UtilizationBase):
    """`hot` uses 80% of one node's CPU (requests 10%): LowNodeUtilization on actual usage
    evicts one pod from it (the per-node cap), and the log shows each node's usage."""

    name = "utilization"
    title = "utilization-kubernetes-metrics"

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        seen = self.usage_seen(self.v)
        assess_moved_one(self, self.v, seen, "cpu", "actual CPU usage", (LOW, TARGET))


class UtilizationMissing(_UtilizationBase):
    """metrics-server stopped before the round: the policy fails closed, nothing is evicted,
    and the descheduler's own error lines say why."""

    name = "utilization-missing"
    title = "utilization-kubernetes-metrics-missing"

    def act(self) -> None:
        # optional: the embedded provider's fault injector, only where this experiment runs
        from pytest_desched.providers.embedded.faults import Faults

        faults = Faults(self.ctx.cluster)
        with faults.metrics_server_down():
            self.gone = self.lab.node_usage(self.node)  # None: the source answers nothing
            self.v = self.round()
        self.r.result.notes.append(
            "fault: " + "; ".join(f"{e.fault} {e.action} {e.detail}" for e in faults.events)
        )

    def assess(self) -> None:
        v = self.v
        self.r.check(
            "source-missing",
            "metrics.k8s.io served no node usage while the round ran",
            self.gone is None,
            f"served {self.gone}",
        )
        seen = self.usage_seen(v)  # files the round's usage and errors: read them after
        errors = v.extra["utilization"]["metrics_source_errors"]
        self.r.check(
            "descheduler-says-source-failed",
            "the descheduler's own log says the metrics fetch failed and the balance "
            "extension point stopped for want of node metrics",
            any('"Error fetching metrics"' in e for e in errors)
            and any("in the collected metrics" in e for e in errors),
            "\n".join(errors[:4]) or "no such line in the round's log",
        )
        assess_nothing_read(
            self, v, seen, "no node was classified (none read as idle without a sample)"
        )


# The shared lab and policy, for the other failure modes' experiments (utilization_modes.py).
UtilizationBase = _UtilizationBase
