"""bench/flake_rate.py: every failure named from the JUnit reports, runs counted, none retried."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parents[2] / "bench"
_SPEC = importlib.util.spec_from_file_location("bench_flake_rate", _BENCH / "flake_rate.py")
assert _SPEC and _SPEC.loader
flake = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(flake)
sys.path.remove(str(_BENCH))  # the script puts bench/ on the path for its neighbour

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.e2e.test_experiments" name="test_runbook[positive-runbook]"/>
<testcase classname="tests.e2e.test_experiments" name="test_runbook[pdb-runbook]">
  <failure message="AssertionError: no-rollout: generation 2 != 1&#10;assert 2 == 1">tb</failure>
</testcase>
<testcase classname="tests.e2e.test_experiments" name="test_runbook[nodefit-runbook]">
  <error message="">

failed on setup with "ProviderError: kwokctl could not start"
more</error>
</testcase>
<testcase classname="tests.e2e.test_experiments" name="test_runbook[positive-workaround]">
  <skipped type="pytest.xfail" message="descheduler#1882"/>
</testcase>
<testcase classname="tests.e2e.test_experiments" name="test_kind_only">
  <skipped type="pytest.skip" message="kind only"/>
</testcase>
</testsuite></testsuites>
"""


def _junit(tmp_path: Path) -> Path:
    path = tmp_path / "e2e-01.xml"
    path.write_text(JUNIT)
    return path


def test_each_failure_is_named_by_test_id_and_first_error_line(tmp_path: Path) -> None:
    counts, failed = flake.failures(_junit(tmp_path))
    assert dict(counts) == {"passed": 1, "failure": 1, "error": 1, "xfailed": 1, "skipped": 1}
    assert failed == [
        {
            "test": "tests/e2e/test_experiments.py::test_runbook[pdb-runbook]",
            "kind": "failure",
            "first_line": "AssertionError: no-rollout: generation 2 != 1",
        },
        {
            "test": "tests/e2e/test_experiments.py::test_runbook[nodefit-runbook]",
            "kind": "error",
            "first_line": 'failed on setup with "ProviderError: kwokctl could not start"',
        },
    ]


def test_a_run_without_a_report_is_a_failure_of_its_own(tmp_path: Path) -> None:
    run = flake.summarize(
        "e2e-02",
        "e2e",
        None,
        tmp_path / "none.xml",
        "collected 6\n\ntimed out after 1800s\n",
        2.5,
        1800.0,
    )
    assert run["failures"] == [
        {
            "test": "(e2e-02: no JUnit report, exit None)",
            "kind": "error",
            "first_line": "timed out after 1800s",
        }
    ]
    # a non-zero exit with a report of no failure (an internal error) is named too
    ok = tmp_path / "ok.xml"
    ok.write_text(
        '<testsuites><testsuite><testcase classname="tests.unit.test_x" name="test_a"/>'
        "</testsuite></testsuites>"
    )
    assert flake.summarize("test-01", "test", 3, ok, "", 1.0, 2.0)["failures"][0]["test"] == (
        "(test-01: exit 3)"
    )


def test_runs_are_counted_never_retried_and_the_section_names_every_failure(
    tmp_path: Path,
) -> None:
    junit, clean = _junit(tmp_path), tmp_path / "clean.xml"
    clean.write_text(
        '<testsuites><testsuite><testcase classname="tests.e2e.test_experiments" '
        'name="test_runbook[positive-runbook]"/></testsuite></testsuites>'
    )
    runs = [
        flake.summarize("e2e-01", "e2e", 1, junit, "", 3.1, 40.0),
        flake.summarize("e2e-02", "e2e", 0, clean, "", 2.0, 35.5),
        flake.summarize("test-01", "test", 0, clean, "", 5.0, 1500.0),
    ]
    summary = flake.aggregate(runs)
    assert summary["e2e"]["runs"] == 2 and summary["e2e"]["failed_runs"] == 1
    assert summary["e2e"]["flake_rate"] == 0.5
    assert summary["e2e"]["failing_tests"] == {
        "tests/e2e/test_experiments.py::test_runbook[nodefit-runbook]": ["e2e-01"],
        "tests/e2e/test_experiments.py::test_runbook[pdb-runbook]": ["e2e-01"],
    }
    assert summary["test"] == {
        "runs": 1,
        "failed_runs": 0,
        "flake_rate": 0.0,
        "failing_tests": {},
        "wall_s": {"min": 1500.0, "max": 1500.0},
        "load_1m": {"min": 5.0, "max": 5.0},
        "load_during": {"min": 5.0, "max": 5.0},
    }
    md = flake.markdown(
        {
            "date": "2026-12-02 16:00 UTC",
            "load": 1.2,
            "command": "python bench/flake_rate.py",
            "runs": runs,
            "summary": summary,
        }
    )
    assert md.startswith("## Flake rate (issue 43), 2026-12-02 16:00 UTC, load 1.2\n")
    assert "| the runbook's six experiments | 2 | 1 | 50.0% | 35.5-40.0 | 2.0-3.1 | 2.0-3.1 |" in md
    assert "| `make test` | 1 | 0 | 0.0% | 1500.0-1500.0 | 5.0-5.0 | 5.0-5.0 |" in md
    assert "| e2e-01 | FAIL (2) | 40.0 | 3.1 | 3.1-3.1, 3.1; 0 |" in md
    assert (
        "- e2e-01: `tests/e2e/test_experiments.py::test_runbook[pdb-runbook]`: "
        "AssertionError: no-rollout: generation 2 != 1"
    ) in md


def test_the_experiments_run_is_make_e2e_selection_with_its_own_report(
    tmp_path: Path, monkeypatch
) -> None:
    """One pytest process per run over `make e2e`'s selection; the smoke `-k` passed on."""
    seen: list[list[str]] = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def run(cmd: list[str], **kw: object) -> Done:
        seen.append(cmd)
        Path(next(a for a in cmd if a.startswith("--junitxml=")).split("=", 1)[1]).write_text(JUNIT)
        return Done()

    monkeypatch.setattr(flake.subprocess, "run", run)
    rec = flake.run_once("e2e", 1, tmp_path, ["-k", "positive"])
    [cmd] = seen
    assert (
        cmd[cmd.index("-m", 3) + 1]
        == flake.e2e_mark()
        == "descheduler_e2e and not desched_selftest"
    )
    k = cmd.index("-k")
    assert cmd[k : k + 2] == ["-k", "positive"]
    assert rec["run"] == "e2e-01" and len(rec["failures"]) == 2


def test_the_load_is_sampled_during_each_run_not_only_at_its_start(tmp_path: Path) -> None:
    """Issue 54: on a shared machine the load at a run's start says little about the run."""
    import time

    loadavg = tmp_path / "loadavg"
    loadavg.write_text("3.00 2.00 1.00 1/100 42\n")

    def until(n: int, sampler: flake.LoadSampler) -> None:  # the run under way, bounded
        deadline = time.monotonic() + 5
        while len(sampler.samples) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(sampler.samples) >= n, sampler.samples

    with flake.LoadSampler(every=0.05, path=loadavg) as sampler:
        until(2, sampler)  # the sampler's own thread read while the run went on
        loadavg.write_text("41.50 20.00 9.00 1/100 42\n")
        until(len(sampler.samples) + 2, sampler)
    assert sampler.samples[0] == 3.0 and 41.5 in sampler.samples[2:]
    ok = tmp_path / "ok.xml"
    ok.write_text("<testsuites><testsuite/></testsuites>")
    run = flake.summarize("e2e-01", "e2e", 0, ok, "", 3.0, 9.0, sampler.samples)
    assert run["load_during"]["min"] == 3.0 and run["load_during"]["max"] == 41.5
    assert run["load_during"]["samples"] == len(sampler.samples)
