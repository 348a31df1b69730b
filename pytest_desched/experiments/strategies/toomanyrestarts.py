"""RemovePodsHavingTooManyRestarts: pods over `podRestartThreshold` go, the others stay.

Mirrors test/e2e/e2e_toomanyrestarts_test.go TestTooManyRestarts ("test-one-evictions":
threshold 3 evicts the restarting pods; "test-no-evictions": a threshold above the count
evicts none) in one round, with two workloads either side of the threshold. Kwok runs no
containers, so there the restart counts are written into the pods' status as a kubelet
would; on kind the node's kubelet restarts the stopped containers itself (Lab.set_restarts).
"""

from __future__ import annotations

from typing import Any

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.workloads import Deployment
from pytest_desched.outcome.fates import Layer

STRATEGY = "RemovePodsHavingTooManyRestarts"
THRESHOLD = 3


class TooManyRestarts(StrategyExperiment):
    """`crashy` pods restarted 4 times (threshold 3), `steady` pods once."""

    name = "too-many-restarts"
    strategy = STRATEGY
    upstream = "test/e2e/e2e_toomanyrestarts_test.go TestTooManyRestarts"
    needs_restarts = "pods restarted 4 and 1 times"

    def strategy_args(self) -> dict[str, Any]:
        return {
            **self.lab_scope(),
            "podRestartThreshold": THRESHOLD,
            "includingInitContainers": True,
        }

    def arrange(self) -> None:
        self.crashy = Deployment("crashy", replicas=2)
        self.steady = Deployment("steady", replicas=2)
        s0 = self.lab.apply(self.crashy, self.steady)
        for p in s0.of("crashy"):
            self.lab.set_restarts(p.name, THRESHOLD + 1)
        for p in s0.of("steady"):
            self.lab.set_restarts(p.name, 1)
        s1 = self.lab.snapshot()
        self.r.check(
            "restarts-recorded",
            "the pods report the restart counts written",
            sorted(p.restarts for p in s1.live) == [1, 1, THRESHOLD + 1, THRESHOLD + 1],
            str([(p.name, p.restarts) for p in s1.live]),
        )

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        final = self.settle(self.crashy, self.steady)
        e = self.expect(self.v)
        e.eviction_count(2, STRATEGY)
        e.evicted(workload="crashy", strategy=STRATEGY)
        e.kept(workload="steady")
        e.decided_by(Layer.POLICY, workload="steady")
        e.replaced(final, workload="crashy", count=2)
        e.nothing_pending(final)
