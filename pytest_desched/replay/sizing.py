"""How much memory a replay of a snapshot needs, from the per-object costs measured here, and
the refusal of one this machine cannot hold (before anything starts).

The costs are peak resident memory (VmHWM) per component, fitted as `base + per node x nodes
+ per pod x pods` through three replays of generated clusters (`bench/object_costs.py`,
2026-12-01: 200/2,000, 1,000/2,010 and 200/5,000 nodes/pods; see docs/replay-at-scale.md).
Checked against an independent run at 1,000 nodes / 10,000 pods (bench/RESULTS.md, issue 12):
the model says 767 MiB for kube-apiserver where 760 MiB was measured. The replaying process
itself holds the snapshot: 0.026 MiB per pod, from that run and the 50,000-pod one (330 and
1,350 MiB). At 50,000 pods the API server measured 3.07 GiB where the model says 2.5: the
estimate is a floor, so a replay is refused only when even the floor does not fit.
"""

from __future__ import annotations

from pathlib import Path

from pytest_desched.errors import ConfigError

# component -> (base MiB, MiB per node, MiB per pod)
COSTS_MIB: dict[str, tuple[float, float, float]] = {
    "kube-apiserver": (324.6, 0.0188, 0.0424),
    "kube-controller-manager": (115.8, 0.0334, 0.0243),
    "kube-scheduler": (80.4, 0.0019, 0.0078),
    "etcd": (60.1, 0.0077, 0.0051),
    "descheduler": (68.8, 0.0032, 0.0101),
    "kwok-controller": (93.6, 0.0, 0.0),
    "stand-in-kubelet": (65.1, 0.0, 0.0093),
    "replaying process": (205.1, 0.0, 0.026),
}


def estimate_mib(nodes: int, pods: int) -> dict[str, float]:
    """Peak MiB per component for a replay of `nodes` and `pods` (a floor; see above)."""
    return {k: round(b + n * nodes + p * pods, 1) for k, (b, n, p) in COSTS_MIB.items()}


def available_mib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """MemAvailable in MiB, or None where the kernel does not say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_fits(nodes: int, pods: int, source: str, available: float | None = None) -> float:
    """The estimated total MiB; ConfigError with the numbers when it exceeds what is free."""
    est = estimate_mib(nodes, pods)
    total = sum(est.values())
    free = available if available is not None else available_mib()
    if free is not None and total > free:
        top = ", ".join(f"{k} {v:.0f}" for k, v in sorted(est.items(), key=lambda kv: -kv[1])[:3])
        raise ConfigError(
            f"{source}: {nodes} nodes and {pods} pods need at least {total:.0f} MiB to replay "
            f"here ({top} MiB, ...), and this machine has {free:.0f} MiB available; trim the "
            "snapshot (--namespace when taking it) or replay on a bigger machine "
            "(docs/replay-at-scale.md)"
        )
    return total
