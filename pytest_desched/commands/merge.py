"""`desched merge DIR... --out-dir OUT`: N CI shards' evidence as one run and one verdict.

The merge itself (the shards proven one whole run, copied, one report) is evidence.merge.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_desched import render as out
from pytest_desched.errors import EXIT_FAILED, EXIT_OK
from pytest_desched.evidence.merge import merge
from pytest_desched.log import say


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge, say the verdict; exit 0 pass, 1 a shard failed, 2 not one whole run."""
    m = merge([Path(d) for d in args.shards], Path(args.out_dir))
    s = m.summary
    rows = [
        {k: r[k] for k in ("shard", "exit_status", "wall_s", "folder")} for r in s["shard_runs"]
    ]
    cols = {"shard": "SHARD", "exit_status": "EXIT", "wall_s": "WALL S", "folder": "FOLDER"}

    def text() -> str:
        verdict = f"run {m.run_id}: {m.n} shards merged: {s['verdict'].upper()}"
        return "\n".join([out.table(rows, cols, "text").rstrip(), *m.failed, verdict]) + "\n"

    out.emit(out.render(s, args.output, text=text, md=lambda: out.table(rows, cols, "md")))
    say(f"merged evidence: {m.out} (report {s['report'] or 'not written: no experiment ran'})")
    return EXIT_OK if m.ok else EXIT_FAILED


def add_parser(sub: Any) -> None:
    """Register `desched merge` on the main `desched` subparsers."""
    p = sub.add_parser("merge", help="join N shards' evidence folders into one run and verdict")
    p.set_defaults(func=cmd_merge, parser=p)
    p.add_argument(
        "shards",
        nargs="+",
        metavar="DIR",
        help="each shard's evidence folder (pytest --desched-shard K/N), every K of N once",
    )
    p.add_argument(
        "--out-dir",
        required=True,
        metavar="OUTDIR",
        help="a new or empty folder: report.html, run-summary.json, junit.xml, the shards' "
        "folders as shard-K-of-N/, desched-durations.json",
    )
    out.add_output(p)
