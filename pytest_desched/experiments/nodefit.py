"""Runbook negative 1: no feasible node, so nodeFit (PreEvictionFilter) stops every candidate."""

from __future__ import annotations

from pytest_desched.descheduler.decisions import Fate, Layer
from pytest_desched.experiments.declared import Experiment
from pytest_desched.experiments.framework import decisions_table


class NegativeNodeFit(Experiment):
    """Remove the pool label from the target too: no node fits, nothing may be evicted."""

    name = "nodefit"
    title = "negative-nodefit"

    def arrange(self) -> None:
        self.s1 = self.r.arrange_violation()  # PDB kept at minAvailable 2: only nodeFit is tested
        self.lab.unlabel_node(self.ctx.target)
        self.r.check(
            "no-pool-node",
            "no node carries the pool label",
            self.lab.labelled_nodes() == [],
            f"{self.lab.labelled_nodes()}",
        )

    def act(self) -> None:
        self.v = self.r.run_round("descheduler-negative-nodefit")

    def assess(self) -> None:
        r, v, s1 = self.r, self.v, self.s1
        r.assess_nothing_evicted(v, s1)
        r.check(
            "no-eviction-request",
            "no eviction request reached the API server",
            not v.refused_by_api
            and not any(d.fate in (Fate.EVICTED, Fate.REFUSED) for d in v.decisions),
            f"audit requests {v.refused_by_api}",
        )
        nodefit = {
            d.name
            for d in v.decisions
            if d.fate == Fate.NODEFIT and d.layer == Layer.EVICTOR_NODEFIT
        }
        r.check(
            "nodefit-stops-every-pod",
            "every pod stopped by nodeFit at the evictor's PreEvictionFilter",
            nodefit == {p.name for p in s1.live},
            f"nodeFit-rejected {sorted(nodefit)}; decisions {decisions_table(v.decisions)}",
        )
        r.pdb_kept_healthy(v.rec)
