"""The runbook's DeschedulerPolicy: one value type, the descheduler's own verdict on it, the safety
rules every policy obeys, and the scoping that holds it to a lab.

The package is split by concern so each part can change alone: :mod:`.model` (the
:class:`Policy` value: parsing, digests, overrides, accessors), :mod:`.checker` (the
``policycheck`` helper built against the descheduler under test: its verdict, the effective
policy, and the facts of its policy API; Python keeps no schema tables), :mod:`.lint` (the
runbook's rules on top, ``desched lint``; its rules in :mod:`.lint_rules`, its output and verdict
in :mod:`.lint_output`, Helm values rendered by the pinned chart in :mod:`.values`), :mod:`.safety` (no inline credentials, no template
markers), :mod:`.scope` (:class:`PolicyScope` for existing clusters) and :mod:`.paths` (the path
grammar problems and overrides share). Import from here; the names below are the package's
public API.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.descheduler.policy.checker import (
    CheckResult,
    DeschedulerFacts,
    PluginFacts,
    PolicyChecker,
    checker_for,
    facts_for,
)
from pytest_desched.descheduler.policy.model import (
    DEFAULT_POLICY_FILE,
    Policy,
    canonical_json,
    digest_of_rendered,
    load_default,
)
from pytest_desched.descheduler.policy.scope import PolicyScope, check_policy_scope, scope_policy
from pytest_desched.errors import PolicyError

__all__ = [
    "DEFAULT_POLICY_FILE",
    "NAMESPACED_PLUGINS",
    "CheckResult",
    "DeschedulerFacts",
    "PluginFacts",
    "Policy",
    "PolicyChecker",
    "PolicyError",
    "PolicyScope",
    "canonical_json",
    "check_policy_scope",
    "checker_for",
    "digest_of_rendered",
    "facts_for",
    "load_default",
    "scope_policy",
]


def __getattr__(name: str) -> Any:
    """``NAMESPACED_PLUGINS``: the pinned descheduler's plugins with a namespace include list,
    asked from its own code on first use (``facts_for().namespaced_plugins``)."""
    if name == "NAMESPACED_PLUGINS":
        return facts_for().namespaced_plugins
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
