"""Whether this machine can restore a snapshot: its object count times the measured memory
an object costs, against the memory available, checked before anything starts.

The cost is measured, not guessed: bench/RESULTS.md's 1,000-node / 10,000-pod replay peaked
at 2,115 MiB resident over every process it ran (kube-apiserver 760, controller manager 363,
scheduler 183, descheduler 170, etcd 101, kwok 77, stand-in kubelet 131, the replay process
330), for about 11,000 objects: ``KIB_PER_OBJECT`` = 197 KiB. Its 50,000-pod stretch run
stayed under that rate, so the bound is on the safe side. A snapshot whose estimate exceeds
the memory available is refused (exit 2) with both numbers, instead of a machine that swaps
for an hour or an OOM kill halfway through a restore.

Both sides can be set: ``DESCHED_REPLAY_KIB_PER_OBJECT`` (another machine's measurement) and
``DESCHED_REPLAY_MEMORY_MIB`` (the budget; default the kernel's MemAvailable).
"""

from __future__ import annotations

import os

from pytest_desched.errors import InputError
from pytest_desched.replay.format import Snapshot

__all__ = ["KIB_PER_OBJECT", "check_capacity", "estimate_bytes"]

KIB_PER_OBJECT = 197  # 2,115 MiB / ~11,000 objects (bench/RESULTS.md, 10,000-pod replay)
_PER_OBJECT_ENV = "DESCHED_REPLAY_KIB_PER_OBJECT"
_BUDGET_ENV = "DESCHED_REPLAY_MEMORY_MIB"


def _env_number(name: str) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InputError(name, "", f"{raw!r} is not a number", "set a positive number") from None
    if not value > 0:
        raise InputError(name, "", f"{raw} is not positive", "set a positive number")
    return value


def kib_per_object() -> float:
    return _env_number(_PER_OBJECT_ENV) or KIB_PER_OBJECT


def available_bytes() -> int:
    """The budget: DESCHED_REPLAY_MEMORY_MIB, else the memory the kernel says is available."""
    budget = _env_number(_BUDGET_ENV)
    if budget is not None:
        return int(budget * 1024 * 1024)
    import psutil

    return int(psutil.virtual_memory().available)


def estimate_bytes(snap: Snapshot) -> tuple[int, int]:
    """(objects, estimated peak bytes) of restoring and replaying `snap` here."""
    objects = sum(1 for _ in snap.all_objects())
    return objects, int(objects * kib_per_object() * 1024)


def _gib(n: float) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def check_capacity(snap: Snapshot, source: str, copies: int = 1) -> None:
    """Refuse `snap` when its estimate exceeds the budget (one line with both numbers);
    `copies` restored at once (a snapshot canary's two tracks side by side)."""
    objects, need = estimate_bytes(snap)
    need *= copies
    have = available_bytes()
    if need <= have:
        return
    times = f" x {copies} clusters at once (--serial: one at a time)" if copies > 1 else ""
    raise InputError(
        source,
        "",
        f"{objects:,} objects{times} need about {_gib(need)} to restore at {kib_per_object():g} KiB "
        f"per object (measured, bench/RESULTS.md), more than the {_gib(have)} available "
        f"({'set by ' + _BUDGET_ENV if os.environ.get(_BUDGET_ENV) else 'MemAvailable'})",
        "take the snapshot with --namespace for fewer objects, run on a bigger machine, or set "
        f"{_PER_OBJECT_ENV} / {_BUDGET_ENV} from your own measurement",
    )
