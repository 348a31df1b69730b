"""`StrategyExperiment`: an experiment with its own one-strategy policy, as upstream's e2e builds.

The runbook experiments run the runbook's policy (a variant of it). A strategy experiment
runs a policy of its own, shaped like the descheduler's test/e2e policies: one profile, the
strategy's args (scoped to the lab namespace where the strategy can be), the DefaultEvictor
args the experiment needs, a total cap as a safety net and event notification on. The
policy replaces the context's before the framework applies it, so the framework's one
policy step (`apply_policy(policy, dry_run=False)`, explicitly) runs it, and records, the
ledger and the result all carry the experiment's own name and `[own-policy]`.

A caller's overrides (`desched_experiment(..., overrides={...})`) are replayed onto it,
recorded with their reasons; a caller's whole policy (`policy=...`) is used as given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pytest_desched.descheduler.policy import Policy, scope_policy
from pytest_desched.descheduler.policy.release_fields import is_release_reading
from pytest_desched.errors import ConfigError
from pytest_desched.experiments.assertions import Expect
from pytest_desched.experiments.declared import Experiment
from pytest_desched.experiments.framework import lab_policy

if TYPE_CHECKING:
    from pytest_desched.experiments.framework import ExperimentContext, RoundView
    from pytest_desched.lab.snapshot import Snapshot

# Where each strategy plugs in (descheduler v0.36.0 framework/plugins/*/register + types).
EXTENSION_POINTS = {
    "RemoveDuplicates": "balance",
    "RemovePodsViolatingTopologySpreadConstraint": "balance",
    "LowNodeUtilization": "balance",
    "HighNodeUtilization": "balance",
    "RemovePodsViolatingNodeAffinity": "deschedule",
    "RemovePodsViolatingNodeTaints": "deschedule",
    "RemovePodsViolatingInterPodAntiAffinity": "deschedule",
    "PodLifeTime": "deschedule",
    "RemoveFailedPods": "deschedule",
    "RemovePodsHavingTooManyRestarts": "deschedule",
}
# Plugins whose args take `namespaces: {include: [...]}`; the utilization plugins only take
# `evictableNamespaces: {exclude: [...]}`.
NAMESPACED = {p for p in EXTENSION_POINTS if not p.endswith("NodeUtilization")}
SAFETY_CAP = 10  # maxNoOfPodsToEvictTotal: no lab round evicts more, whatever goes wrong
OWN_POLICY = "own-policy"  # the variant label of an experiment that runs its own policy


def strategy_policy(
    strategy: str,
    args: dict[str, Any],
    evictor: dict[str, Any] | None = None,
    *,
    cap: int | None = SAFETY_CAP,
) -> Policy:
    """A one-profile DeschedulerPolicy for `strategy` (upstream e2e's shape), not yet validated."""
    if strategy not in EXTENSION_POINTS:
        raise ConfigError(
            f"strategy {strategy!r} is not one of {sorted(EXTENSION_POINTS)}; check the spelling"
        )
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "evictionFailureEventNotification": True,
        "profiles": [
            {
                "name": f"lab-{strategy}",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": dict(evictor or {})},
                    {"name": strategy, "args": dict(args)},
                ],
                "plugins": {EXTENSION_POINTS[strategy]: {"enabled": [strategy]}},
            }
        ],
    }
    if cap is not None:
        doc["maxNoOfPodsToEvictTotal"] = cap
    return Policy.from_dict(doc, source=f"<{strategy} lab policy>")


class StrategyExperiment(Experiment):
    """An experiment that runs its own policy for one strategy; subclasses declare steps.

    Set `strategy` and override `strategy_args()` / `evictor_args()` (or `policy()` for a
    whole policy of your own). `self.round()` runs one round named after the experiment;
    `self.expect(view)` gives the ready-made assertions bound to it and files the round's
    ledger beside its record.
    """

    strategy: ClassVar[str] = ""
    upstream: ClassVar[str] = ""  # the test in sigs.k8s.io/descheduler test/e2e it mirrors
    # The framework needs one of its variants to build a context; the policy replaces it.
    default_variant = "pdb-lister-workaround"

    own_policy_label = OWN_POLICY

    def policy_for(self, ctx: ExperimentContext) -> Policy | None:
        if ctx.policy_label is not None:  # a caller's whole policy is used as given
            return None
        return self._own_policy(ctx)

    # -- the policy ------------------------------------------------------------------------
    def strategy_args(self) -> dict[str, Any]:
        """The strategy's args; the default scopes a namespaced strategy to the lab."""
        return self.lab_scope()

    def evictor_args(self) -> dict[str, Any]:
        """DefaultEvictor args (default: the v0.36.0 defaults)."""
        return {}

    def policy(self) -> Policy:
        return strategy_policy(self.strategy, self.strategy_args(), self.evictor_args())

    def lab_scope(self) -> dict[str, Any]:
        """Args that keep the strategy in the lab: `namespaces.include`, or for the
        utilization plugins `evictableNamespaces.exclude` of every other namespace."""
        if self.strategy in NAMESPACED:
            return {"namespaces": {"include": [self.ctx.namespace]}}
        others = sorted(
            n.metadata.name
            for n in self.ctx.cluster.core.list_namespace().items
            if n.metadata.name != self.ctx.namespace
        )
        return {"evictableNamespaces": {"exclude": others}}

    def _own_policy(self, ctx: ExperimentContext) -> Policy:
        """This experiment's policy, with the caller's overrides replayed and the cluster's
        scope rule applied, validated before anything changes."""
        base = lab_policy(self.default_variant, self.keep_min_pod_age)
        base = scope_policy(ctx.cluster, base, ctx.namespace)
        ours = {(o["path"], repr(o["new"]), o["why"]) for o in base.overrides}
        pol = self.policy()
        for o in ctx.policy.overrides:
            if is_release_reading(o):  # the context's policy in its release's fields: not ours
                continue
            if (o["path"], repr(o["new"]), o["why"]) not in ours:
                pol = pol.override(o["path"], o["new"], why=o["why"])
        pol = scope_policy(ctx.cluster, pol, ctx.namespace)
        return pol.validate()

    # -- steps' helpers ----------------------------------------------------------------------
    @property
    def workers(self) -> list[str]:
        return list(self.ctx.cluster.workers)

    def round(self, suffix: str = "") -> RoundView:
        """One round, its Job named after the experiment (`descheduler-<name>[-suffix]`)."""
        name = f"descheduler-{self.name}" + (f"-{suffix}" if suffix else "")
        return self.r.run_round(name[:52])

    def expect(self, view: RoundView, after: Snapshot | None = None) -> Expect:
        """The assertions bound to `view`; the round's per-pod ledger goes to the evidence."""
        exp = Expect(self.r, view, after)
        view.extra.setdefault("notes", []).append(
            "ledger: " + "; ".join(r.short() for r in exp.ledger.pods)
        )
        if self.ctx.evidence is not None:
            self.ctx.evidence.write_json(
                self.r.label, f"{view.rnd.name}-ledger", exp.ledger.to_dict()
            )
        return exp

    def settle(self, *workloads: Any) -> Snapshot:
        """After a round: wait until the workloads are back to their Ready count."""
        return self.lab.wait_settled(*workloads, timeout=self.ctx.recovery_timeout)
