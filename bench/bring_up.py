#!/usr/bin/env python3
"""Time the embedded cluster's bring-up alone: `EmbeddedProvider.start` to 3 Ready workers.

    python bench/bring_up.py [--runs 3] [--checkout DIR] [--metrics | --prometheus]

One JSON line per run: the wall of `start()`, the load at its start and the provider's own
phase timings (tools, control plane, nodes). `--checkout` times another checkout's package
(an older commit, `git archive` into DIR) with this interpreter, so before and after can
alternate in one shell loop. `--metrics` alternates runs without and with metrics-server
(issue 50: the cost it adds), and times, after `start()`, until the metrics APIService is
Available (`apiservice_s`), until a first node figure is served (`first_metrics_s`) and until
every worker's is (`metrics_s`). `--prometheus` alternates runs with metrics-server alone and
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


def metrics_times(cluster: object) -> dict[str, float]:
    """After `start()`: until the APIService is Available (the source started and serving,
    `apiservice_s`), until any node has a figure (`first_metrics_s`), until every worker has
    (`metrics_s`)."""
    from pytest_desched.kube import wait_for
    from pytest_desched.lab import Lab
    from pytest_desched.replay import kubeapi

    api = cluster.api_client  # type: ignore[attr-defined]
    t1 = time.monotonic()
    path = "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io"

    def available() -> bool:
        conds = ((kubeapi.get_or_none(api, path) or {}).get("status") or {}).get("conditions")
        return any(c.get("type") == "Available" and c.get("status") == "True" for c in conds or [])

    wait_for("the metrics APIService", available, bool, timeout=120, max_interval=0.2)
    out = {"apiservice_s": round(time.monotonic() - t1, 3)}
    lab = Lab(cluster, "bench-metrics")  # type: ignore[arg-type]
    workers = list(cluster.workers)  # type: ignore[attr-defined]
    wait_for(
        "a first node figure",
        lambda: [lab.node_usage(n) for n in workers],
        lambda got: any(u is not None for u in got),
        timeout=120,
        max_interval=0.5,
    )
    out["first_metrics_s"] = round(time.monotonic() - t1, 3)
    lab.wait_node_usage({n: (lambda m: m >= 0) for n in workers}, timeout=120)
    out["metrics_s"] = round(time.monotonic() - t1, 3)
    return out


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
            if sources:
                extra.update(metrics_times(cluster))
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
        finally:
            provider.stop()
        timings = {k: round(v, 3) for k, v in provider.timings.items()}
        line = {"metrics": list(sources), "wall_s": round(wall, 3), "load_1m": round(load, 2)}
        print(json.dumps({**line, **timings, **extra}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
