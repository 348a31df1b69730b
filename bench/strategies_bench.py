#!/usr/bin/env python3
"""Wall time of the built-in strategy experiments on the embedded cluster, on warm tools.

Per run (default 1): a fresh embedded cluster and release (bring-up and install timed on
their own), then every experiment of `STRATEGY_EXPERIMENTS` in order, then teardown. The
figure issue 14 sets a target for (< 2 minutes) is "strategy set": from the first
experiment's start to the last one's end, each experiment's policy upgrade, lab, round,
assessment and lab teardown included; bring-up, install and cluster teardown are reported
beside it.

    python bench/strategies_bench.py [--runs 1] [--out FILE]

Prints a Markdown table per run and the median; exit 1 when an experiment did not pass,
130 on Ctrl-C (after cleanup).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_desched.config import build_config  # noqa: E402
from pytest_desched.experiments import STRATEGY_EXPERIMENTS  # noqa: E402
from pytest_desched.session import DeschedSession, interrupts_unwind  # noqa: E402

TARGET_S = 120.0


def log(msg: str) -> None:
    print(f"[strategies-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def one_run(i: int) -> dict[str, Any]:
    """One cluster, every strategy experiment once; the timings and each outcome."""
    with tempfile.TemporaryDirectory(prefix="strategies-bench-") as tmp:
        config = build_config({"--desched-provider": "embedded"}, run_dir=Path(tmp))
        session = DeschedSession(config, report=lambda _m: None)
        out: dict[str, Any] = {"run": i, "experiments": []}
        try:
            t0 = time.monotonic()
            session.cluster  # noqa: B018 (bring-up, timed on its own)
            out["bring_up_s"] = round(time.monotonic() - t0, 2)
            t0 = time.monotonic()
            session.release  # noqa: B018 (first install: suspended, dry run)
            out["install_s"] = round(time.monotonic() - t0, 2)
            t_set = time.monotonic()
            for name in STRATEGY_EXPERIMENTS:
                t0 = time.monotonic()
                res = session.run(name)
                took = time.monotonic() - t0
                out["experiments"].append(
                    {
                        "name": res.label,
                        "outcome": res.outcome,
                        "seconds": round(took, 2),
                        "evictions": res.evictions,
                        "layer": res.blocking_layer,
                        "message": res.message.splitlines()[:6],
                    }
                )
                log(f"run {i}: {res.label} {res.outcome} in {took:.1f}s ({res.blocking_layer})")
            out["strategy_set_s"] = round(time.monotonic() - t_set, 2)
        finally:
            t0 = time.monotonic()
            session.close()
            out["teardown_s"] = round(time.monotonic() - t0, 2)
    return out


def table(run: dict[str, Any]) -> str:
    lines = [
        "| experiment | outcome | seconds | evictions | deciding layer |",
        "|---|---|---|---|---|",
    ]
    for e in run["experiments"]:
        lines.append(
            f"| {e['name']} | {e['outcome']} | {e['seconds']:.1f} | {e['evictions']} | {e['layer']} |"
        )
    lines.append(
        f"| **strategy set** | | **{run.get('strategy_set_s', float('nan')):.1f}** | | "
        f"bring-up {run.get('bring_up_s')} s, install {run.get('install_s')} s, "
        f"teardown {run.get('teardown_s')} s |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the runs as JSON here")
    args = ap.parse_args(argv)
    runs = []
    try:
        with interrupts_unwind():
            for i in range(1, args.runs + 1):
                runs.append(one_run(i))
                print(f"\n### run {i}\n\n{table(runs[-1])}")
    except KeyboardInterrupt:
        log("interrupted (everything was torn down)")
        return 130
    sets = [r["strategy_set_s"] for r in runs if "strategy_set_s" in r]
    summary = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "target_s": TARGET_S,
        "strategy_set_s": sets,
        "median_s": statistics.median(sets) if sets else None,
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    ok = all(e["outcome"] == "pass" for r in runs for e in r["experiments"]) and bool(sets)
    median = summary["median_s"]
    print(
        f"\nstrategy set ({len(STRATEGY_EXPERIMENTS)} experiments): median "
        f"{median if median is None else f'{median:.1f}'} s over {len(sets)} run(s), target < "
        f"{TARGET_S:.0f} s; {'all passed' if ok else 'NOT all passed'}"
    )
    return 0 if ok and median is not None and median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
