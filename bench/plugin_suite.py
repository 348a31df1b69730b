#!/usr/bin/env python3
"""One run of the suite through the plugin's engine: the figure compared with the plain script.

Bring-up of a fresh embedded cluster, the chart's first install (suspended, dry run), the
runbook's three experiments with the #1882 workaround policy, and teardown: every release
removed, the cluster deleted and its deletion checked (no process, no folder: the cleanup
proof of the lab namespaces inside, see DeschedSession._close). Every check of every
experiment must pass.

    python bench/plugin_suite.py OUT.json [--mode auto|lanes|sequential]

`--mode auto` (default) lets the engine choose as `DeschedSession.run_concurrently` does
(experiments/lanes.py `decide_execution`: lanes only with a core to spare per lane), decided
before bring-up so a sequential suite gets 3 workers and lanes 6; the choice is recorded.
`lanes`: side by side (one lane, namespace, node pair and release each); `sequential`: one
after another (same release, a fresh namespace each).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WORKAROUND = "pdb-lister-workaround"
SUITE = ("positive", "nodefit", "pdb")


def log(msg: str) -> None:
    print(f"[plugin {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_suite(workdir: Path, mode: str = "auto") -> dict[str, Any]:
    """The suite once; `ok` only when every experiment passed and nothing was left behind."""
    from pytest_desched.config import build_config
    from pytest_desched.experiments.lanes import decide_execution
    from pytest_desched.session import DeschedSession

    asked = {"lanes": "always", "sequential": "never"}.get(mode, mode)
    execution = decide_execution(len(SUITE), asked)
    sequential = execution["mode"] == "sequential"

    config = build_config(
        {
            "--desched-provider": "embedded",
            "--desched-keep": "never",
            "--desched-workers": "3" if sequential else str(2 * len(SUITE)),
        },
        run_dir=workdir,
        artifacts=workdir / "artifacts",
    )
    out: dict[str, Any] = {"mode": execution["mode"], "execution": execution, "errors": []}
    marks: dict[str, float] = {}
    session = DeschedSession(config, report=log)
    t0 = time.monotonic()
    try:
        session.cluster  # noqa: B018 (bring-up)
        marks["up"] = time.monotonic() - t0
        if sequential:
            session.release  # noqa: B018 (first install: suspended, dry run)
            marks["installed"] = time.monotonic() - t0
            results = [session.run(name, WORKAROUND) for name in SUITE]
        else:  # every lane's release installs (suspended, dry run) at the same time
            results = session.run_concurrently([(n, WORKAROUND) for n in SUITE], mode="always")
        marks["experiments_done"] = time.monotonic() - t0
        out["experiments"] = [
            {
                "label": r.label,
                "outcome": r.outcome,
                "checks": len(r.checks),
                "failed": [c.id for c in r.failed],
                "evictions": r.evictions,
                "blocking_layer": r.blocking_layer,
                "timings": r.timings,
            }
            for r in results
        ]
        out["errors"] += [
            f"{r.label}: {r.outcome}: {r.message[:300]}" for r in results if r.outcome != "pass"
        ]
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {str(exc)[:800]}")
    finally:
        try:
            report = session.close()
            out["namespaces_gone"] = report.get("namespaces_gone")
            out["namespaces_discarded"] = report.get("namespaces_discarded")
            out["cluster_deleted"] = report.get("cluster_deleted")
            left = [
                f"{k}: {v.get('leftovers')}"
                for k, v in report.items()
                if k.startswith("cleanup") and isinstance(v, dict) and v.get("leftovers")
            ]
            out["errors"] += left
        except Exception as exc:  # the final namespace scan raises here
            out["errors"].append(f"teardown: {type(exc).__name__}: {str(exc)[:800]}")
    marks["torn_down"] = time.monotonic() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)  # this Python process alone, every thread
    out["self_cpu_s"] = round(me.ru_utime + me.ru_stime, 3)
    out["wall_s"] = round(marks["torn_down"], 3)
    out["marks_s"] = {k: round(v, 3) for k, v in marks.items()}
    out["timings"] = dict(session.timings)
    out["ok"] = not out["errors"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mode", choices=("auto", "lanes", "sequential"), default="auto")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="desched-suite-") as tmp:
        data = run_suite(Path(tmp), args.mode)
    args.out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    log(f"suite {'ok' if data['ok'] else 'FAILED'} in {data['wall_s']}s: {data['errors'] or ''}")
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
