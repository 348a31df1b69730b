"""Numeric bounds a user gives on the command line, each checked by one rule before anything
changes (a one-line ConfigError, exit 2).

K, the number of descheduling cycles: `desched run --cycles K` (K Jobs from the suspended
CronJob) and `desched replay --rounds K` (K rounds on the restored snapshot) are the same thing
to a user. The descheduler's client rate limits a replay may set (`--client-qps`,
`--client-burst`: its `--client-connection-qps/-burst`). Ground floor: imports only `errors`.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_desched.errors import ConfigError

MIN_CYCLES, MAX_CYCLES = 1, 50
# A loop is a pod coming back in a later cycle: one cycle cannot show one (evidence/loops.py).
MIN_LOOP_CYCLES = 2


def check_cycles(value: Any, name: str = "cycles") -> int:
    """K as an int in 1..50, or a one-line ConfigError (exit 2) naming `name` and the range."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{name} {value!r}: not a number; give K in {MIN_CYCLES}..{MAX_CYCLES}")
    try:
        k = int(value)
    except ValueError:
        raise ConfigError(
            f"{name} {value!r}: not a number; give K in {MIN_CYCLES}..{MAX_CYCLES}"
        ) from None
    if not MIN_CYCLES <= k <= MAX_CYCLES:
        raise ConfigError(
            f"{name} {k}: out of range; give K in {MIN_CYCLES}..{MAX_CYCLES} "
            "(each is one descheduling cycle)"
        )
    return k


# The descheduler's API client: what a replay may set in place of its own limits (unset, its
# client-go defaults apply: 5 requests/s, burst 10).
MAX_CLIENT_QPS, MAX_CLIENT_BURST = 10_000, 100_000
CLIENT_FLAGS = {"qps": "client-connection-qps", "burst": "client-connection-burst"}


def check_client_rate(qps: Any = None, burst: Any = None) -> dict[str, float | int]:
    """`--client-qps` (a number in (0, 10000]) and `--client-burst` (an integer in 1..100000),
    as given: {} when neither is, else the ones given. A one-line ConfigError otherwise."""
    out: dict[str, float | int] = {}
    if qps is not None:
        try:
            q = float(qps) if not isinstance(qps, bool) else math.nan
        except (TypeError, ValueError):
            q = math.nan
        if not (math.isfinite(q) and 0 < q <= MAX_CLIENT_QPS):
            raise ConfigError(
                f"--client-qps {qps!r}: give requests per second, a number above 0 and at most "
                f"{MAX_CLIENT_QPS} (the descheduler's --client-connection-qps)"
            )
        out["qps"] = int(q) if q.is_integer() else q
    if burst is not None:
        ok = not isinstance(burst, bool) and isinstance(burst, int | str)
        try:
            b = int(burst) if ok else 0
        except ValueError:
            b = 0
        if not 1 <= b <= MAX_CLIENT_BURST:
            raise ConfigError(
                f"--client-burst {burst!r}: give an integer from 1 to {MAX_CLIENT_BURST} "
                "(the descheduler's --client-connection-burst)"
            )
        out["burst"] = b
    if "qps" in out and "burst" not in out:  # the descheduler's client-go refuses it at start
        raise ConfigError(
            f"--client-qps {qps!r} without --client-burst: the descheduler exits at start "
            "('burst is required to be greater than 0 ... when QPS is set'); give both"
        )
    return out


def cycles_to_run(requested: int, default: int) -> int:
    """K a multi-cycle run makes: the caller's K when above 1, else the experiment's default."""
    return requested if requested > 1 else max(MIN_CYCLES, default)


def check_no_loop(
    k: int, experiment: str, no_loop_flag: str = "--no-loop", cycles_flag: str = "--cycles"
) -> None:
    """`--no-loop` over K cycles, or a one-line ConfigError (exit 2) before any cluster: a
    "no loop" answer from fewer than MIN_LOOP_CYCLES cycles could not have seen a loop."""
    if k < MIN_LOOP_CYCLES:
        raise ConfigError(
            f"{no_loop_flag} with {k} cycle(s) of {experiment}: a loop is a pod evicted again "
            f"in a later cycle, which {k} cycle(s) cannot show; give {cycles_flag} >= "
            f"{MIN_LOOP_CYCLES}"
        )
