"""The runbook's experiments on real kind, timed like bench/run_bench.py times the embedded ones.

    DOCKER_HOST=unix:///run/pytest-desched/docker.sock .venv/bin/python bench/kind_bench.py [--runs N]

Needs the engine and the images of `make kind-image`. Per run: a fresh kind cluster (1 control
plane + 3 workers) to Ready, the chart's first install, the seven experiments in
bench/run_bench.py's order, teardown (release cleanup, `kind delete cluster`). Prints a
markdown table (min/median/max per phase) for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

PLAN = [
    ("positive", "pdb-lister-workaround"),
    ("nodefit", "pdb-lister-workaround"),
    ("pdb", "pdb-lister-workaround"),
    ("minpodage", "pdb-lister-workaround"),
    ("positive", "runbook"),
    ("nodefit", "runbook"),
    ("pdb", "runbook"),
]


def log(msg: str) -> None:
    print(f"[kind-bench] {msg}", file=sys.stderr, flush=True)


def one_run(i: int, workdir: Path) -> dict[str, float | str]:
    from pytest_desched.config import build_config
    from pytest_desched.session import DeschedSession

    rdir = workdir / f"run{i}"
    rdir.mkdir(parents=True, exist_ok=True)
    config = build_config(
        {"--desched-provider": "kind", "--desched-keep": "never"},
        run_dir=rdir,
        artifacts=rdir / "artifacts",
    )
    phases: dict[str, float | str] = {}
    session = DeschedSession(config, report=log)
    t0 = time.monotonic()
    try:
        session.cluster  # noqa: B018
        phases["bring-up (kind create → 4 Ready nodes)"] = round(time.monotonic() - t0, 2)
        t = time.monotonic()
        session.release  # noqa: B018
        phases["chart first install"] = round(time.monotonic() - t, 2)
        for name, variant in PLAN:
            t = time.monotonic()
            res = session.run(name, variant=variant)
            key = f"experiment {name}[{variant}]"
            phases[key] = round(time.monotonic() - t, 2)
            phases[f"{key} outcome"] = res.outcome
            round_s = (res.timings or {}).get("round")
            if round_s is not None:
                phases[f"  {name}[{variant}] round (Job create → log read)"] = round(round_s, 2)
            log(f"run {i}: {name}[{variant}] {res.outcome} in {phases[key]}s")
    finally:
        t = time.monotonic()
        session.close()
        phases["teardown (release cleanup + kind delete)"] = round(time.monotonic() - t, 2)
        phases["total"] = round(time.monotonic() - t0, 2)
    return phases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="kind-bench-") as tmp:
        for i in range(args.runs):
            runs.append(one_run(i, Path(tmp)))
    keys = [k for k in runs[0] if not k.endswith("outcome")]
    print(f"| phase (kind, {args.runs} run(s)) | min (s) | median (s) | max (s) |")
    print("|---|---:|---:|---:|")
    for k in keys:
        vals = [float(r[k]) for r in runs if k in r]
        print(f"| {k} | {min(vals)} | {statistics.median(vals)} | {max(vals)} |")
    print()
    for k in runs[0]:
        if k.endswith("outcome"):
            print(f"- {k.removesuffix(' outcome')}: {', '.join(str(r.get(k)) for r in runs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
