"""The lab's names and the checks on its inputs, run before any cluster change.

The label keys and values the lab sets (and the runbook's policy selects on), and the
namespaces a lab must never use, live here with `check_namespace` and `check_lab_inputs`:
pure checks with no cluster object, so the config and the session reject a bad namespace,
node or replica count (LabInputError naming the fix) before anything on a cluster changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pytest_desched.errors import ConfigError, LabInputError

POOL_LABEL = "descheduler.example.com/pool"
POOL_VALUE = "rebalance-lab"
OPT_IN_LABEL = "descheduler.example.com/enabled"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "pytest-desched"
# Namespaces a lab must never be: the cluster's own, and `kube-` is reserved for Kubernetes.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class LabConfigError(LabInputError, ConfigError):
    """A lab object or lab step input refused before any cluster change (names the fix).

    Both a LabInputError (the lab's own family) and a ConfigError (what front ends turn into
    a usage error), so callers catching either see it.
    """


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def check_namespace(name: Any, release_namespace: str | None = None) -> str:
    """The lab namespace if it is one a lab may create; LabInputError naming the fix if not."""
    fix = "pick another with --desched-namespace (or namespace=...)"
    if not isinstance(name, str) or not name:
        raise LabInputError(f"lab namespace {name!r} must be a non-empty string; {fix}")
    reserved = {*RESERVED_NAMESPACES, *([release_namespace] if release_namespace else [])}
    if name in reserved or name.startswith("kube-"):
        raise LabInputError(
            f"lab namespace {name!r} is reserved ({', '.join(sorted(reserved))}, kube-*; the "
            f"release lives in {release_namespace or 'kube-system'}) and a lab deletes its "
            f"namespace afterwards; {fix}"
        )
    if len(name) > 63:
        raise LabInputError(
            f"lab namespace {name[:20]!r}... is {len(name)} characters; a namespace name has at "
            f"most 63 (RFC 1123 label); {fix}"
        )
    if not _DNS1123_LABEL.fullmatch(name):
        raise LabInputError(
            f"lab namespace {name!r} is not a valid RFC 1123 label (lower-case letters, digits "
            f"and '-', starting and ending with a letter or digit); {fix}"
        )
    return name


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
