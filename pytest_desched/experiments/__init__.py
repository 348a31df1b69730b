"""The runbook's experiments: the framework, and one module per built-in experiment.

Importing this package registers the built-ins; a user's experiment registers itself the
same way, by subclassing `Experiment` with a `name` in a module of its own.
"""

from __future__ import annotations

from pytest_desched.errors import ExperimentFailed, KnownUpstreamBug
from pytest_desched.experiments import assertions, minpodage, nodefit, pdb, positive, strategies
from pytest_desched.experiments.assertions import Expect, Ledger, require
from pytest_desched.experiments.declared import REGISTRY, Experiment, lookup, run_experiment
from pytest_desched.experiments.framework import (
    BUG_1882,
    VARIANTS,
    ExperimentContext,
    RoundView,
    Runner,
    lab_policy,
)
from pytest_desched.experiments.results import Check, ExperimentResult
from pytest_desched.experiments.strategies import (
    STRATEGY_EXPERIMENTS,
    StrategyExperiment,
    strategy_policy,
)

__all__ = [
    "BUG_1882",
    "REGISTRY",
    "STRATEGY_EXPERIMENTS",
    "VARIANTS",
    "Check",
    "Expect",
    "Experiment",
    "ExperimentContext",
    "ExperimentFailed",
    "ExperimentResult",
    "KnownUpstreamBug",
    "Ledger",
    "RoundView",
    "Runner",
    "StrategyExperiment",
    "assertions",
    "lab_policy",
    "lookup",
    "loops",
    "minpodage",
    "nodefit",
    "pdb",
    "positive",
    "rebuild",
    "require",
    "run_experiment",
    "strategies",
    "strategy_policy",
    "utilization",
    "utilization_legacy",
    "utilization_long_lived",
    "utilization_modes",
    "utilization_prometheus",
]

# After the runbook's and the strategies' experiments: `desched list` shows them in this order.
from pytest_desched.experiments import (
    loops,
    rebuild,
    utilization,
    utilization_legacy,
    utilization_long_lived,
    utilization_modes,
    utilization_prometheus,
)
