"""The runbook suite as 3 shards (3 pytest processes, a cluster each) merged into one run
gives the unsharded run's verdict, per-experiment outcomes and evictions (issue 41).

The runs are bench/shard_bench.py's `compare` (the same code measures 1 vs 3 shards for
bench/RESULTS.md): unsharded first, then the shards one after another, then `desched merge`.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.desched_selftest

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("shard_bench", ROOT / "bench" / "shard_bench.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_three_shards_merge_to_the_unsharded_verdict_outcomes_and_evictions(
    tmp_path: Path,
) -> None:
    bench = _bench()
    res = bench.compare(tmp_path, 3)
    whole, merge = res["unsharded"], res["merge"]
    logs = {s["name"]: (tmp_path / f"{s['name']}.log").read_text()[-3000:] for s in res["sharded"]}
    assert whole["rc"] == 0, (tmp_path / "unsharded.log").read_text()[-3000:]
    assert [s["rc"] for s in res["sharded"]] == [0, 0, 0], logs
    assert merge["rc"] == whole["rc"], merge["output"]  # one verdict, the unsharded run's
    merged = Path(merge["out"])
    expected = bench.junit_cases(Path(whole["art"]) / "junit.xml")
    assert len(expected) == 6  # the runbook's six experiments
    assert bench.junit_cases(merged / "junit.xml") == expected  # result, outcome, evictions
    summary = json.loads((merged / "run-summary.json").read_text())
    got = {
        e["nodeid"].split("::")[1]: {"desched.outcome": e["outcome"], "evictions": e["evictions"]}
        for e in summary["experiments"]
    }
    want = {
        name: {"desched.outcome": c["desched.outcome"], "evictions": int(c["desched.evictions"])}
        for name, c in expected.items()
    }
    assert got == want
    ran = [t for s in summary["shard_runs"] for t in s["tests"]]
    assert len(ran) == len(set(ran)) == 6 and all(s["tests"] for s in summary["shard_runs"])
    for k in (1, 2, 3):  # every round record kept with its shard
        assert list((merged / f"shard-{k}-of-3").rglob("descheduler-*.json")), k
    assert "3 shards of run" in (merged / "report.html").read_text()
