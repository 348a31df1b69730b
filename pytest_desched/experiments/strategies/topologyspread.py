"""RemovePodsViolatingTopologySpreadConstraint: hard and soft zone spread, each on its own.

Mirrors test/e2e/e2e_topologyspreadconstraint_test.go TestTopologySpreadConstraint
("test-topology-spread-hard-constraint", "test-topology-spread-soft-constraint"). Upstream
crowds one zone with a nodeSelector'd "violator" Deployment; here the violation is made the
runbook's way: the pods require a node label only one node carries (so with
nodeAffinityPolicy Honor the other zones do not count and all pods land there), then the
label goes on every node. Three pods in three zones, skew 3: the plugin moves two
(balanceDomains: ideal average 1, half the excess per step), leaving skew <= 1.

Each experiment carries a hard and a soft workload; the policy's `constraints` selects one,
and the other is the negative case (never a candidate: the plugin's own scope).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.inputs import POOL_LABEL, POOL_VALUE
from pytest_desched.lab.workloads import ZONE_KEY, Deployment, TopologySpread
from pytest_desched.outcome.fates import Layer

STRATEGY = "RemovePodsViolatingTopologySpreadConstraint"


def _spread(name: str, when: str) -> Deployment:
    return Deployment(
        name,
        replicas=3,
        node_affinity={POOL_LABEL: [POOL_VALUE]},
        topology_spread=[TopologySpread(ZONE_KEY, max_skew=1, when_unsatisfiable=when)],
    )


class _ZoneSpread(StrategyExperiment):
    strategy = STRATEGY
    upstream = "test/e2e/e2e_topologyspreadconstraint_test.go TestTopologySpreadConstraint"
    constraint: ClassVar[str] = "DoNotSchedule"

    def strategy_args(self) -> dict[str, Any]:
        return {**self.lab_scope(), "constraints": [self.constraint]}

    def arrange(self) -> None:
        self.hard = _spread("hard", "DoNotSchedule")
        self.soft = _spread("soft", "ScheduleAnyway")
        first, *others = self.workers
        self.lab.label_node(first)  # only one zone may host the pods at first
        s0 = self.lab.apply(self.hard, self.soft)
        for node in others:
            self.lab.label_node(node)
        self.zones = self.lab.topology(ZONE_KEY)
        self.r.check(
            "one-zone-crowded",
            f"all six pods start on {first}, every zone now eligible",
            s0.by_node() == {first: 6} and len(set(self.zones.values())) == len(self.workers),
            f"distribution {s0.by_node()}, zones {self.zones}",
        )

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        moved, stays = ("hard", "soft") if self.constraint == "DoNotSchedule" else ("soft", "hard")
        final = self.settle(self.hard, self.soft)
        e = self.expect(self.v)
        e.eviction_count(2, STRATEGY)
        e.evicted(workload=moved, count=2, strategy=STRATEGY)
        e.replaced(final, workload=moved, count=2, avoid=[self.workers[0]])
        e.skew(final, self.zones, 1, workload=moved, key=ZONE_KEY)
        e.kept(workload=stays)
        e.decided_by(Layer.POLICY, workload=stays)
        e.nothing_pending(final)


class TopologySpreadHard(_ZoneSpread):
    """constraints [DoNotSchedule]: the hard workload is rebalanced, the soft one ignored."""

    name = "topology-spread-hard"
    constraint = "DoNotSchedule"


class TopologySpreadSoft(_ZoneSpread):
    """constraints [ScheduleAnyway]: the soft workload is rebalanced, the hard one ignored."""

    name = "topology-spread-soft"
    constraint = "ScheduleAnyway"
