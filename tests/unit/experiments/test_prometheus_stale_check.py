"""The stale-in-lookback fault's own check reads the ages the wait saw, not their rounding."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.experiments.utilization_prometheus import (
    FRESH_S,
    UtilizationPrometheusStaleInLookback,
)


def _made(ages: dict[str, float]) -> dict[str, bool]:
    exp: Any = UtilizationPrometheusStaleInLookback.__new__(UtilizationPrometheusStaleInLookback)
    made: dict[str, bool] = {}
    exp.r = SimpleNamespace(
        check=lambda cid, _what, ok, _detail: made.setdefault(cid, ok),
        ctx=SimpleNamespace(cluster=SimpleNamespace(workers=["w-1", "w-2"])),
    )
    exp.v = SimpleNamespace(extra={})
    exp.ages, exp.lookback_s = ages, 20.0
    exp.read_before = {"w-1": 0.76, "w-2": 0.01}
    exp.assess_stale = lambda v: None
    exp.assess()
    return made


@pytest.mark.parametrize(
    ("age", "ok"),
    [(FRESH_S + 0.03, True), (FRESH_S, False), (19.97, True), (20.0, False)],
)
def test_the_fault_check_reads_the_raw_ages(age: float, ok: bool) -> None:
    """4.03 s is older than the 4 s freshness (the wait's own test) though it shows as 4.0."""
    assert _made({"w-1": age, "w-2": 10.0}) == {"source-stale-in-lookback": ok}
