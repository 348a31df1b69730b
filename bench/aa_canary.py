#!/usr/bin/env python3
"""A/A canary: the pinned descheduler as the candidate against itself, N times in a row.

What a canary says about an upgrade is only as good as what it says about no upgrade at all:
any rollback trigger or unexplained change here is noise it would blame on a real candidate.
Each run is a full `desched canary` (static comparison, both tracks in parallel on embedded
clusters, the six runbook experiments, the metric probes, the verdict), no explanations file.

    python bench/aa_canary.py [--runs 10] [--candidate version:v0.36.0] [--no-write]

Prints one line per run and a Markdown section, which replaces the A/A section of
bench/RESULTS.md (between its markers) unless --no-write. Exit 1 when any run had a trigger,
an unexplained change or no verdict.
"""

from __future__ import annotations

import argparse
import datetime as dt
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

from pytest_desched.canary.engine import run_canary  # noqa: E402
from pytest_desched.config import build_config  # noqa: E402

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN, END = "<!-- aa-canary:begin -->", "<!-- aa-canary:end -->"


def _quiet(_msg: str) -> None:
    pass


def one_run(candidate: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="aa-canary-") as tmp:
        cfg = build_config({"--desched-provider": "embedded"}, run_dir=Path(tmp))
        cfg = cfg.with_(artifacts=Path(tmp) / "artifacts")
        t0 = time.monotonic()
        rep = run_canary(cfg, candidate, None, report=_quiet)
        wall = time.monotonic() - t0
    judged = rep.verdict.judged
    return {
        "wall_s": round(wall, 1),
        "verdict": rep.headline,
        "triggers": sum(j.trigger for j in judged),
        "unexplained": len(rep.verdict.unexplained),
        "informative": sorted({j.change.kind for j in judged if j.status == "informative"}),
        "reasons": list(rep.no_verdict) + list(rep.verdict.reasons),
    }


def section(runs: list[dict[str, Any]], candidate: str, load: tuple[float, float]) -> str:
    walls = [r["wall_s"] for r in runs]
    rows = "\n".join(
        f"| {i + 1} | {r['verdict'].split(' ')[0]} | {r['triggers']} | {r['unexplained']} | "
        f"{r['wall_s']:.1f} | {', '.join(r['informative']) or '-'} |"
        for i, r in enumerate(runs)
    )
    bad = [f"- run {i + 1}: {'; '.join(r['reasons'])}" for i, r in enumerate(runs) if r["reasons"]]
    return "\n".join(
        [
            BEGIN,
            "## A/A canary: the pinned descheduler against itself (issue 27)",
            "",
            f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, command: "
            f"`.venv/bin/python bench/aa_canary.py --runs {len(runs)}` (warm tools)",
            f"- machine: {os.cpu_count()} cores, Python {platform.python_version()}; load "
            f"average {load[0]:.1f} at start, {load[1]:.1f} at the end (other engineers' runs "
            "share the machine)",
            f"- candidate `{candidate}` = baseline; default experiments (the runbook's three, "
            "both policy variants), static comparison on, no explanations file",
            "",
            f"**{sum(r['triggers'] for r in runs)} triggers and "
            f"{sum(r['unexplained'] for r in runs)} unexplained changes in {len(runs)} runs**; "
            f"wall per run {min(walls):.1f} / {statistics.median(walls):.1f} / {max(walls):.1f} s "
            "(min / median / max).",
            "",
            "| run | verdict | triggers | unexplained | wall s | informative (said, not failing) |",
            "|---|---|---|---|---|---|",
            rows,
            *(["", *bad] if bad else []),
            END,
        ]
    )


def write(text: str) -> None:
    old = RESULTS.read_text()
    if BEGIN in old and END in old:
        head, _, rest = old.partition(BEGIN)
        _, _, tail = rest.partition(END)
        RESULTS.write_text(head + text + tail)
    else:
        RESULTS.write_text(old.rstrip("\n") + "\n\n" + text + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--candidate", default="version:v0.36.0")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    runs = []
    for i in range(args.runs):
        r = one_run(args.candidate)
        runs.append(r)
        print(
            f"[aa] run {i + 1}/{args.runs}: {r['verdict']} triggers={r['triggers']} "
            f"unexplained={r['unexplained']} wall={r['wall_s']}s {'; '.join(r['reasons'])}",
            file=sys.stderr,
            flush=True,
        )
        text = section(runs, args.candidate, (load0, os.getloadavg()[0]))
        if not args.no_write:  # after every run: a series cut short still has its figure
            write(text)
    print(text)
    return 0 if all(not r["reasons"] and r["triggers"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
