#!/usr/bin/env python3
"""Are replays deterministic? The generator's two incidents, each replayed N times on fresh
embedded clusters (issue 29, deliverable 3), the eviction sets compared per pod identity.

    python bench/repeat_bench.py [--repeat 10] [--out FILE]

The same path as `desched replay SNAPSHOT --repeat N`: `replay()` once per run, then
`replay.repeat.run_comparison`. JSON on stdout (and in --out): per incident the comparison
(same, different or not comparable; the identities that differ and their pods per run), the wall seconds of each run and
the load average before and after, since the machine is shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    from pytest_desched import build_config
    from pytest_desched.log import say
    from pytest_desched.replay.gen.incidents import label_move, pdb_drain
    from pytest_desched.replay.ledger import evictions
    from pytest_desched.replay.repeat import run_comparison
    from pytest_desched.replay.run import replay
    from pytest_desched.session import interrupts_unwind

    work = Path(tempfile.mkdtemp(prefix="desched-bench-repeat-"))
    out: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python bench/repeat_bench.py " + " ".join(argv or sys.argv[1:]),
        "cpus": os.cpu_count(),
        "incidents": {},
    }
    for make in (label_move, pdb_drain):
        inc = make()
        path = inc.snapshot.write(work / f"{inc.name}.yaml")
        ledgers, walls, loads = [], [], []
        for i in range(1, args.repeat + 1):
            run_dir = work / f"{inc.name}-{i}"
            config = build_config({"--desched-provider": "embedded"}, run_dir=run_dir)
            load0, t0 = os.getloadavg()[0], time.monotonic()
            with interrupts_unwind():
                res = replay(path, config=config, report=lambda m: None)
            walls.append(round(time.monotonic() - t0, 1))
            loads.append((round(load0, 2), round(os.getloadavg()[0], 2)))
            ledgers.append(res.ledger)
            n = len(evictions(res.ledger))
            say(f"repeat bench: {inc.name} run {i}/{args.repeat}: {n} evicted")
        cmp = run_comparison(ledgers)
        cmp["expected_evicted"] = sorted(
            p for p, w in inc.expected.items() if w["fate"] == "evicted"
        )
        cmp["wall_s"] = walls
        cmp["load_avg_1m_before_after"] = loads
        out["incidents"][inc.name] = cmp
        if args.out:
            args.out.write_text(json.dumps(out, indent=1) + "\n")
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
