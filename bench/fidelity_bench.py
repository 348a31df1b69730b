#!/usr/bin/env python3
"""Dry-run fidelity against one run (issue 42: at most 1.3x), on warm tools.

Alternating pairs (default 3; the order swapped each pair): "run" is `desched run positive
--variant pdb-lister-workaround` (one `session.run`), "fidelity" is `desched fidelity
--experiment positive` (one `run_fidelity`). Each side is a fresh child process and a fresh
embedded cluster. The figure is each call's wall time (`wall_s`: `session.run` or
`run_fidelity`, from its call to its return, bring-up excluded), the same span on both sides;
the experiment's own `duration_s` is kept beside it, but it is not the same span on both
(a run's ends at its verdict, before its lab teardown and after its context was built; a
fidelity run's covers both), with the engine's own per-step timings (`ExperimentResult.timings`, `real.*` / `dry.*` for the
halves). `--repo` picks the code tree the children import (default: this checkout), so a
before/after is the same script against two trees. The 1-minute load is recorded at each
side's start (`uptime`): the machine is shared, a loaded figure says so.

    python bench/fidelity_bench.py [--pairs 3] [--repo PATH] [--experiment positive]
        [--variant pdb-lister-workaround] [--workers N] [--out FILE]

`--workers`: the fidelity side's cluster size (default: whatever the tree's fidelity command
brings up); the run side always gets `desched run`'s default.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run_bench import log, machine_facts, stats  # noqa: E402

PYTHON = sys.executable


def child(side: str, experiment: str, variant: str, workers: int | None, tmp: Path) -> None:
    """One side in this (fresh) process: prints one JSON line on stdout."""
    from pytest_desched.config import build_config
    from pytest_desched.session import DeschedSession

    values: dict[str, Any] = {
        "--desched-provider": "embedded",
        "--desched-artifacts": str(tmp / "art"),
    }
    if side == "fidelity":
        import importlib

        try:  # the tree's command module (fidelity/cli.py before commands/)
            fcli = importlib.import_module("pytest_desched.commands.fidelity")
        except ImportError:
            fcli = importlib.import_module("pytest_desched.fidelity.cli")
        default = getattr(fcli, "FIDELITY_WORKERS", None)  # the tree's command's choice
        if workers or default:
            values["--desched-workers"] = workers or default
    config = build_config(values, run_dir=tmp / "run")
    out: dict[str, Any]
    with DeschedSession(config, report=lambda _m: None) as session:
        t0 = time.monotonic()
        if side == "run":
            res = session.run(experiment, variant=variant)
            wall = time.monotonic() - t0
            out = {
                "outcome": res.outcome,
                "duration_s": round(res.duration_s, 3),
                "timings": res.timings,
                "message": res.message if res.outcome not in ("pass", "xfail") else "",
            }
        else:
            from pytest_desched.fidelity.engine import run_fidelity

            o = run_fidelity(session, experiment, variant, name=f"fidelity-{experiment}")
            wall = time.monotonic() - t0
            out = {
                "outcome": o.outcome,
                "duration_s": round(o.duration_s, 3),
                "timings": o.timings,
                "message": o.message if o.outcome != "pass" else "",
                "halves": o.summary().get("halves"),
                "probe": [
                    (r.get("fidelity") or {}).get("mirror_probe") is not None for r in o.dry.records
                ],
            }
        out["wall_s"] = round(wall, 3)
        out["bring_up_s"] = session.timings.get("bring_up")
        out["workers"] = config.workers
    print(json.dumps(out), flush=True)


def one_side(args: argparse.Namespace, side: str) -> dict[str, Any]:
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fidelity-bench-") as tmp:
        argv = [PYTHON, str(Path(__file__).resolve()), "--child", side, "--tmp", tmp,
                "--experiment", args.experiment, "--variant", args.variant]  # fmt: skip
        if args.workers:
            argv += ["--workers", str(args.workers)]
        env = {**os.environ, "PYTHONPATH": str(args.repo)}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"outcome": "error", "message": done.stderr[-2000:], "load_1m": load[0]}
    return {**json.loads(lines[-1]), "load_1m": round(load[0], 2)}


def phases(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys: list[str] = []
    for r in runs:
        keys += [k for k in r.get("timings") or {} if k not in keys]
    return {
        k: stats([r["timings"][k] for r in runs if k in (r.get("timings") or {})]) for k in keys
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--experiment", default="positive")
    ap.add_argument("--variant", default="pdb-lister-workaround")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", choices=("run", "fidelity"), default=None)
    ap.add_argument("--tmp", type=Path, default=None)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, str(os.environ.get("PYTHONPATH", REPO)))
        child(args.child, args.experiment, args.variant, args.workers, args.tmp)
        return 0
    facts = machine_facts()
    sides: dict[str, list[dict[str, Any]]] = {"run": [], "fidelity": []}
    for i in range(args.pairs):
        order = ("run", "fidelity") if i % 2 == 0 else ("fidelity", "run")
        for side in order:
            r = one_side(args, side)
            sides[side].append(r)
            log(
                f"pair {i + 1} {side}: {r.get('duration_s')} s, {r['outcome']}, "
                f"load {r['load_1m']}, {r.get('halves') or ''} {r.get('message', '')[:300]}"
            )
    ok = {s: [r for r in rs if r["outcome"] in ("pass", "xfail")] for s, rs in sides.items()}
    med = {s: statistics.median([r["duration_s"] for r in rs]) for s, rs in ok.items() if rs}
    ratio = med["fidelity"] / med["run"] if len(med) == 2 else None
    wall = {s: statistics.median([r["wall_s"] for r in rs]) for s, rs in ok.items() if rs}
    wall_ratio = wall["fidelity"] / wall["run"] if len(wall) == 2 else None
    phase_stats = {s: phases(rs) for s, rs in ok.items()}
    out: dict[str, Any] = {
        "machine": facts,
        "repo": str(args.repo),
        "experiment": f"{args.experiment}[{args.variant}]",
        "sides": sides,
        "phases": phase_stats,
        "median_s": med,
        "ratio_of_medians": round(ratio, 2) if ratio else None,
        "wall_median_s": wall,
        "wall_ratio_of_medians": round(wall_ratio, 2) if wall_ratio else None,
    }
    print(
        "| pair | load | run wall (duration) | fidelity wall (duration) | wall ratio |"
        "\n|---|---|---|---|---|"
    )
    for i, (a, b) in enumerate(zip(sides["run"], sides["fidelity"], strict=True)):
        rr = b.get("wall_s", 0) / a["wall_s"] if a.get("wall_s") else None
        print(
            f"| {i + 1} | {a['load_1m']} / {b['load_1m']} | {a.get('wall_s')} s "
            f"({a.get('duration_s')}) | {b.get('wall_s')} s ({b.get('duration_s')}) | "
            f"{rr and round(rr, 2)} |"
        )
    for s, ph in phase_stats.items():
        print(f"\n{s} phases (min / median / max s):")
        for k, v in ph.items():
            print(f"  {k}: {v.get('min')} / {v.get('median')} / {v.get('max')}")
    print(
        f"\nwall ratio of medians fidelity/run: {out['wall_ratio_of_medians']} (target <= 1.3); "
        f"duration_s ratio {out['ratio_of_medians']} (run's excludes its context and teardown)"
    )
    if args.out:
        args.out.write_text(json.dumps(out, indent=1, default=str))
    return 0 if all(r["outcome"] in ("pass", "xfail") for rs in sides.values() for r in rs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
