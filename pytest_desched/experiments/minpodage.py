"""The runbook's unmodified minPodAge (10m) keeps seconds-old pods out of every round."""

from __future__ import annotations

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.experiments.declared import Experiment
from pytest_desched.experiments.framework import decisions_table


class MinPodAgeProtects(Experiment):
    """Violating but young pods: the evictor filters each one with exactly `minPodAge`."""

    name = "minpodage"
    title = "minpodage-protects-young-pods"
    default_variant = "pdb-lister-workaround"
    keep_min_pod_age = True

    def arrange(self) -> None:
        self.s1 = self.r.arrange_violation()

    def act(self) -> None:
        self.v = self.r.run_round("descheduler-minpodage")

    def assess(self) -> None:
        r, v = self.r, self.v
        r.assess_nothing_evicted(v, self.s1)
        young = {
            d.name for d in v.decisions if d.fate == Fate.FILTERED and d.checks == ["minPodAge"]
        }
        r.check(
            "minpodage-filters-every-pod",
            "every pod filtered by the evictor with exactly the minPodAge check",
            young == {p.name for p in self.s1.live} and len(v.decisions) == len(young),
            f"decisions {decisions_table(v.decisions)}",
        )
