#!/usr/bin/env python3
"""Canary parallelism: both tracks side by side against one track alone, on warm tools.

Alternating rounds (default 3 each): "one track" runs the baseline's experiments on one
embedded cluster (bring-up, install, the six runbook experiments, metric probe, teardown);
"both tracks" runs the same against a candidate on two clusters in parallel, exactly as
`desched canary` does (without the static comparison, which does not depend on
parallelism). Targets: at most 1.5x one track (issue 11), 1.3x with two releases on a quiet machine (issue 42).

    python bench/canary_bench.py [--runs 3] [--candidate source:PATH] [--out FILE]
        [--baseline SPEC --baseline-chart CHART] [--candidate-chart CHART]

The candidate defaults to the PR 1883 snapshot in ../shared/upstream with its tree's chart,
the baseline to the pin; "one track" is the baseline's. Both releases are built and cached
once (by version, commit or digest); the builds are not timed. Prints a Markdown table; exit 1 when a round errored.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_desched.canary.engine import track_configs  # noqa: E402
from pytest_desched.canary.tracks import DEFAULT_EXPERIMENTS, run_track, run_tracks  # noqa: E402
from pytest_desched.config import build_config  # noqa: E402
from pytest_desched.session import DeschedSession  # noqa: E402
from tests.upstream import tarball  # noqa: E402


def _quiet(_msg: str) -> None:
    pass


def _tracks(tmp: str, rel: dict[str, str | None]) -> tuple[Any, Any]:
    cfg = build_config({"--desched-provider": "embedded"}, run_dir=Path(tmp))
    return track_configs(cfg, rel["candidate"] or "", rel["candidate_chart"], True,
                         rel["baseline"], rel["baseline_chart"])  # fmt: skip


def one_track(rel: dict[str, str | None]) -> tuple[float, str | None]:
    with tempfile.TemporaryDirectory(prefix="canary-bench-") as tmp:
        base, _ = _tracks(tmp, rel)
        t0 = time.monotonic()
        res = run_track(
            "baseline", DeschedSession(base, report=_quiet), DEFAULT_EXPERIMENTS, threading.Event()
        )
        return time.monotonic() - t0, res.error


def both_tracks(rel: dict[str, str | None]) -> tuple[float, str | None]:
    with tempfile.TemporaryDirectory(prefix="canary-bench-") as tmp:
        base, cand = _tracks(tmp, rel)
        b_s, c_s = DeschedSession(base, report=_quiet), DeschedSession(cand, report=_quiet)
        c_s.toolchain.path("descheduler")  # the candidate's build is cached before timing
        t0 = time.monotonic()
        b, c = run_tracks(b_s, c_s, DEFAULT_EXPERIMENTS, parallel=True)
        return time.monotonic() - t0, b.error or c.error


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--candidate", default=None)
    ap.add_argument("--candidate-chart", default=None, help="default: tree (the PR's own)")
    ap.add_argument("--baseline", default=None, help="default: the pin")
    ap.add_argument("--baseline-chart", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    candidate = args.candidate or f"source:{tarball('pr1883')}"
    rel = {
        "candidate": candidate,
        "candidate_chart": args.candidate_chart or ("tree" if not args.candidate else None),
        "baseline": args.baseline,
        "baseline_chart": args.baseline_chart,
    }
    # Warm both releases' builds outside the timing.
    with tempfile.TemporaryDirectory(prefix="canary-bench-") as tmp:
        for track in _tracks(tmp, rel):
            DeschedSession(track, report=_quiet).toolchain.path("descheduler")
    one: list[float] = []
    both: list[float] = []
    errors: list[str] = []
    for i in range(args.runs):
        for name, fn, into in (("one track", one_track, one), ("both tracks", both_tracks, both)):
            wall, err = fn(rel)
            into.append(wall)
            print(f"[bench] run {i + 1} {name}: {wall:.1f}s {err or ''}", file=sys.stderr)
            if err:
                errors.append(f"{name} run {i + 1}: {err}")
    ratio = statistics.median(both) / statistics.median(one)
    load = os.getloadavg()[0]
    out = {
        "machine": f"{os.cpu_count()} cores, {platform.python_version()}, load {load:.1f}",
        **rel,
        "experiments": [f"{e}[{v}]" for e, v in DEFAULT_EXPERIMENTS],
        "one_track_s": [round(x, 1) for x in one],
        "both_tracks_s": [round(x, 1) for x in both],
        "ratio_median": round(ratio, 2),
        "errors": errors,
    }
    print(
        "| figure | min | median | max |\n|---|---|---|---|\n"
        + "\n".join(
            f"| {label} | {min(v):.1f} s | {statistics.median(v):.1f} s | {max(v):.1f} s |"
            for label, v in (("one track", one), ("both tracks in parallel", both))
        )
        + f"\n\nratio both/one (median): {ratio:.2f} (issue 11: <= 1.5; issue 42, quiet: <= 1.3)"
    )
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
