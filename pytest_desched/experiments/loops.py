"""Eviction-loop experiments over K cycles: upstream #1707's setup, its loop, a constructed one.

`preferred-affinity-1707` runs RemovePodsViolatingNodeAffinity with
preferredDuringSchedulingIgnoredDuringExecution (upstream #1707) on two nodes: the source,
which misses the preference, and the target, which fits it. It records what the pinned
descheduler and kube-scheduler really do over K cycles, and the loop detector's verdict on
it, whichever way it goes (`result.notes`, each record's `cycle`, `cycles.json`).

`preferred-1707-unfit` is the same with the node that fits the preference cordoned and a
third worker open: the descheduler keeps evicting (its preference check ignores fit), and
the detector must report the loop.

`loop-constructed` makes a loop on purpose, with the runbook's own policy: cycle 1
moves a pod source -> target (the positive experiment), then the lab moves the pool label
back, so cycle 2 moves it target -> source. The detector must report it (an alternation in
cycles 1 and 2 between the two nodes): the check that the detector can fire on a real run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.errors import ConfigError
from pytest_desched.experiments.declared import Experiment
from pytest_desched.experiments.framework import decisions_table

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy import Policy
    from pytest_desched.experiments.framework import ExperimentContext

STRATEGY = "RemovePodsViolatingNodeAffinity"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
AFFINITY_TYPE = f"profiles.safe-rebalance.{STRATEGY}.nodeAffinityType"
WHY_1707 = (
    "upstream #1707: the eviction loop is reported for preferred node affinity; the runbook's "
    "required type is replaced by the preferred one, nothing else changes"
)


class PreferredAffinityLoop(Experiment):
    """Upstream #1707's setup at the pinned version: preferred node affinity, one node that
    fits the preference and one that does not, K cycles (default 4); what happens is recorded
    with the loop detector's verdict.

    The other workers are cordoned while it runs, so the two nodes are the only choice for the
    descheduler's nodeFit and for kube-scheduler alike.
    """

    name = "preferred-affinity-1707"
    title = "preferred-affinity-loop-1707"
    default_variant = "pdb-lister-workaround"  # the runbook variant evicts nothing (#1882)
    default_cycles: ClassVar[int] = 4
    preferred_unfit: ClassVar[bool] = False  # the node that fits the preference is cordoned

    def policy_for(self, ctx: ExperimentContext) -> Policy:
        return ctx.policy.override(AFFINITY_TYPE, [PREFERRED], why=WHY_1707).validate()

    def arrange(self) -> None:
        lab, src, dst = self.lab, self.ctx.source, self.ctx.target
        others = [w for w in self.ctx.cluster.workers if w not in (src, dst)]
        if self.preferred_unfit and not others:
            raise ConfigError(
                f"{self.name} needs a third worker (the preferred node is cordoned, the pods "
                "need somewhere else to go); run with --workers 3 or more"
            )
        lab.create_namespace()
        for w in others if not self.preferred_unfit else []:
            lab.cordon(w)
        lab.label_node(src)
        with lab.only_on(src):  # every pod starts where the preference is, then it moves
            s0 = lab.deploy(preferred=True)
        self.r.check(
            "starts-on-source",
            "all pods start on the source",
            set(s0.by_node()) == {src} and len(s0.ready()) == self.ctx.replicas,
            f"distribution {s0.by_node()}",
        )
        lab.label_node(dst)
        lab.unlabel_node(src)
        if self.preferred_unfit:
            lab.cordon(dst)
        lab.create_pdb(min_available=self.ctx.replicas - 1)
        lab.wait_pdb(1)
        self.s1 = lab.snapshot()

    def act(self) -> None:
        self.v = self.r.run_round("descheduler-preferred-1707")

    def assess(self) -> None:
        evicted = [d for d in self.v.decisions if d.fate == Fate.EVICTED]
        self.r.check(
            "preferred-evicts",
            f"cycle 1: {STRATEGY} evicts a pod off the node that misses the preference",
            len(evicted) == 1
            and evicted[0].strategy == STRATEGY
            and evicted[0].node in (None, self.ctx.source),
            decisions_table(self.v.decisions),
        )

    def after_cycles(self) -> None:
        res, src, dst = self.r.result, self.ctx.source, self.ctx.target
        moves = [
            f"c{c['cycle']}: {[e['node'] for e in c['evicted']]} -> "
            f"{[a['node'] for a in c['arrived']]}"
            for c in res.cycles
            if c["evicted"]
        ]
        final = self.lab.snapshot().by_node()
        fits = "fits it but is cordoned" if self.preferred_unfit else "fits it"
        truth = (
            f"#1707 at descheduler {self.ctx.descheduler_version}, preferred node affinity, "
            f"{src} misses the preference and {dst} {fits}, {len(res.cycles)} cycles; "
            f"evicted from -> replacements on: {'; '.join(moves) or 'no eviction'}; "
            f"final distribution {final}; loop detector: {res.loops.get('summary')}"
        )
        res.notes.append(truth)
        jobs = {c["job_uid"] for c in res.cycles}
        self.r.check(
            "cycles-recorded",
            "every cycle ran as its own Job and is recorded with its fates and the verdict",
            len(jobs) == len(res.cycles) > 1 and "silent" in res.loops,
            truth,
        )


class PreferredUnfitLoop(PreferredAffinityLoop):
    """Upstream #1707's loop at the pinned version: the node that fits the preference is
    cordoned, so every replacement lands on a node that misses it and is evicted again; the
    loop detector must report it over K cycles (default 6).

    Why v0.36.0 loops here (removepodsviolatingnodeaffinity/node_affinity.go and
    descheduler/node/node.go at v0.36.0): the preferred check compares the pod's node with the
    best preference weight over all nodes (GetBestNodeWeightGivenPodPreferredAffinity), fit
    or not, and nodeFit only asks whether *some* other node fits (the third worker does).
    """

    name = "preferred-1707-unfit"
    title = "preferred-affinity-loop-1707-unfit"
    default_cycles: ClassVar[int] = 6
    preferred_unfit: ClassVar[bool] = True

    def after_cycles(self) -> None:
        super().after_cycles()
        res = self.r.result
        self.r.check(
            "never-converges",
            "every cycle evicts a pod again: no replacement can reach the preferred node",
            all(len(c["evicted"]) == 1 for c in res.cycles),
            str([len(c["evicted"]) for c in res.cycles]),
        )
        self.r.check(
            "loop-detected",
            "the loop detector reports the owner's pods coming back",
            not res.loops.get("silent", True),
            str(res.loops.get("summary")),
        )


class ConstructedLoop(Experiment):
    """A loop made on purpose with the runbook's policy: cycle 1 moves a pod source -> target,
    the lab moves the pool label back, cycle 2 moves a pod target -> source; the loop detector
    must report it."""

    name = "loop-constructed"
    title = "loop-constructed"
    default_variant = "pdb-lister-workaround"
    default_cycles: ClassVar[int] = 2

    def arrange(self) -> None:
        self.s1 = self.r.arrange_violation()

    def act(self) -> None:
        self.v = self.r.run_round("descheduler-loop-constructed")

    def between_cycles(self, cycle: int) -> None:
        """Odd cycles find the label on the target, even ones on the source."""
        lab, src, dst = self.lab, self.ctx.source, self.ctx.target
        to, away = (src, dst) if cycle % 2 == 0 else (dst, src)
        lab.label_node(to)
        lab.unlabel_node(away)

    def after_cycles(self) -> None:
        res, src, dst = self.r.result, self.ctx.source, self.ctx.target
        loops = res.loops.get("loops") or []
        self.r.check(
            "loop-detected",
            "the detector reports the constructed loop: an alternation in cycles 1 and 2 "
            "between the source and the target",
            any(
                "alternation" in lp["kind"]
                and {1, 2} <= set(lp["cycles"])
                and set(lp["nodes"]) == {src, dst}
                for lp in loops
            ),
            str(res.loops.get("summary")),
        )
