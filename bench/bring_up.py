#!/usr/bin/env python3
"""Time the embedded cluster's bring-up alone: `EmbeddedProvider.start` to 3 Ready workers.

    python bench/bring_up.py [--runs 3] [--checkout DIR] [--metrics | --prometheus]

One JSON line per run: the wall of `start()`, the load at its start and the provider's own
phase timings (tools, control plane, nodes). `--checkout` times another checkout's package
(an older commit, `git archive` into DIR) with this interpreter, so before and after can
alternate in one shell loop. `--metrics` alternates runs without and with metrics-server
(issue 50: the cost it adds), and times, after `start()`, until metrics.k8s.io serves every
worker's usage (`metrics_s`). `--prometheus` alternates runs with metrics-server alone and
with Prometheus (which runs kwokctl's metrics wiring too: the difference is what Prometheus and
its front add), and times until its rule serves every worker (`prometheus_rule_s`). Each
cluster is deleted after its run.
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
    ap.add_argument(
        "--prometheus", action="store_true", help="alternate metrics-server alone/with Prometheus"
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.checkout.resolve()))
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider
    from pytest_desched.tools.toolchain import Toolchain

    pairs = args.metrics or args.prometheus
    for run in range(args.runs * (2 if pairs else 1)):
        sources: tuple[str, ...] = ("KubernetesMetrics",) if args.metrics and run % 2 else ()
        if args.prometheus:
            sources = ("Prometheus",) if run % 2 else ("KubernetesMetrics",)
        load = os.getloadavg()[0]
        provider = EmbeddedProvider(
            Toolchain(), workers=3, report=lambda _m: None, metrics_sources=sources
        )
        t0 = time.monotonic()
        extra: dict[str, float] = {}
        try:
            cluster = provider.start()
            wall = time.monotonic() - t0
            if "Prometheus" in sources:
                from pytest_desched.kube import wait_for
                from pytest_desched.providers.embedded.prometheus import (
                    NODE_CPU,
                    PrometheusSource,
                )

                t1 = time.monotonic()
                src = PrometheusSource.of(cluster.workdir)
                workers = list(cluster.workers)
                wait_for(
                    f"{NODE_CPU} for every worker",
                    src.node_usage,
                    lambda s, ws=workers: bool(s) and all(w in s for w in ws),
                    timeout=120,
                )
                extra["prometheus_rule_s"] = round(time.monotonic() - t1, 3)
            elif sources:
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
