#!/usr/bin/env python3
"""Time the embedded cluster's bring-up alone: `EmbeddedProvider.start` to 3 Ready workers.

    python bench/bring_up.py [--runs 3] [--checkout DIR]

One JSON line per run: the wall of `start()`, the load at its start and the provider's own
phase timings (tools, control plane, nodes). `--checkout` times another checkout's package
(an older commit, `git archive` into DIR) with this interpreter, so before and after can
alternate in one shell loop. Each cluster is deleted after its run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--checkout", type=Path, default=REPO)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.checkout.resolve()))
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider
    from pytest_desched.tools.toolchain import Toolchain

    for _ in range(args.runs):
        load = os.getloadavg()[0]
        provider = EmbeddedProvider(Toolchain(), workers=3, report=lambda _m: None)
        t0 = time.monotonic()
        try:
            provider.start()
            wall = time.monotonic() - t0
        finally:
            provider.stop()
        timings = {k: round(v, 3) for k, v in provider.timings.items()}
        print(json.dumps({"wall_s": round(wall, 3), "load_1m": round(load, 2), **timings}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
