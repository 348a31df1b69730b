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


# The kinds of lab workload (lab.workloads: Workload's subclasses), named here so this module
# needs none of them; a unit test keeps the two equal.
WORKLOAD_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job", "Pod"}
)


def is_workload(value: Any) -> bool:
    """A lab workload object (its class's `kind` is one of WORKLOAD_KINDS)."""
    return not isinstance(value, str) and getattr(type(value), "kind", None) in WORKLOAD_KINDS


def workload_name(value: Any, where: str) -> str | None:
    """The workload a `workload=` argument means: a name as given, or a lab workload's own.

    A lab object is accepted wherever its name is; any other object is refused here with the
    fix, rather than selecting no pod and failing as "no such pod" later.
    """
    if value is None or isinstance(value, str):
        return value
    if is_workload(value):
        return str(value.name)
    raise TypeError(
        f"{where}: a {type(value).__name__} is not a workload; pass the workload's name (a str) "
        "or the lab workload itself, e.g. Deployment('web', ...)"
    )


def pod_names(value: Any, where: str) -> list[str] | None:
    """The pod names a `pods=` argument means: names, or lab `Pod` objects (a bare pod's name
    is its pod's); a single string or a controller is refused with the fix."""
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{where}: pods= takes a list of pod names; pass [{value!r}]")
    names = []
    for v in value:
        if isinstance(v, str):
            names.append(v)
        elif getattr(type(v), "kind", None) == "Pod":
            names.append(str(v.name))
        else:
            fix = "pass workload= for a controller's pods" if is_workload(v) else "pass names"
            raise TypeError(f"{where}: pods= holds a {type(v).__name__}; {fix}")
    return names


def node_name(value: Any, where: str) -> str:
    """A node argument: the node's name (the lab holds no node objects; `cluster.workers`
    lists the names). Anything else is refused with the fix, before any cluster call."""
    if isinstance(value, str):
        return value
    raise TypeError(
        f"{where}: a node is named by a str, got a {type(value).__name__}; pass its name"
    )
