"""The runbook's experiments: the framework, and one module per built-in experiment.

Importing this package registers the built-ins; a user's experiment registers itself the
same way, by subclassing `Experiment` with a `name` in a module of its own.
"""

from __future__ import annotations

from pytest_desched.experiments import minpodage, nodefit, pdb, positive
from pytest_desched.experiments.framework import (
    BUG_1882,
    REGISTRY,
    VARIANTS,
    Check,
    Experiment,
    ExperimentContext,
    ExperimentFailed,
    ExperimentResult,
    KnownUpstreamBug,
    RoundView,
    Runner,
    lab_policy,
    lookup,
    run_experiment,
)

__all__ = [
    "BUG_1882",
    "REGISTRY",
    "VARIANTS",
    "Check",
    "Experiment",
    "ExperimentContext",
    "ExperimentFailed",
    "ExperimentResult",
    "KnownUpstreamBug",
    "RoundView",
    "Runner",
    "lab_policy",
    "lookup",
    "minpodage",
    "nodefit",
    "pdb",
    "positive",
    "run_experiment",
]
