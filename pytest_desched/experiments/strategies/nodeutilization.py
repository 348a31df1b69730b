"""LowNodeUtilization and HighNodeUtilization by requests (memory), on 16Gi kwok workers.

LowNodeUtilization mirrors test/e2e/e2e_test.go TestLowNodeUtilization: pods bound to one
node make it overutilized while the others are underutilized, and the plugin evicts until
the node is under its target. Here six pods of an eighth of the node's allocatable memory
each (2Gi on a 16Gi kwok worker: 75%) sit on one node; target 55%: after two evictions it
holds 50%, so exactly two go (the round's own pod, 256Mi in kube-system, moves the figure by
1.6% at most and is excluded from eviction). Sized from the node, because a kind worker
reports the host's memory (24Gi here, where 6 x 2Gi would be under the target).

HighNodeUtilization has no upstream e2e test at v0.36.0; it mirrors the plugin's unit test
(nodeutilization/highnodeutilization_test.go "Evict pods from underutilized nodes"): a node
under the threshold is emptied towards the others. Its negative case is the DefaultEvictor's
PodsWithLocalStorage protection: a pod with an emptyDir on the same node stays. Where the
replacement lands is the scheduler's choice: with the default LeastAllocated scoring it may
go back to an underutilized node (upstream pairs this plugin with MostAllocated scoring), so
only the descheduler's decision and a Ready replacement are asserted.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.workloads import Deployment
from pytest_desched.outcome.fates import Layer


def allocatable_mib(node: Any, resource: str) -> int:
    """A node's allocatable `resource` in MiB (the nodeutilization plugins' denominator)."""
    from kubernetes.utils.quantity import parse_quantity

    return int(parse_quantity(node.status.allocatable[resource]) / (1 << 20))


class LowNodeUtilization(StrategyExperiment):
    """`heavy` (6 x 1/8 of the node's memory) on one node: 75% there, ~0% elsewhere; two move."""

    name = "low-node-utilization"
    strategy = "LowNodeUtilization"
    upstream = "test/e2e/e2e_test.go TestLowNodeUtilization"

    def strategy_args(self) -> dict[str, Any]:
        return {
            **self.lab_scope(),
            "thresholds": {"memory": 20},
            "targetThresholds": {"memory": 55},
        }

    def arrange(self) -> None:
        self.node = self.workers[0]
        eighth = allocatable_mib(self.ctx.cluster.core.read_node(self.node), "memory") // 8
        self.heavy = Deployment("heavy", replicas=6, requests={"memory": f"{eighth}Mi"})
        s0 = self.lab.apply(self.heavy, only_on=self.node)
        self.r.check(
            "one-node-overutilized",
            f"all six {self.heavy.requests['memory']} pods on {self.node}",
            s0.by_node() == {self.node: 6},
            f"distribution {s0.by_node()}",
        )

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        final = self.settle(self.heavy)
        e = self.expect(self.v)
        e.eviction_count(2, self.strategy)
        e.evicted(workload="heavy", count=2, strategy=self.strategy)
        e.replaced(final, workload="heavy", count=2, avoid=[self.node])
        e.pods_per_node(
            final,
            {self.node: 4, **{n: c for n, c in final.by_node().items() if n != self.node}},
            workload="heavy",
        )
        e.nothing_pending(final)


class HighNodeUtilization(StrategyExperiment):
    """`packed` (5 x 2Gi) on one node; `straggler` and `scratch` (emptyDir) on another."""

    name = "high-node-utilization"
    strategy = "HighNodeUtilization"
    upstream = "(no e2e) nodeutilization/highnodeutilization_test.go"

    def strategy_args(self) -> dict[str, Any]:
        return {**self.lab_scope(), "thresholds": {"memory": 20}}

    def arrange(self) -> None:
        self.full, self.sparse = self.workers[0], self.workers[1]
        self.packed = Deployment("packed", replicas=5, requests={"memory": "2Gi"})
        self.straggler = Deployment("straggler", requests={"memory": "1Gi"})
        self.scratch = Deployment("scratch", requests={"memory": "1Gi"}, empty_dir=True)
        self.lab.apply(self.packed, only_on=self.full)
        s0 = self.lab.apply(self.straggler, self.scratch, only_on=self.sparse)
        self.r.check(
            "one-node-underutilized",
            f"{self.full} at 62.5% memory, {self.sparse} at 12.5%",
            s0.by_node() == {self.full: 5, self.sparse: 2},
            f"distribution {s0.by_node()}",
        )

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        final = self.settle(self.packed, self.straggler, self.scratch)
        e = self.expect(self.v)
        e.eviction_count(1, self.strategy)
        e.evicted(workload="straggler", strategy=self.strategy)
        e.replaced(final, workload="straggler", count=1)  # where: the scheduler's scoring
        e.kept(workload="scratch")
        e.decided_by(Layer.EVICTOR_FILTER, workload="scratch", checks=["PodsWithLocalStorage"])
        e.kept(workload="packed")
        e.nothing_pending(final)
