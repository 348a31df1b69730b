"""RemoveFailedPods: a failed ReplicationController pod goes; a failed bare pod is protected.

Mirrors test/e2e/e2e_failedpods_test.go TestFailedPods ("test-failed-pods-default-args":
one failed pod evicted) with the DefaultEvictor's FailedBarePods protection (on by default
in v0.36.0) as the negative case in the same round. Kwok runs no containers, so the pods
are made Failed through their status, as a kubelet reports a container that exited 1.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.workloads import Pod, ReplicationController
from pytest_desched.outcome.fates import Layer

STRATEGY = "RemoveFailedPods"
MIN_AGE_S = 1


class FailedPods(StrategyExperiment):
    """One of two `worker` RC pods fails, and so does the bare pod `orphan`."""

    name = "failed-pods"
    strategy = STRATEGY
    upstream = "test/e2e/e2e_failedpods_test.go TestFailedPods"

    def strategy_args(self) -> dict[str, Any]:
        # upstream's 1 s: the v0.36.0 default (3600 s) would spare every lab pod
        return {**self.lab_scope(), "minPodLifetimeSeconds": MIN_AGE_S}

    def arrange(self) -> None:
        self.worker = ReplicationController("worker", replicas=2)
        self.orphan = Pod("orphan")
        s0 = self.lab.apply(self.worker, self.orphan)
        self.failed = s0.of("worker")[0].name
        self.lab.fail_pod(self.failed)
        self.lab.fail_pod("orphan")
        s1 = self.settle(self.worker)  # the RC replaced its failed pod; the failed one stays
        phases = {p.name: p.phase for p in s1.live}
        self.r.check(
            "pods-failed",
            "the chosen RC pod and the bare pod are Failed, the RC runs two others",
            phases.get(self.failed) == "Failed"
            and phases.get("orphan") == "Failed"
            and sum(1 for p in s1.of("worker") if p.phase == "Running") == 2,
            str(phases),
        )
        self.lab.wait_older_than(MIN_AGE_S, names=[self.failed, "orphan"])

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        final = self.lab.snapshot()
        e = self.expect(self.v)
        e.eviction_count(1, STRATEGY)
        e.evicted(pods=[self.failed], strategy=STRATEGY)
        e.kept(pods=["orphan"])
        e.decided_by(Layer.EVICTOR_FILTER, pods=["orphan"], checks=["FailedBarePods"])
        running = [p.name for p in self.v.before.of("worker") if p.phase == "Running"]
        e.kept(pods=running)
        e.decided_by(Layer.POLICY, pods=running)
        e.nothing_pending(final)
