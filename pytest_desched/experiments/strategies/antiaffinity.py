"""RemovePodsViolatingInterPodAntiAffinity, with priorityThreshold protecting one pod.

The upstream e2e suite at v0.36.0 has no test for this plugin; the scenario mirrors its unit
test (pkg/framework/plugins/removepodsviolatinginterpodantiaffinity/pod_antiaffinity_test.go
"Evict single pod" / "Evict only 1 pod after sorting") on a real API server, with the
protection of test/e2e/e2e_test.go TestThresholdPriorityClass (a PriorityClass at or above
`priorityThreshold` is never evicted) as the negative case in the same round.

The violation is made the only way a scheduler allows: `web` and `web-critical` (required
anti-affinity to `db`) run on one node, then a bare `db` pod is bound there by nodeName.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.experiments.strategies.base import StrategyExperiment
from pytest_desched.lab.workloads import AntiAffinity, Deployment, Pod, PriorityClass

STRATEGY = "RemovePodsViolatingInterPodAntiAffinity"
HIGH = PriorityClass("desched-lab-high", 1000)
THRESHOLD = 500


class InterPodAntiAffinity(StrategyExperiment):
    """`web` is evicted away from `db`; `web-critical` (priority 1000 >= 500) stays."""

    name = "inter-pod-anti-affinity"
    strategy = STRATEGY
    upstream = "(no e2e) removepodsviolatinginterpodantiaffinity/pod_antiaffinity_test.go"

    def evictor_args(self) -> dict[str, Any]:
        return {"priorityThreshold": {"value": THRESHOLD}}

    def arrange(self) -> None:
        self.node = self.workers[0]
        away = [AntiAffinity.to("db")]
        self.web = Deployment("web", anti_affinity=away)
        self.critical = Deployment("web-critical", anti_affinity=away, priority_class=HIGH.name)
        self.lab.apply(HIGH, self.web, self.critical, only_on=self.node)
        s1 = self.lab.apply(Pod("db", node_name=self.node))
        self.r.check(
            "anti-affinity-violated",
            f"web, web-critical and db all run on {self.node}",
            {p.workload: p.node for p in s1.live}
            == {"web": self.node, "web-critical": self.node, "db": self.node},
            str([(p.name, p.node) for p in s1.live]),
        )

    def act(self) -> None:
        self.v = self.round()

    def assess(self) -> None:
        final = self.settle(self.web, self.critical)
        e = self.expect(self.v)
        e.eviction_count(1, STRATEGY)
        e.evicted(workload="web", strategy=STRATEGY)
        e.replaced(final, workload="web", count=1, avoid=[self.node])
        e.kept(workload="web-critical")
        e.decided_by("evictor-filter", workload="web-critical", checks=["priorityThreshold"])
        e.kept(workload="db")
        e.decided_by("policy", workload="db")
        e.nothing_pending(final)
