"""Built-in experiments for the descheduler's other strategies, one module per strategy.

Each runs its own one-strategy policy (`base.StrategyExperiment`), says in its docstring
which upstream test it mirrors, and checks real outcomes: UIDs and nodes, the deciding layer
from the descheduler's own log, and the API server's 201s from its audit log. Importing the
package registers them, like the runbook experiments.
"""

from __future__ import annotations

from pytest_desched.experiments.strategies import (
    antiaffinity,
    duplicates,
    failedpods,
    nodetaints,
    nodeutilization,
    podlifetime,
    toomanyrestarts,
    topologyspread,
)
from pytest_desched.experiments.strategies.base import (
    EXTENSION_POINTS,
    OWN_POLICY,
    StrategyExperiment,
    strategy_policy,
)

# The strategy experiments in the order a benchmark or a full run takes them.
STRATEGY_EXPERIMENTS = (
    "remove-duplicates",
    "topology-spread-hard",
    "topology-spread-soft",
    "node-taints",
    "node-taints-excluded",
    "inter-pod-anti-affinity",
    "pod-lifetime",
    "namespace-exclude",
    "failed-pods",
    "too-many-restarts",
    "low-node-utilization",
    "high-node-utilization",
)

__all__ = [
    "EXTENSION_POINTS",
    "OWN_POLICY",
    "STRATEGY_EXPERIMENTS",
    "StrategyExperiment",
    "antiaffinity",
    "duplicates",
    "failedpods",
    "nodetaints",
    "nodeutilization",
    "podlifetime",
    "strategy_policy",
    "toomanyrestarts",
    "topologyspread",
]
