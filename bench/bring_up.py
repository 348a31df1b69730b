#!/usr/bin/env python3
"""Time the embedded cluster's bring-up alone: `EmbeddedProvider.start` to 3 Ready workers.

    python bench/bring_up.py [--runs 3] [--checkout DIR] [--metrics]

One JSON line per run: the wall of `start()`, the load at its start and the provider's own
phase timings (tools, control plane, nodes). `--checkout` times another checkout's package
(an older commit, `git archive` into DIR) with this interpreter, so before and after can
alternate in one shell loop. `--metrics` alternates runs without and with metrics-server
(issue 50: the cost it adds), and times, after `start()`, until metrics.k8s.io serves every
worker's usage (`metrics_s`). Each cluster is deleted after its run.
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
    ap.add_argument("--metrics", action="store_true", help="alternate without/with metrics-server")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.checkout.resolve()))
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider
    from pytest_desched.tools.toolchain import Toolchain

    for run in range(args.runs * (2 if args.metrics else 1)):
        sources = ("KubernetesMetrics",) if args.metrics and run % 2 else ()
        load = os.getloadavg()[0]
        provider = EmbeddedProvider(
            Toolchain(), workers=3, report=lambda _m: None, metrics_sources=sources
        )
        t0 = time.monotonic()
        extra: dict[str, float] = {}
        try:
            cluster = provider.start()
            wall = time.monotonic() - t0
            if sources:
                from pytest_desched.lab import Lab

                t1 = time.monotonic()
                Lab(cluster, "bench-metrics").wait_node_usage(
                    {n: (lambda m: m >= 0) for n in cluster.workers}, timeout=120
                )
                extra["metrics_s"] = round(time.monotonic() - t1, 3)
        finally:
            provider.stop()
        timings = {k: round(v, 3) for k, v in provider.timings.items()}
        line = {"metrics": list(sources), "wall_s": round(wall, 3), "load_1m": round(load, 2)}
        print(json.dumps({**line, **timings, **extra}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
