"""The runbook's opening incident, reproduced: every eviction succeeds, capacity drops anyway.

The runbook: "The first time the team enabled the Descheduler it went to the other extreme:
a low-utilization policy over the whole cluster, one CronJob round evicting a large number of
replicas. PDBs, termination grace, image cold starts and volume topology all took effect;
the evictions themselves succeeded, but serving capacity dropped during the rebuild window."

Both experiments run the incident's policy on the embedded cluster (real evictions on a
throwaway cluster, as every evicting experiment does: the framework applies the policy with
`dry_run=False` explicitly, the CronJob stays suspended and one Job runs the round).
The policy, declared here and nowhere loosened as a side effect:

* LowNodeUtilization on actual usage (`metricsUtilization: {source: KubernetesMetrics}`,
  `metricsProviders: [{source: KubernetesMetrics}]`), CPU thresholds 20% / 50%, over the
  whole pool: every worker is a source or a destination (no node selector); only the lab's
  namespace is evictable (`evictableNamespaces.exclude` of every other: the lab's scope, not
  the incident's);
* a generous cap per node (`maxNoOfPodsToEvictPerNode: 5`, the runbook's is 1) and no cap
  per namespace, under the lab's total safety cap (10);
* the DefaultEvictor at the release's defaults: none of the runbook's extra protections
  (`PodsWithoutPDB` and friends), as the incident ran.

The lab: Deployment `web`, 6 replicas on one worker, each using 500m CPU (75% of the node's
4 CPUs with its idle usage; 100m requested, so only usage makes it hot) and taking
`STARTUP_S` seconds to start (kwok's pod-ready Stage delay: an image pull and a cold start).

* `rebuild-window` (no PDB): the round evicts several replicas at once; every eviction is a
  201; `web` is below its 6 desired replicas until the replacements finish starting. The
  round's availability figures measure the dip: the minimum, how long, how many Pending.
* `rebuild-window-pdb` (PDB `minAvailable: 5`): the same round; the API server admits one
  eviction and answers the rest 429 while the replacement starts, so `web` never has fewer
  than 5 available. The PDB, not the policy, holds the capacity.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.descheduler.decisions import Fate
from pytest_desched.descheduler.policy import Policy
from pytest_desched.experiments.strategies.base import (
    SAFETY_CAP,
    StrategyExperiment,
)
from pytest_desched.experiments.utilization import STRATEGY, usage_args, usage_policy
from pytest_desched.lab.workloads import Deployment, PodDisruptionBudget

REPLICAS, REQUEST_M, USAGE_M = 6, 100, 500
STARTUP_S = 12.0  # each pod's start: Pending this long after it is bound
# The incident's caps, declared: generous per node, none per namespace, the lab's safety total.
INCIDENT_CAPS = {"maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictTotal": SAFETY_CAP}
PDB_MIN_AVAILABLE = 5


class _RebuildBase(StrategyExperiment):
    """The incident's policy and lab; not registered."""

    strategy = STRATEGY
    metrics_sources = (KUBERNETES_METRICS,)
    upstream = "(no e2e) the runbook's opening incident"
    pdb_min_available: ClassVar[int | None] = None

    def strategy_args(self) -> dict[str, Any]:
        return usage_args(self)

    def policy(self) -> Policy:
        return usage_policy(self, INCIDENT_CAPS, "incident policy", cap=None)

    def arrange(self) -> None:
        self.node = self.workers[0]
        self.web = Deployment(
            "web",
            replicas=REPLICAS,
            requests={"cpu": f"{REQUEST_M}m"},
            usage={"cpu": f"{USAGE_M}m", "memory": "64Mi"},
            startup_seconds=STARTUP_S,
        )
        objects: list[Any] = [self.web]
        if self.pdb_min_available is not None:
            objects.append(
                PodDisruptionBudget("web", selects=self.web, min_available=self.pdb_min_available)
            )
        self.s1 = self.lab.apply(*objects, only_on=self.node, timeout=90 + STARTUP_S)
        self.r.check(
            "one-node-overused",
            f"all {REPLICAS} web pods ({USAGE_M}m used each) on {self.node}",
            self.s1.by_node() == {self.node: REPLICAS},
            f"distribution {self.s1.by_node()}",
        )
        used = REPLICAS * USAGE_M
        others = [n for n in self.workers if n != self.node]
        served = self.lab.wait_node_usage(
            {self.node: lambda m: m >= used * 0.9, **{n: (lambda m: m < 300) for n in others}},
            timeout=90,
        )
        self.lab.wait_pod_usage([p.name for p in self.s1.live], timeout=90)
        pol = self.ctx.policy.to_dict()
        self.r.result.notes.append(
            f"incident policy: caps { ({k: pol.get(k) for k in INCIDENT_CAPS}) }, "
            f"evictor {self.ctx.policy.evictor_args()}; metrics-server served {served}"
        )

    def act(self) -> None:
        self.v = self.round()

    def window(self) -> Any:
        """The round's availability of `web`, after it is back to its desired replicas."""
        self.final = self.settle(self.web)
        w = self.r.availability(self.v).get("web")
        if w is None:
            raise RuntimeError(
                f"web's availability over round {self.v.rnd.name} was not measured: "
                f"{self.v.extra.get('notes') or 'no owner figures'}"
            )
        # the runbook's evidence field: the slowest replacement's Ready latency
        self.v.extra["replacement_ready_latency_s"] = w.ready_latency_s
        self.r.result.ready_latency_s = w.ready_latency_s
        return w

    def evicted_uids(self) -> dict[str, str]:
        """name -> UID of each web pod the round evicted (log, audit 201, UID gone)."""
        e = self.expect(self.v, self.final)
        self.e = e
        return {f.name: f.uid for f in e.ledger.select("web") if f.evicted}


class RebuildWindow(_RebuildBase):
    """The runbook's incident without a PDB: a utilization round over the whole pool evicts
    several replicas at once, every eviction succeeds, and capacity dips until the
    replacements have started; the dip is measured."""

    name = "rebuild-window"
    title = "rebuild-window-no-pdb"

    def assess(self) -> None:
        w = self.window()
        gone = self.evicted_uids()
        self.v.extra.setdefault("notes", []).append(f"evicted {gone}; {w.line()}")
        self.r.check(
            "evicted-several-at-once",
            "one round evicted more web replicas than the runbook's per-node cap of 1, each a "
            "201 with its UID gone",
            len(gone) >= 2,
            f"evicted {gone}",
        )
        self.r.check(
            "capacity-dipped",
            f"web's available replicas fell below its {w.desired} desired",
            w.available_before == w.desired and w.min_available <= w.desired - len(gone),
            w.line(),
        )
        self.r.check(
            "dip-lasted-the-start",
            f"web stayed below desired for at least its replacements' start ({STARTUP_S:.0f} s)",
            w.below_desired_s >= STARTUP_S - 1,
            w.line(),
        )
        self.r.check(
            "replacements-were-pending",
            "the replacements were Pending while they started, then Ready",
            w.pending_max >= len(gone) and w.pending_after == 0 and w.recovered,
            w.line(),
        )
        self.e.replaced(self.final, workload="web", count=len(gone))
        self.e.nothing_pending(self.final)


class RebuildWindowPdb(_RebuildBase):
    """The same incident with a PDB (`minAvailable: 5`): the API server admits one eviction
    and answers the rest 429 while the replacement starts; web never drops below 5."""

    name = "rebuild-window-pdb"
    title = "rebuild-window-pdb"
    pdb_min_available = PDB_MIN_AVAILABLE

    def assess(self) -> None:
        w = self.window()
        gone = self.evicted_uids()
        refused = {p: c for p, c in self.v.refused_by_api.items() if 429 in c}
        logged = [
            d.name for d in self.v.decisions if d.fate == Fate.REFUSED and d.status_code == 429
        ]
        self.v.extra.setdefault("notes", []).append(f"evicted {gone}; 429s {refused}; {w.line()}")
        self.r.check(
            "api-server-said-429",
            "the API server refused the evictions the PDB forbids with 429 (its audit log) "
            "and the descheduler logged each refusal",
            bool(refused) and bool(logged),
            f"audit 429s {refused}; logged 429s {logged}; "
            f"audit {'read' if self.v.audit.get('available') else 'unavailable'}",
        )
        allowed = REPLICAS - PDB_MIN_AVAILABLE
        self.r.check(
            "evictions-within-budget",
            f"at most {allowed} eviction(s) admitted (the PDB's disruptionsAllowed)",
            1 <= len(gone) <= allowed,
            f"evicted {gone}",
        )
        self.r.check(
            "capacity-held-at-min-available",
            f"web never had fewer than minAvailable={PDB_MIN_AVAILABLE} available",
            w.min_available >= PDB_MIN_AVAILABLE,
            w.line(),
        )
        self.r.pdb_kept_healthy(self.v.rec)
        self.e.replaced(self.final, workload="web", count=len(gone))
        self.e.nothing_pending(self.final)
