#!/usr/bin/env python3
"""Issue 29's two throughput figures as medians: replay_scale.py run N times per shape.

The shapes alternate (1,000 / 10,000, then 5,000 / 10,000, N rounds) so a change in the
machine's load falls on both; each run is a fresh process and a fresh cluster. The median of
each phase is taken over the runs, and each target is judged on its own median:

    python bench/replay_series.py [--repeat 3] [--out-dir DIR] [--also-client-limits 100,200]

`--also-client-limits QPS,BURST` adds a third run per round: 1,000 / 10,000 with the
descheduler's API client at those limits (`desched replay --client-qps/--client-burst`). The
targets are judged on the runs at its own limits (v0.36.0: client-go's 5 qps / burst 10); the
third shows how much of its cycle those limits are.

Writes DIR/run-<i>-<nodes>-<pods>.json (replay_scale.py's own report) and DIR/series.json;
prints a Markdown table. Exit 0 when every run completed, whatever the verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from replay_scale import RESTORE_TARGET_S, ROUND_TARGET_S, run_fresh  # noqa: E402

SHAPES = ((1000, 10000), (5000, 10000))
PARTS = (
    "nodes",
    "api_objects",
    "etcd_pvs_pvcs_pdbs",
    "etcd_owners_and_pods",
    "settle",
    "verify",
)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else float("nan")


def _row(name: str, values: list[float]) -> str:
    cells = " / ".join(f"{v:.1f}" for v in values)
    return f"| {name} | {cells} | **{_median(values):.1f}** |"


def table(runs: dict[tuple[int, int], list[dict[str, Any]]]) -> str:
    """One Markdown table per shape: every run's figure and the median."""
    out = []
    for (nodes, pods), reports in runs.items():
        sec = [r["seconds"] for r in reports]
        out += [
            f"\n{nodes:,} nodes / {pods:,} pods ({len(reports)} runs)\n",
            "| phase | runs (s) | median (s) |",
            "|---|---|---:|",
        ]
        out.append(
            _row("restore + policy + one round (+ replacements)", [r["target_s"] for r in reports])
        )
        out.append(_row("restore", [s["restore"] for s in sec]))
        for part in PARTS:
            out.append(_row(f"- {part}", [s["restore_parts"].get(part, 0.0) for s in sec]))
        out.append(
            _row(
                "round (Job created -> finished)",
                [s["round (Job created -> finished)"] for s in sec],
            )
        )
        cycle = [
            s["descheduler cycle (its own log)"]
            for s in sec
            if s["descheduler cycle (its own log)"]
        ]
        out.append(_row("- the descheduler's own cycle", cycle))
        out.append(_row("load (1 min) at the run's start", [r["load_at_start"] for r in reports]))
        # replay_scale.py reads the load when it writes its report, after the round
        out.append(
            _row(
                "load (1 min) at the run's end",
                [r["machine"]["load_avg_start"][0] for r in reports],
            )
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out-dir", type=Path, default=Path("replay-series"))
    ap.add_argument("--also-client-limits", default=None, metavar="QPS,BURST")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    configs: list[tuple[int, int, tuple[str, ...]]] = [(n, p, ()) for n, p in SHAPES]
    if args.also_client_limits:
        qps, burst = args.also_client_limits.split(",")
        configs.append((*SHAPES[0], ("--client-qps", qps, "--client-burst", burst)))
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {s: [] for s in SHAPES}
    limited: list[dict[str, Any]] = []
    for i in range(1, args.repeat + 1):
        for nodes, pods, extra in configs:
            tag = "-client" if extra else ""
            out = args.out_dir / f"run-{i}-{nodes}-{pods}{tag}.json"
            load = os.getloadavg()[0]
            print(
                f"[series] run {i}: {nodes} nodes / {pods} pods, load {load:.2f}",
                file=sys.stderr,
                flush=True,
            )
            t0 = time.monotonic()
            try:
                report = run_fresh(nodes, pods, out, extra)
            except SystemExit as exc:
                print(f"[series] run {i}: {exc}", file=sys.stderr)
                return 1
            report["load_at_start"] = load
            (limited if extra else runs[(nodes, pods)]).append(report)
            print(f"[series] done in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    small, big = runs[SHAPES[0]], runs[SHAPES[1]]
    round_median = _median([r["target_s"] for r in small])
    restore_median = _median([r["seconds"]["restore"] for r in big])
    verdict = {
        "restore + one round, 1,000 / 10,000 (median)": round_median,
        "target": ROUND_TARGET_S,
        "met": round_median <= ROUND_TARGET_S,
        "restore, 5,000 / 10,000 (median)": restore_median,
        "restore target": RESTORE_TARGET_S,
        "restore met": restore_median <= RESTORE_TARGET_S,
        "loads at start": {
            f"{n}/{p}": [r["load_at_start"] for r in rs] for (n, p), rs in runs.items()
        },
    }
    if limited:
        verdict["with the client limits " + args.also_client_limits] = {
            "restore + one round (median)": _median([r["target_s"] for r in limited]),
            "round (median)": _median(
                [r["seconds"]["round (Job created -> finished)"] for r in limited]
            ),
            "descheduler cycle (median)": _median(
                [r["seconds"]["descheduler cycle (its own log)"] or 0.0 for r in limited]
            ),
        }
    (args.out_dir / "series.json").write_text(json.dumps(verdict, indent=1) + "\n")
    print(table(runs))
    if limited:
        print(f"\nwith --client-qps/--client-burst {args.also_client_limits}:")
        print(table({SHAPES[0]: limited}))
    print("\n" + json.dumps(verdict, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
