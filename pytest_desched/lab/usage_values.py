"""Declared usage as values: the kwok pod annotations a usage becomes, checked when declared.

A kwok pod uses what its annotations say (kwok v0.8.0 `kustomize/metrics/usage`:
`kwok.x-k8s.io/usage-cpu` and `-memory`, 1m and 1Mi without them). Apart from `usage.py`
(the lab's steps) so `workloads.py` can render them without importing the lab.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_desched.lab.values import check_quantity, config_error

# kwok v0.8.0 kustomize/metrics/usage/usage-from-annotation.yaml
USAGE_ANNOTATIONS = {"cpu": "kwok.x-k8s.io/usage-cpu", "memory": "kwok.x-k8s.io/usage-memory"}
METRICS_GROUP, METRICS_VERSION = "metrics.k8s.io", "v1beta1"


def check_usage(what: str, usage: Any) -> dict[str, str]:
    """`usage` as {resource: quantity}, cpu and memory only; a bad one fails here."""
    if not isinstance(usage, Mapping):
        raise config_error(
            what, "usage must be a mapping", "pass e.g. {'cpu': '800m', 'memory': '1Gi'}"
        )
    unknown = sorted(set(usage) - set(USAGE_ANNOTATIONS))
    if unknown:
        raise config_error(what, f"usage of {unknown}: kwok emulates cpu and memory", "drop them")
    return {str(k): check_quantity(f"{what} usage[{k}]", v) for k, v in usage.items()}


def usage_annotations(usage: Mapping[str, str]) -> dict[str, str]:
    """The pod annotations kwok reads `usage` from."""
    return {USAGE_ANNOTATIONS[k]: v for k, v in usage.items()}


def parse_cpu_m(value: str) -> int:
    """A CPU quantity in millicores ("250m", "1", "1500000n")."""
    from kubernetes.utils.quantity import parse_quantity

    return int(parse_quantity(value) * 1000)


def parse_bytes(value: str) -> int:
    from kubernetes.utils.quantity import parse_quantity

    return int(parse_quantity(value))
