"""A workload's start-up time (image pull, cold start) as values: the pod annotations it becomes.

Without it a replacement on the embedded cluster is Ready about 0.03 s after it is created,
and the runbook's rebuild window (evictions succeed, capacity drops until the replacements
are Ready) does not exist. A workload declares `startup_seconds` (and optionally
`startup_jitter_seconds`); its pod template carries them as annotations, so every pod of it,
a replacement too, takes that long.

The embedded cluster's `pod-ready` kwok Stage (manifests/kwok-stages.yaml) reads them as its
delay (kwok v0.8.0 `StageDelay`: `durationFrom` is parsed with Go's `time.ParseDuration`;
`jitterDurationFrom` is the *upper* bound of a uniform pick between the two,
pkg/utils/lifecycle/lifecycle.go `Stage.Delay`). A pod without them is Ready at once, as
before. kwok restarts a pending delay when the pod changes (its stage job is replaced,
pkg/kwok/controllers/pod_controller.go), so a pod patched while starting starts later.

On kind (and an existing cluster) a real kubelet starts a real container: these annotations
do nothing there, and the window is the image's own start (the lab's pause image, preloaded:
about a second).
"""

from __future__ import annotations

import math
from typing import Any

from pytest_desched.lab.values import config_error

STARTUP_ANNOTATION = "desched.pytest.io/startup-delay"
STARTUP_JITTER_ANNOTATION = "desched.pytest.io/startup-delay-max"
MAX_STARTUP_S = 600.0  # a lab round's recovery wait is minutes, not hours


def check_startup(what: str, seconds: Any, jitter: Any) -> tuple[float, float]:
    """(seconds, jitter) as non-negative finite numbers within MAX_STARTUP_S together."""
    out = []
    for name, value in (("startup_seconds", seconds), ("startup_jitter_seconds", jitter)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise config_error(
                what, f"{name}={value!r} is not a number of seconds >= 0", "pass e.g. 15"
            )
        out.append(float(value))
    if out[0] + out[1] > MAX_STARTUP_S:
        raise config_error(
            what,
            f"startup {out[0]}s + jitter {out[1]}s exceeds {MAX_STARTUP_S:.0f}s",
            "declare a shorter start-up",
        )
    return out[0], out[1]


def _go_duration(seconds: float) -> str:
    """A Go `time.ParseDuration` string, to the millisecond: "15s", "2500ms"."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def startup_annotations(seconds: float, jitter: float = 0.0) -> dict[str, str]:
    """The pod annotations kwok's `pod-ready` Stage delays a pod by; none for an instant start."""
    if seconds <= 0 and jitter <= 0:
        return {}
    out = {STARTUP_ANNOTATION: _go_duration(seconds)}
    if jitter > 0:
        out[STARTUP_JITTER_ANNOTATION] = _go_duration(seconds + jitter)
    return out
