"""The one bound on K, the number of descheduling cycles a run or a replay may ask for.

`desched run --cycles K` (K Jobs from the suspended CronJob) and `desched replay --rounds K`
(K rounds on the restored snapshot) are the same thing to a user, so one rule checks both,
before anything changes. Ground floor: imports only `errors`.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.errors import ConfigError

MIN_CYCLES, MAX_CYCLES = 1, 50


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
