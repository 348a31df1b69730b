#!/usr/bin/env python3
"""Timeline replay at speed: is any change late for its round (issue 42, target 2)?

A generated cluster (`replay.generator`, default 1,000 nodes / 10,000 pods) and a seeded
window over it (`replay.timeline_gen`: 30 minutes, 5,000 changes at a steady rate: Deployment
scale-ups and -downs, node label and taint changes, bare pods and Deployments created and
deleted), written as a timeline file, then replayed with `replay_timeline` (what
`desched replay --timeline FILE --speed N` runs) once per speed, each on a fresh cluster,
under replay_scale.py's policy (node affinity and taint violations, caps 5 / 50).

    python bench/timeline_bench.py [--nodes 1000] [--pods 10000] [--window 30m]
        [--changes 5000] [--speeds 10,20,40] [--every 2m] [--seed 1] [--out FILE]

Per speed: changes applied late (more than the engine's KEEP_UP_S window seconds after their
moment: count, p50, p99, max), changes that landed after the moment of the round due to see
them (each held it at the barrier), rounds started late, stale rounds (a round started on a
state missing changes already due: must be 0), changes that failed, the speed_check verdict,
the wall of one apply, wall times (bring-up, install, restore, rounds, all) and the load
average (start, max while replaying, end: the machine may be shared). JSON on stdout (and in
--out), then a markdown table and the highest speed with no stale round and no change after
its round's moment. Progress on stderr. Exit 0 when every speed ran.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from replay_scale import POLICY, log  # noqa: E402


class LoadSampler:
    """The 1-minute load average every `interval` s while a replay runs: its maximum."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval, self.peak = interval, os.getloadavg()[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def one_speed(path: Path, speed: float, every: str | None, work: Path, timeout: float) -> Any:
    """One `replay --timeline` at `speed` on a fresh cluster: its figures."""
    from pytest_desched import build_config
    from pytest_desched.replay.timeline.run import KEEP_UP_S, check_timeline, replay_timeline
    from pytest_desched.session import interrupts_unwind

    checked = check_timeline(path, speed, None, every)
    config = build_config({"--desched-provider": "embedded"}, run_dir=work / f"run-{speed:g}x")
    load0 = os.getloadavg()
    w0 = time.monotonic()
    with interrupts_unwind(), LoadSampler() as load:
        result = replay_timeline(
            path,
            speed,
            every=every,
            config=config,
            report=log,
            round_timeout=timeout,
            checked=checked,
        )
    wall = time.monotonic() - w0
    tl, t = result.timeline, result.timings
    rounds = tl.get("rounds") or []
    round_s = sum(v for k, v in t.items() if k.startswith("replay.round"))
    late_rounds = [r for r in rounds if (r.get("late_s") or 0) > KEEP_UP_S]
    return {
        "speed": speed,
        "rounds": len(rounds),
        "every_s": tl.get("every_s"),
        "changes": tl.get("changes"),
        "applied_changes": tl.get("applied_changes"),
        "not_reached": tl.get("not_reached"),
        "lateness": tl.get("lateness"),
        "rounds_late": len(late_rounds),
        "rounds_late_max_s": max((r.get("late_s") or 0 for r in rounds), default=0.0),
        "rounds_waited_max_wall_s": max((r.get("waited_s") or 0 for r in rounds), default=0.0),
        "rounds_saw_changes_ahead": sum(1 for r in rounds if r.get("ahead")),
        "stale_rounds": sum(1 for r in rounds if r.get("stale")),
        "failures": len(tl.get("failures") or []),
        "failures_first": (tl.get("failures") or [])[:3],
        "speed_check": tl.get("speed_check"),
        "seconds": {
            "window at this speed": round(tl["window_s"] / speed, 1),
            "bring_up": t.get("bring_up"),
            "install": t.get("install"),
            "restore": t.get("replay.restore"),
            "rounds (all phases)": round(round_s, 1),
            "replay() wall, teardown included": round(wall, 1),
        },
        "engine_timings": t,  # every phase the engine timed (rounds, aftermaths, ledger)
        "load_avg": {
            "start": [round(x, 2) for x in load0],
            "max_1m_while_replaying": round(load.peak, 2),
            "end": [round(x, 2) for x in os.getloadavg()],
        },
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| speed | changes late (>1 s) | p99 / max late (window s) | after their round's moment "
        "| rounds late (max window s) | stale rounds | failed | kept up | restore s | wall s "
        "| load max |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        la, s = r["lateness"] or {}, r["seconds"]
        lines.append(
            f"| {r['speed']:g}x | {la.get('late')} of {la.get('changes')} "
            f"| {la.get('p99_s')} / {la.get('max_s')} | {la.get('after_round_moment')} "
            f"| {r['rounds_late']} of {r['rounds']} ({r['rounds_late_max_s']}) "
            f"| {r['stale_rounds']} | {r['failures']} | {r['speed_check']['kept_up']} "
            f"| {s['restore']} | {s['replay() wall, teardown included']} "
            f"| {r['load_avg']['max_1m_while_replaying']} |"
        )
    return head + "\n".join(lines)


def best_speed(rows: list[dict[str, Any]]) -> float | None:
    """The highest speed at which no round started on a stale state and no change landed
    after the moment of the round due to see it."""
    ok = [
        r["speed"]
        for r in rows
        if r["stale_rounds"] == 0 and (r["lateness"] or {}).get("after_round_moment") == 0
    ]
    return max(ok, default=None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--window", default="30m", help="the window's length (90s, 30m, 1h)")
    ap.add_argument("--changes", type=int, default=5000)
    ap.add_argument("--speeds", default="10,20,40", help="comma-separated, e.g. 10,20,40")
    ap.add_argument("--every", default=None, help="round cadence (default: the chart's 2m)")
    ap.add_argument("--timeout", type=float, default=600, help="each round")
    ap.add_argument(
        "--apply-lanes", type=int, default=None, help="changes applied at once (the engine's 8)"
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the snapshot and run dirs")
    args = ap.parse_args(argv)

    from pytest_desched.replay.capture.timeline import check_speed, parse_duration
    from pytest_desched.replay.gen.generator import Shape, generate
    from pytest_desched.replay.gen.timeline_gen import Churn, churn_window

    speeds = [check_speed(s) for s in args.speeds.split(",") if s.strip()]
    if args.apply_lanes:
        from pytest_desched.replay.timeline import run as timeline_run

        timeline_run.APPLY_LANES = args.apply_lanes
    window_s = parse_duration(args.window, "--window")
    work = Path(tempfile.mkdtemp(prefix="desched-bench-timeline-"))
    try:
        g0 = time.monotonic()
        snap = generate(Shape(seed=args.seed, nodes=args.nodes, pods=args.pods))
        snap.policy = POLICY
        tl = churn_window(snap, Churn(seed=args.seed, window_s=window_s, changes=args.changes))
        path = tl.write(work / "window.jsonl")
        t_gen = time.monotonic() - g0
        log(
            f"generated {len(snap.nodes)} nodes / {len(snap.pods)} pods and {len(tl.changes)} "
            f"changes over {window_s:g} s in {t_gen:.1f}s ({path.stat().st_size >> 20} MiB): "
            f"{tl.header['changesByKind']}"
        )
        rows: list[dict[str, Any]] = []
        out: dict[str, Any] = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "python bench/timeline_bench.py " + " ".join(argv or sys.argv[1:]),
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "load_avg_start": [round(x, 2) for x in os.getloadavg()],
            },
            "cluster": {"nodes": len(snap.nodes), "pods": len(snap.pods), "seed": args.seed},
            "window": {
                "seconds": window_s,
                "changes": len(tl.changes),
                "per_window_s": round(len(tl.changes) / window_s, 2),
                "by_kind": tl.header["changesByKind"],
                "generate_s": round(t_gen, 2),
            },
            "apply_lanes": args.apply_lanes or "the engine's",
            "speeds": rows,
        }
        for v in speeds:
            log(f"--- speed {v:g}x")
            rows.append(one_speed(path, v, args.every, work, args.timeout))
            log(f"speed {v:g}x: {json.dumps(rows[-1]['lateness'])}")
            out["highest_speed_without_late_changes"] = best_speed(rows)
            if args.out:  # after each speed: a run stopped later keeps what it measured
                args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
        text = json.dumps(out, indent=1, default=str)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        print(table(rows))
        print(
            f"\nhighest speed with no stale round and no change after its round's moment: "
            f"{out['highest_speed_without_late_changes']}"
        )
        return 0
    finally:
        if not args.keep:  # the snapshot, the timeline and each speed's run dir
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")


if __name__ == "__main__":
    raise SystemExit(main())
