"""The one vocabulary of what happened to a pod in a round, and which link of the chain decided.

Every use (an experiment's round, a replay, a canary, the dry-run fidelity check) speaks it, so
"evicted" or "no strategy picked it" means one thing wherever it is read. A fate always names
the *layer* that allowed or stopped the eviction, because the runbook's question is never just
"was it evicted" but "which link decided".
"""

from __future__ import annotations

from enum import StrEnum

# Words that once named a fate and now name another one (read from old evidence or results).
_ALIASES = {
    "not-selected": "not-picked",  # experiments' ledger until 0.1.0
    "untouched": "not-picked",  # the fidelity comparison until 0.1.0
    "evict": "evicted",  # the fidelity comparison until 0.1.0 (dry run's prediction included)
}


class Fate(StrEnum):
    """A pod's fate in one round: what the log decided, or why it decided nothing."""

    # What the descheduler's log decided about the pod.
    EVICTED = "evicted"  # eviction API call succeeded
    DRY_RUN = "dry-run"  # would be evicted; dry run sends it to an in-memory client
    REFUSED = (
        "refused"  # the API server answered the eviction with an error (429 PDB, 403 RBAC, ...)
    )
    LIMITED = "limited"  # a maxNoOfPodsToEvict* cap stopped it before any API call
    FILTERED = "filtered"  # DefaultEvictor Filter rejected it (checks listed)
    NODEFIT = "nodefit"  # DefaultEvictor PreEvictionFilter: fits no other node
    ERROR = "error"  # any other failure tied to the pod
    # No decision in the log, and why.
    NOT_PICKED = "not-picked"  # no strategy selected the pod (layer policy)
    UNDECIDED = "undecided"  # no decision, in a cycle the total cap stopped early (inferred)
    ROUND_SKIPPED = "round-skipped"  # the round ran no cycle (fewer than 2 ready nodes, ...)
    # A replay's pod that was not there to decide.
    NOT_RESTORED = "not-restored"  # the replay could not restore it
    GONE = "gone"  # evicted in an earlier round
    NEW = "new"  # created after this round (a replacement, a later pod)
    ABSENT = "absent"  # not there yet at this round (made by a later round's action)

    @classmethod
    def _missing_(cls, value: object) -> Fate | None:
        """An old word for a fate reads as today's (`Fate("not-selected")` is NOT_PICKED)."""
        alias = _ALIASES.get(str(value))
        return cls(alias) if alias else None


# The fates a descheduler log line can state; the rest say why no line decided the pod.
DECIDED = (
    Fate.EVICTED,
    Fate.DRY_RUN,
    Fate.REFUSED,
    Fate.LIMITED,
    Fate.FILTERED,
    Fate.NODEFIT,
    Fate.ERROR,
)
# An eviction was made, or would have been (a dry run's prediction).
EVICTIONS = (Fate.EVICTED, Fate.DRY_RUN)
# How far along the chain a fate got (EVICTED 7 .. ERROR 1, no decision 0); the furthest wins
# when a pod has several decisions.
FATE_RANK: dict[Fate, int] = {
    Fate.EVICTED: 7,
    Fate.DRY_RUN: 6,
    Fate.REFUSED: 5,
    Fate.LIMITED: 4,
    Fate.NODEFIT: 3,
    Fate.FILTERED: 2,
    Fate.ERROR: 1,
}


class Layer(StrEnum):
    """The link of the runbook's chain that produced a fate."""

    POLICY = "policy"  # the strategy picked (or did not pick) the pod
    EVICTOR_FILTER = (
        "evictor-filter"  # DefaultEvictor Filter (protections, labelSelector, minPodAge...)
    )
    EVICTOR_NODEFIT = "evictor-prefilter-nodefit"  # DefaultEvictor PreEvictionFilter (nodeFit)
    LIMITS = "eviction-limits"  # maxNoOfPodsToEvictPerNode/Namespace/Total
    API_SERVER = "api-server"  # eviction subresource: PDB (429), RBAC (403), ...
    DRY_RUN = "dry-run"  # fake client: nothing reached the API server
    CONTROLLER = "controller"  # evicted, but the owner created no replacement
    SCHEDULER = "scheduler"  # evicted and replaced, but the replacement stayed Pending
    # The descheduler's identity: a list its ClusterRole does not grant, an informer that never
    # syncs, no cycle (a round stopped at its timeout, known_bugs.hang_cause; not in CHAIN:
    # no pod's fate reaches it)
    RBAC = "rbac"
    # The utilization plugins' metrics source: no usage for a node, so the balance extension
    # point failed and no pod was picked (the descheduler's own error line proves it:
    # descheduler/metrics_layer.py; not in CHAIN: it stops the round before any pod's fate)
    METRICS = "metrics"


# The runbook's chain in order. A pod reaches a later link only by passing the earlier ones,
# so the furthest link any lab pod reached is the one that decided the round; earlier
# refusals are bystanders (pods of other owners filtered by the evictor).
CHAIN = (
    Layer.POLICY,
    Layer.EVICTOR_FILTER,
    Layer.EVICTOR_NODEFIT,
    Layer.LIMITS,
    Layer.API_SERVER,
    Layer.CONTROLLER,
    Layer.SCHEDULER,
)

FATE_LAYER = {
    Fate.EVICTED: Layer.API_SERVER,
    Fate.DRY_RUN: Layer.DRY_RUN,
    Fate.REFUSED: Layer.API_SERVER,
    Fate.LIMITED: Layer.LIMITS,
    Fate.FILTERED: Layer.EVICTOR_FILTER,
    Fate.NODEFIT: Layer.EVICTOR_NODEFIT,
    Fate.ERROR: Layer.POLICY,
    Fate.NOT_PICKED: Layer.POLICY,
}

# The deciding-layer label of an evicted pod (a round verdict's `label`): the API server let
# it through, which a bare `api-server` (a refusal) would not say.
EVICTED_LABEL = f"{Layer.API_SERVER.value}(evicted)"


def deciding_label(fate: Fate | str, layer: Layer | str | None) -> str:
    """The deciding layer as round verdicts label it: `api-server(evicted)` for an eviction,
    the layer's name otherwise (`policy` for a pod no strategy picked)."""
    if fate == Fate.EVICTED:
        return EVICTED_LABEL
    if layer is None:
        return Layer.POLICY.value if fate == Fate.NOT_PICKED else ""
    return str(layer)


__all__ = [
    "CHAIN",
    "DECIDED",
    "EVICTED_LABEL",
    "EVICTIONS",
    "FATE_LAYER",
    "FATE_RANK",
    "Fate",
    "Layer",
    "deciding_label",
]
