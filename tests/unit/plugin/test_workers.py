"""pytest-xdist seen from a user's run (plugin/workers.py): each worker records what it ran as a
shard of the run, the controller merges their evidence into one folder after the last worker
ended. The suites here ask for `desched_settings` only (the configuration: an evidence folder,
no cluster), so nothing starts a cluster.
"""

from __future__ import annotations

import json

import pytest

from pytest_desched.plugin.workers import worker_index

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_step(i, desched_settings):
    assert desched_settings.artifacts.name.startswith("{prefix}")
    # evidence of its own (an empty folder is released at the end: nothing to merge)
    desched_settings.artifacts.mkdir(parents=True, exist_ok=True)  # a named one is not made
    (desched_settings.artifacts / f"note-{{i}}.txt").write_text("seen")
    assert i != {fail}
"""
TESTS = [f"test_suite.py::test_step[{i}]" for i in range(6)]


@pytest.fixture(autouse=True)
def default_evidence_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs here choose their evidence folder as a user's would (tests/unit/conftest.py
    points DESCHED_ARTIFACTS at a temp folder for every other unit test)."""
    monkeypatch.delenv("DESCHED_ARTIFACTS", raising=False)


def run_workers(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", *args)


def test_workers_merge_into_the_named_folder(pytester: pytest.Pytester) -> None:
    out = pytester.path / "evidence"
    pytester.makepyfile(test_suite=SUITE.format(prefix="evidence-gw", fail=-1))
    res = run_workers(pytester, f"--desched-artifacts={out}")
    assert res.ret == 0, res.stdout.str()
    summary = json.loads((out / "run-summary.json").read_text())
    assert summary["verdict"] == "passed" and summary["shards"] == 2
    assert sorted(summary["tests"]) == sorted(TESTS)  # every test once, from one worker or other
    assert {t["shard"] for t in summary["tests"].values()} <= {"1/2", "2/2"}
    ran = [t for r in summary["shard_runs"] for t in r["tests"]]
    assert sorted(ran) == sorted(TESTS)
    # the worker folders (DIR-gw0, DIR-gw1) were copied whole into DIR and then removed
    assert sorted(p.name for p in out.glob("shard-*")) == ["shard-1-of-2", "shard-2-of-2"]
    assert not list(pytester.path.glob("evidence-gw*"))
    assert f"2 workers merged into {out}" in res.stdout.str()


def test_a_failure_on_a_worker_is_the_merged_verdict(pytester: pytest.Pytester) -> None:
    out = pytester.path / "evidence"
    pytester.makepyfile(test_suite=SUITE.format(prefix="evidence-gw", fail=3))
    res = run_workers(pytester, f"--desched-artifacts={out}")
    assert res.ret == 1, res.stdout.str()
    summary = json.loads((out / "run-summary.json").read_text())
    assert summary["verdict"] == "failed"
    assert summary["tests"]["test_suite.py::test_step[3]"]["outcome"] == "failed"


def test_default_folders_merge_and_latest_points_at_the_merge(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE.format(prefix="", fail=-1))
    res = run_workers(pytester)
    assert res.ret == 0, res.stdout.str()
    root = pytester.path / "desched-artifacts"
    runs = [p for p in root.iterdir() if p.name != "latest"]
    assert len(runs) == 1, runs  # the merged run only: the workers' folders are inside it
    assert (root / "latest").resolve() == runs[0].resolve()
    assert (runs[0] / "run-summary.json").is_file()
    notes = sorted(p.name for p in runs[0].glob("shard-*/note-*.txt"))
    assert notes == [f"note-{i}.txt" for i in range(6)]  # every worker's evidence, once


def test_a_unit_only_run_leaves_no_folder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    res = run_workers(pytester)
    assert res.ret == 0, res.stdout.str()
    assert not (pytester.path / "desched-artifacts").exists()


def test_a_crashed_worker_keeps_the_worker_folders_and_says_so(
    pytester: pytest.Pytester,
) -> None:
    """A worker that died wrote no record: the run is not whole, nothing is merged."""
    out = pytester.path / "evidence"
    pytester.makepyfile(
        test_suite=SUITE.format(prefix="evidence-gw", fail=-1)
        + "\n\ndef test_crash(desched_settings):\n    import os\n    os._exit(3)\n"
    )
    res = run_workers(pytester, f"--desched-artifacts={out}")
    assert res.ret == 1
    assert "not merged (" in res.stdout.str(), res.stdout.str()
    assert not (out / "run-summary.json").exists()
    assert list(pytester.path.glob("evidence-gw*"))


def test_worker_index() -> None:
    assert worker_index("gw0") == 0 and worker_index("gw11") == 11
    with pytest.raises(pytest.UsageError):
        worker_index("main")


def test_no_xdist_no_change(pytester: pytest.Pytester) -> None:
    """Without -n the evidence folder is the one the user named, as before."""
    out = pytester.path / "evidence"
    pytester.makepyfile(test_suite=SUITE.format(prefix="evidence", fail=-1))
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--desched-artifacts={out}")
    assert res.ret == 0, res.stdout.str()
    assert not (out / "run-summary.json").exists() and not (out / "shard.json").exists()
