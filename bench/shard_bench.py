"""The runbook suite (`make e2e`'s selection) unsharded, then as N shards, then merged.

Each run is its own pytest process with its own embedded cluster and evidence folder, one
after another (on 2 cores, concurrent shards would only share the same cores). Reported: the
unsharded wall, each shard's wall (and its cluster's bring-up), their sum (one runner doing every shard), their maximum
(what N independent runners give: the slowest shard), the merge's wall, and the 1-minute
load at each start. tests/e2e/test_shards_e2e.py runs `compare` and checks the merged
verdict, outcomes and evictions against the unsharded run's.

    python bench/shard_bench.py --shards 3 --out shard-results.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

ROOT = Path(__file__).resolve().parents[1]
SUITE = "tests/e2e/test_experiments.py"  # the runbook's six experiments live here
# What a shard must not inherit from the caller: its shard, its run id, its evidence folder.
CLEARED = (
    *("DESCHED_SHARD", "DESCHED_SHARD_RUN_ID", "DESCHED_SHARD_DURATIONS"),
    *("DESCHED_SHARD_ALLOW_EMPTY", "DESCHED_ARTIFACTS", "GITHUB_RUN_ID", "CI_PIPELINE_ID"),
)


def e2e_mark() -> str:
    """`make e2e`'s selection, read from the Makefile (its one source)."""
    found = re.search(r"^E2E_MARK := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    if not found:
        raise SystemExit("Makefile has no E2E_MARK line")
    return found.group(1).strip()


def pytest_run(workdir: Path, name: str, *args: str) -> dict[str, Any]:
    """One pytest process over the suite, evidence and JUnit in `workdir/name`."""
    art = workdir / name
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    cmd = [sys.executable, "-m", "pytest", SUITE, "-m", e2e_mark(), "-p", "no:cacheprovider"]
    cmd += [f"--basetemp={workdir / (name + '-tmp')}", f"--desched-artifacts={art}"]
    cmd += [f"--junitxml={art / 'junit.xml'}", "-q", *args]
    load = round(os.getloadavg()[0], 2)
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    wall = round(time.monotonic() - started, 1)
    (workdir / f"{name}.log").write_text(proc.stdout + proc.stderr)
    up = re.search(r"bring-up=([\d.]+)s", proc.stdout)  # the terminal summary's cluster line
    return {
        "name": name,
        "rc": proc.returncode,
        "wall_s": wall,
        "bring_up_s": float(up[1]) if up else None,
        "load_1m": load,
        "art": str(art),
    }


def compare(workdir: Path, n: int = 3) -> dict[str, Any]:
    """The suite unsharded, as N shards, and the shards merged; walls and exit codes."""
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    whole = pytest_run(workdir, "unsharded")
    shards = [
        pytest_run(
            workdir, f"shard-{k}", f"--desched-shard={k}/{n}", f"--desched-shard-run-id={run_id}"
        )
        for k in range(1, n + 1)
    ]
    merged = workdir / "merged"
    started = time.monotonic()
    cmd = [sys.executable, "-m", "pytest_desched.cli", "merge", *(s["art"] for s in shards)]
    proc = subprocess.run(
        [*cmd, "--out-dir", str(merged)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    merge = {"rc": proc.returncode, "wall_s": round(time.monotonic() - started, 1)}
    merge |= {"out": str(merged), "output": proc.stdout + proc.stderr}
    walls = [s["wall_s"] for s in shards]
    return {
        "shards": n,
        "unsharded": whole,
        "sharded": shards,
        "merge": merge,
        "sum_s": round(sum(walls), 1),
        "n_runners_s": max(walls),  # N runners: the slowest shard (plus the merge job)
    }


def junit_cases(path: Path) -> dict[str, dict[str, str]]:
    """Each test case's result and desched.* figures, by test name (the shard left out)."""
    cases = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        result = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        keep = ("desched.outcome", "desched.evictions", "desched.blocking_layer")
        cases[case.get("name", "")] = {"result": result} | {k: props.get(k, "") for k in keep}
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shard-bench-") as tmp:
        res = compare(Path(tmp), args.shards)
        merged = Path(res["merge"]["out"])
        res["same_as_unsharded"] = junit_cases(merged / "junit.xml") == junit_cases(
            Path(res["unsharded"]["art"]) / "junit.xml"
        )
        res["durations"] = json.loads((merged / "desched-durations.json").read_text())
    res["cpus"] = os.cpu_count()
    text = json.dumps(res, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    ok = res["unsharded"]["rc"] == 0 and res["merge"]["rc"] == 0 and res["same_as_unsharded"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
