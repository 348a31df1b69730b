"""bench/floor.py: the floor of the suite's work from the plain script's steps (pure arithmetic)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "bench_floor", Path(__file__).resolve().parents[2] / "bench" / "floor.py"
)
assert _SPEC and _SPEC.loader
floor = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(floor)


def _steps(**extra: float) -> list[dict[str, float | str]]:
    times = {
        "bring-up.kwokctl-create": 4.0,
        "bring-up.nodes": 0.5,
        "install.preflight": 0.2,  # above the floor
        "install.helm-install": 1.25,
        "install.helm-upgrade-policy": 1.0,  # above the floor
        "positive.arrange.deploy": 0.5,  # the floor with arrange only
        "positive.arrange.check-start": 0.75,  # above both: a check
        "positive.arrange.move": 0.25,
        "positive.arrange.check-moved": 0.75,
        "positive.arrange.pdb": 0.25,
        "nodefit.arrange.deploy": 0.5,
        "nodefit.arrange.move": 0.25,
        "nodefit.arrange.pdb": 0.25,
        "nodefit.arrange.unlabel": 0.25,
        "nodefit.arrange.check-unlabelled": 1.0,
        "pdb.arrange.deploy": 0.5,
        "pdb.arrange.move": 0.25,
        "pdb.arrange.pdb": 0.25,
        "pdb.arrange.pdb-zero": 0.5,
        "pdb.arrange.check-zero": 1.0,
        "positive.round": 0.1,  # above the floor: the suspend check
        "positive.round.schedule": 0.5,
        "positive.round.prepare": 0.9,  # above the floor: policy, token, status
        "positive.round.descheduler": 0.5,
        "nodefit.round.schedule": 0.25,
        "nodefit.round.descheduler": 0.5,
        "pdb.round.schedule": 0.25,
        "pdb.round.descheduler": 0.75,
        "positive.round.finish": 1.25,  # the third floor only: the Job controller's verdict
        "nodefit.round.finish": 1.0,
        "pdb.round.finish": 1.5,
        "positive.teardown.namespace": 6.0,
        "nodefit.teardown.namespace": 5.5,
        "pdb.teardown.namespace": 7.0,
        **extra,
    }
    return [{"step": k, "s": v, "at_s": 0.0} for k, v in times.items()]


def test_the_floor_is_bring_up_one_install_and_the_three_rounds() -> None:
    f = floor.floor_of(_steps())
    assert f["bring_up"] == 4.5
    assert f["install"] == 1.25
    assert (f["round.positive"], f["round.nodefit"], f["round.pdb"]) == (1.0, 0.75, 1.0)
    assert f["rounds"] == 2.75
    assert f["floor"] == 8.5  # no arrange, upgrade, checks or teardown
    assert f["namespace_deletion"] == 5.5  # the fastest of the three
    assert f["floor_with_namespace"] == 14.0


def test_the_second_floor_adds_the_minimal_arrange_and_none_of_its_checks() -> None:
    f = floor.floor_of(_steps())
    assert (f["arrange.positive"], f["arrange.nodefit"], f["arrange.pdb"]) == (1.0, 1.25, 1.5)
    assert f["arrange"] == 3.75
    assert f["floor"] == 8.5  # the first floor's definition is unchanged
    assert f["floor_with_arrange"] == 12.25
    assert f["floor_with_arrange_and_namespace"] == 17.75
    steps = [s for s in _steps() if s["step"] != "pdb.arrange.pdb-zero"]
    with pytest.raises(KeyError, match=r"pdb\.arrange\.pdb-zero"):
        floor.floor_of(steps)


def test_the_third_floor_adds_each_rounds_verdict_to_the_second() -> None:
    """Issue 31's floor: the Job controller's Complete verdict (batched by a constant 1 s)
    is work no suite can skip, so it is in the floor; the other two stay as they were."""
    f = floor.floor_of(_steps())
    assert (f["verdict.positive"], f["verdict.nodefit"], f["verdict.pdb"]) == (1.25, 1.0, 1.5)
    assert f["verdicts"] == 3.75
    assert (f["floor"], f["floor_with_arrange"]) == (8.5, 12.25)
    assert f["floor_with_arrange_and_verdict"] == 16.0
    assert f["floor_with_arrange_and_verdict_and_namespace"] == 21.5
    steps = [s for s in _steps() if s["step"] != "nodefit.round.finish"]
    with pytest.raises(KeyError, match=r"nodefit\.round\.finish"):
        floor.floor_of(steps)


def test_a_step_the_script_did_not_time_is_named() -> None:
    steps = [s for s in _steps() if s["step"] != "pdb.round.descheduler"]
    with pytest.raises(KeyError, match=r"pdb\.round\.descheduler"):
        floor.floor_of(steps)


def test_medians_and_ratios() -> None:
    runs = [floor.floor_of(_steps(**{"bring-up.kwokctl-create": b})) for b in (3.0, 4.0, 9.0)]
    assert floor.median_floor(runs)["floor"] == 8.5
    assert floor.ratio([10.0, 12.0, 30.0], [10.0, 20.0, 24.0]) == 0.6
    assert floor.ratio([10.2, 10.0, 11.0], 8.5) == 1.2
    assert floor.ratio([], 8.5) is None and floor.ratio([1.0], []) is None
