"""RemovePodsViolatingNodeTaints: a NoSchedule taint evicts the pods that do not tolerate it.

The upstream e2e suite at v0.36.0 has no test for this plugin; the scenario mirrors its unit
test (pkg/framework/plugins/removepodsviolatingnodetaints/node_taint_test.go
TestDeletePodsViolatingNodeTaints: "Pods not tolerating node taint should be evicted",
"Pods tolerating node taint should not be evicted", and the `excludedTaints` cases) on a real
API server. The negative case is the plugin's own protection, `excludedTaints`.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.workloads import Deployment, Taint
from pytest_desched.outcome.fates import Layer

STRATEGY = "RemovePodsViolatingNodeTaints"
TAINT = Taint("desched.pytest.io/lab-taint", "true", "NoSchedule")


class _TaintedNode(StrategyExperiment):
    """`intolerant` and `tolerant` (2 replicas each) on one node, then the node is tainted."""

    strategy = STRATEGY
    upstream = "(no e2e) framework/plugins/removepodsviolatingnodetaints/node_taint_test.go"

    def arrange(self) -> None:
        self.node = self.workers[0]
        self.intolerant = Deployment("intolerant", replicas=2)
        self.tolerant = Deployment("tolerant", replicas=2, tolerations=[TAINT.toleration()])
        self.lab.apply(self.intolerant, self.tolerant, only_on=self.node)
        self.lab.taint(self.node, TAINT)

    def act(self) -> None:
        self.v = self.round()


class NodeTaintsEvict(_TaintedNode):
    name = "node-taints"

    def assess(self) -> None:
        final = self.settle(self.intolerant, self.tolerant)
        e = self.expect(self.v)
        e.eviction_count(2, STRATEGY)
        e.evicted(workload="intolerant", strategy=STRATEGY)
        e.kept(workload="tolerant")
        e.decided_by(Layer.POLICY, workload="tolerant")
        e.replaced(final, workload="intolerant", count=2, avoid=[self.node])
        e.nothing_pending(final)


class NodeTaintsExcluded(_TaintedNode):
    name = "node-taints-excluded"

    def strategy_args(self) -> dict[str, Any]:
        return {**self.lab_scope(), "excludedTaints": [TAINT.key]}

    def assess(self) -> None:
        e = self.expect(self.v)
        e.eviction_count(0)
        e.kept(workload="intolerant")
        e.decided_by(Layer.POLICY, workload="intolerant")
        e.kept(workload="tolerant")
