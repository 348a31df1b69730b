"""bench/cold_ci.py: the step table from a run's stamped lines and CPU samples; a clean HOME."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "bench_cold_ci", Path(__file__).resolve().parents[2] / "bench" / "cold_ci.py"
)
assert _SPEC and _SPEC.loader
cold = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = cold  # its dataclasses look their module up
_SPEC.loader.exec_module(cold)


def _run() -> object:
    run = cold.Run("bash .ci/run", "abc", "now")
    run.lines = [
        (10.0, "[desched] built kubernetes v1.36.3 in 600s"),
        (700.0, "[desched] built descheduler v0.36.0 from source in 90s"),
        (900.0, "============================= test session starts =============================="),
        (1900.0, "==== 3205 passed, 3 skipped, 3 xfailed, 1 xpassed in 1000.12s (0:16:40) ===="),
    ]
    run.samples = [cold.Sample(0.0, 1.0, 0.0), cold.Sample(890.0, 2.0, 1500.0),
                   cold.Sample(1890.0, 3.0, 3300.0)]  # fmt: skip
    run.wall_s = 1920.0
    return run


def test_the_table_names_each_build_then_the_phases_with_their_cpu() -> None:
    rows = {r["step"]: r for r in cold.summarize(_run())}
    assert rows["kubernetes v1.36.3"]["wall_s"] == 600
    assert rows["descheduler v0.36.0"]["wall_s"] == 90
    assert rows["builds and checks before the first test"] == {
        "step": "builds and checks before the first test", "wall_s": 900, "cpu_s": 1500}  # fmt: skip
    assert rows["pytest"]["wall_s"] == 1000 and rows["pytest"]["cpu_s"] == 1800
    assert rows["the whole .ci/run"]["wall_s"] == 1920


def test_a_run_that_never_reached_pytest_has_no_pytest_row() -> None:
    run = _run()
    run.lines = run.lines[:2]
    steps = [r["step"] for r in cold.summarize(run)]
    assert "pytest" not in steps and "the whole .ci/run" in steps


def test_the_environment_keeps_no_cache_location(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GOMODCACHE", "/warm/mod")
    monkeypatch.setenv("DESCHED_CACHE_DIR", "/warm/tools")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    env = cold.clean_env(tmp_path)
    assert env["HOME"] == str(tmp_path) and env["CI"] == "true"
    assert "GOMODCACHE" not in env and "DESCHED_CACHE_DIR" not in env
    assert env["PIP_FIND_LINKS"] == "/opt/wheels"  # the machine's own settings stay
