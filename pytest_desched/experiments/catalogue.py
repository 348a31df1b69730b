"""What `desched list` shows: each registered experiment, what it proves, how it can run.

Read from the registry and the experiments' own declarations (docstring, variants, the
strategy a strategy experiment declares, the plugins the runbook policy enables), so a new
experiment is listed as soon as it registers. Needs no cluster and no built tool.
"""

from __future__ import annotations

import inspect
from typing import Any

from pytest_desched.descheduler.policy.model import DEFAULT_POLICY_FILE, Policy
from pytest_desched.experiments.declared import REGISTRY, Experiment
from pytest_desched.experiments.framework import VARIANTS
from pytest_desched.experiments.strategies.base import OWN_POLICY, StrategyExperiment
from pytest_desched.tools.resources import manifest_path

_EXTENSION_POINTS = ("deschedule", "balance")


def _runbook_strategies() -> list[str]:
    """The strategies the runbook policy enables (deschedule and balance plugins), as written
    (read, not validated: validating needs the policy checker, a Go build on a fresh cache)."""
    out: list[str] = []
    for prof in Policy.load(manifest_path(DEFAULT_POLICY_FILE)).to_dict().get("profiles") or []:
        plugins = prof.get("plugins") or {}
        for ep in _EXTENSION_POINTS:
            out += [p for p in (plugins.get(ep) or {}).get("enabled") or [] if p not in out]
    return out


def describe(cls: type[Experiment], runbook: list[str] | None = None) -> dict[str, Any]:
    """One experiment's row: name, title, one-line description, variants, strategies."""
    doc = inspect.getdoc(cls) or ""
    if isinstance(cls, type) and issubclass(cls, StrategyExperiment):
        variants, strategies = [OWN_POLICY], [cls.strategy]
    else:
        variants = list(VARIANTS)
        strategies = runbook if runbook is not None else _runbook_strategies()
    return {
        "name": cls.name,
        "title": cls.title,
        "description": doc.split("\n\n", 1)[0].replace("\n", " ").strip(),
        "default_variant": cls.default_variant,
        "variants": variants,
        "strategies": strategies,
        "module": cls.__module__,
    }


def catalogue() -> list[dict[str, Any]]:
    """Every registered experiment (built-ins, then the user's in registration order)."""
    runbook = _runbook_strategies()
    return [describe(cls, runbook) for cls in REGISTRY.values()]
