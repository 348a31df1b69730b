#!/usr/bin/env python3
"""Per-object costs of a replay (issue 29, deliverable 4): MiB and ms per node and per pod,
for each component, from three replays of generated clusters of different shapes.

Each shape is one `bench/replay_scale.py` run (a fresh embedded cluster, etcd restore, one
real round); a component's peak memory (VmHWM) and each phase's time are fitted as
`base + per_node x nodes + per_pod x pods` through the three points (exactly determined,
from each run's actual counts: the base shape, more nodes, more pods). The figures size a cluster that does not fit one
machine (docs/replay-at-scale.md); under load the times are upper bounds, so the load
average is recorded with each run.

    python bench/object_costs.py [--base 200,2000] [--nodes 1000] [--pods 5000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from replay_scale import run_fresh  # noqa: E402


def run_shape(nodes: int, pods: int, work: Path) -> dict[str, Any]:
    load = os.getloadavg()
    doc = run_fresh(nodes, pods, work / f"scale-{nodes}-{pods}.json")
    doc["load_avg_before"] = load
    doc["load_avg_after"] = os.getloadavg()
    return doc


def figures(doc: dict[str, Any]) -> dict[str, float]:
    """The fitted quantities of one run: peak MiB per component, seconds per phase."""
    f: dict[str, float] = {}
    for k, v in (doc.get("peak_memory_mib") or {}).items():
        f[f"MiB {k}"] = float(v)
    s = doc.get("seconds") or {}
    for k, v in (s.get("restore_parts") or {}).items():
        f[f"s restore.{k}"] = float(v)
    for k in ("restore", "round (Job created -> finished)", "descheduler cycle (its own log)"):
        if isinstance(s.get(k), int | float):
            f[f"s {k}"] = float(s[k])
    return f


def _solve3(m: list[list[float]], y: list[float]) -> list[float]:
    """Cramer's rule for three equations."""

    def det(a: list[list[float]]) -> float:
        return (
            a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])
        )

    d = det(m)
    out = []
    for col in range(3):
        mc = [[*row[:col], y[i], *row[col + 1 :]] for i, row in enumerate(m)]
        out.append(det(mc) / d)
    return out


def fit(points: list[tuple[int, int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """base + per_node x N + per_pod x P through three runs (their actual counts)."""
    m = [[1.0, float(n), float(p)] for n, p, _ in points]
    out: dict[str, dict[str, float]] = {}
    for k in points[0][2]:
        if not all(k in f for _, _, f in points):
            continue
        base, per_node, per_pod = _solve3(m, [f[k] for _, _, f in points])
        ms = k.startswith("s ")
        scale = 1000.0 if ms else 1.0  # seconds -> ms
        out[k[2:] if ms else k[4:]] = {
            "unit": "ms" if ms else "MiB",
            "base": round(base * scale, 1),
            "per_node": round(per_node * scale, 4),
            "per_pod": round(per_pod * scale, 4),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="200,2000", help="nodes,pods of the base shape")
    ap.add_argument("--nodes", type=int, default=1000, help="nodes of the second shape")
    ap.add_argument("--pods", type=int, default=5000, help="pods of the third shape")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    n0, p0 = (int(x) for x in args.base.split(","))
    work = Path(tempfile.mkdtemp(prefix="desched-object-costs-"))
    shapes = [(n0, p0), (args.nodes, p0), (n0, args.pods)]
    runs = [run_shape(n, p, work) for n, p in shapes]
    counts = [(r["cluster"]["nodes"], r["cluster"]["pods"]) for r in runs]
    result = {
        "command": "python bench/object_costs.py " + " ".join(argv or sys.argv[1:]),
        "shapes": [
            {
                "nodes": n,
                "pods": p,
                "load_avg_before": r["load_avg_before"],
                "load_avg_after": r["load_avg_after"],
                "figures": figures(r),
            }
            for (n, p), r in zip(counts, runs, strict=True)
        ],
        "per_object": fit([(n, p, figures(r)) for (n, p), r in zip(counts, runs, strict=True)]),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
