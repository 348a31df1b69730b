"""RemoveDuplicates: four replicas on one node lose two; minReplicas keeps a two-replica owner.

Mirrors sigs.k8s.io/descheduler v0.36.0 test/e2e/e2e_duplicatepods_test.go
TestRemoveDuplicates: "Evict Pod even Pods with local storage" (local storage protection
disabled, minReplicas 3: two of the duplicates go) and "Ignores eviction with minReplicas of
4" (an owner below minReplicas is filtered), in one round. With 3 feasible nodes and 4 pods
the upper average is ceil(4/3) = 2, so 2 of the 3 duplicates on the node are evicted, as
upstream expects with its 2 workers.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.workloads import Deployment
from pytest_desched.outcome.fates import Layer

STRATEGY = "RemoveDuplicates"


class RemoveDuplicatesExperiment(StrategyExperiment):
    """`dup` (4 replicas, emptyDir) and `few` (2 replicas) all on one node."""

    name = "remove-duplicates"
    strategy = STRATEGY
    upstream = "test/e2e/e2e_duplicatepods_test.go TestRemoveDuplicates"

    def evictor_args(self) -> dict[str, Any]:
        return {"minReplicas": 3, "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}}

    def arrange(self) -> None:
        self.node = self.workers[0]
        self.dup = Deployment("dup", replicas=4, empty_dir="16Mi")
        self.few = Deployment("few", replicas=2)
        s0 = self.lab.apply(self.dup, self.few, only_on=self.node)
        self.r.check(
            "duplicates-on-one-node",
            f"all six pods start on {self.node}",
            s0.by_node() == {self.node: 6},
            f"distribution {s0.by_node()}",
        )

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        final = self.settle(self.dup, self.few)
        e = self.expect(self.v)
        e.eviction_count(2, STRATEGY)
        e.evicted(workload="dup", count=2, strategy=STRATEGY)
        e.kept(workload="few")
        e.decided_by(Layer.EVICTOR_FILTER, workload="few", checks=["minReplicas"])
        e.replaced(final, workload="dup", count=2, avoid=[self.node])
        e.nothing_pending(final)
