"""A workload's termination grace as values: the pod spec and annotation it becomes.

On the embedded cluster kwok removes a deleted (evicted) pod at once: no kubelet waits out
`terminationGracePeriodSeconds`, so a rebuild window never holds a Terminating pod. A
workload that declares `termination_grace_seconds` gets that grace in its pod spec and an
annotation that opts its pods into the `pod-delete-graceful` kwok Stage
(manifests/kwok-stages.yaml): the pod stays Terminating until its `deletionTimestamp`,
which the API server sets to the deletion's time plus the grace (kwok v0.8.0
lifecycle/value_duration_from.go: a `durationFrom` that reads an RFC 3339 time delays until
it). Pods without the annotation are removed at once, as before, whatever their grace.

On kind (and an existing cluster) the kubelet honours the grace itself and the annotation
does nothing; the pause image exits on SIGTERM, so its pods go at once there.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.lab.values import config_error

GRACE_ANNOTATION = "desched.pytest.io/honour-termination-grace"
MAX_GRACE_S = 600  # a lab round's recovery wait is minutes, not hours


def check_grace(what: str, seconds: Any, grace_period: Any) -> int:
    """`termination_grace_seconds` as whole seconds in 0..MAX_GRACE_S, not set twice."""
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= MAX_GRACE_S:
        raise config_error(
            what,
            f"termination_grace_seconds={seconds!r} is not whole seconds in 0..{MAX_GRACE_S}",
            "pass e.g. 20",
        )
    if seconds and grace_period is not None:
        raise config_error(
            what,
            f"termination_grace_seconds={seconds} and grace_period={grace_period} both set "
            "terminationGracePeriodSeconds",
            "declare termination_grace_seconds only (it also makes kwok honour the grace)",
        )
    return seconds


def grace_annotations(seconds: int) -> dict[str, str]:
    """The pod annotation kwok's `pod-delete-graceful` Stage selects; none without grace."""
    return {GRACE_ANNOTATION: "true"} if seconds > 0 else {}
