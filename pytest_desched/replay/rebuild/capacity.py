"""Whether this machine can restore a snapshot: a fixed base plus the measured memory an
object costs, against the memory available, checked before anything starts.

The cost is measured, not guessed (bench/RESULTS.md, "The largest incident"): the peak resident
memory summed over every process a replay runs (kube-apiserver, controller manager,
scheduler, etcd, kwok, stand-in kubelet, descheduler and the replaying process) was 2,343 MiB
for the generated 1,000-node / 10,000-pod cluster (15,482 objects) and 13,460 MiB for 10,000
nodes / 100,000 pods (156,206 objects) before its round. The line through both is
``BASE_MIB`` + ``KIB_PER_OBJECT`` per object; both constants are rounded up from it, so the
estimate stays on the safe side at both sizes (2.4 and 14.7 GiB). The old flat 197 KiB per
object (one 10,000-pod point) refused 10,000 / 100,000 at 29.3 GiB, twice what it takes. A
snapshot whose estimate exceeds the memory available is refused (exit 2) with both numbers,
instead of a machine that swaps for an hour or an OOM kill halfway through a restore.

Every side can be set: ``DESCHED_REPLAY_BASE_MIB`` and ``DESCHED_REPLAY_KIB_PER_OBJECT``
(another machine's measurement) and ``DESCHED_REPLAY_MEMORY_MIB`` (the budget; default the
kernel's MemAvailable).
"""

from __future__ import annotations

import os

from pytest_desched.errors import InputError
from pytest_desched.replay.capture.format import Snapshot

__all__ = ["BASE_MIB", "KIB_PER_OBJECT", "check_capacity", "estimate_bytes"]

BASE_MIB = 1024  # the control plane and our process with next to nothing restored
KIB_PER_OBJECT = 92  # (13,460 - 2,167) MiB / (156,206 - 15,482) objects = 82, with a margin
_BASE_ENV = "DESCHED_REPLAY_BASE_MIB"
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


def base_mib() -> float:
    return _env_number(_BASE_ENV) or BASE_MIB


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
    return objects, int((base_mib() * 1024 + objects * kib_per_object()) * 1024)


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
        f"{objects:,} objects{times} need about {_gib(need)} to restore ({_gib(base_mib() * 1024**2)}"
        f" + {kib_per_object():g} KiB per object, measured: bench/RESULTS.md), more than the "
        f"{_gib(have)} available "
        f"({'set by ' + _BUDGET_ENV if os.environ.get(_BUDGET_ENV) else 'MemAvailable'})",
        "take the snapshot with --namespace for fewer objects, run on a bigger machine, or set "
        f"{_BASE_ENV} / {_PER_OBJECT_ENV} / {_BUDGET_ENV} from your own measurement",
    )
