"""The lab's names and the checks on its inputs, run before any cluster change.

The label keys and values the lab sets (and the runbook's policy selects on), and the
namespaces a lab must never use (`names.RESERVED_NAMESPACES`), live here with `check_lab_inputs`:
pure checks with no cluster object, so the config and the session reject a bad namespace,
node or replica count (LabInputError naming the fix) before anything on a cluster changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_desched.errors import ConfigError, LabInputError
from pytest_desched.names import check_namespace

POOL_LABEL = "descheduler.example.com/pool"
POOL_VALUE = "rebalance-lab"
# Pods the lab lets a policy evict opt in with this label (the runbook policy selects it);
# not the existing provider's node opt-in (providers.base.NODE_OPT_IN_LABEL).
EVICTABLE_LABEL = "descheduler.example.com/enabled"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "pytest-desched"


class LabConfigError(LabInputError, ConfigError):
    """A lab object or lab step input refused before any cluster change (names the fix).

    Both a LabInputError (the lab's own family) and a ConfigError (what front ends turn into
    a usage error), so callers catching either see it.
    """


def check_lab_inputs(
    workers: Sequence[str],
    *,
    namespace: Any,
    source: Any,
    target: Any,
    replicas: Any,
    release_namespace: str | None = None,
) -> tuple[str, str, str, int]:
    """Every input of an experiment's lab checked at once, before any cluster change.

    Returns (namespace, source, target, replicas); LabInputError names the input and the fix.
    """
    ns = check_namespace(namespace, release_namespace)
    for what, node in (("source", source), ("target", target)):
        if node not in workers:
            raise LabInputError(
                f"{what} node {node!r} is not a lab worker of this cluster; use one of "
                f"{list(workers)}"
            )
    if source == target:
        raise LabInputError(f"source and target nodes must differ (both {source!r})")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise LabInputError(f"replicas must be an integer >= 1, got {replicas!r}")
    return ns, source, target, replicas
