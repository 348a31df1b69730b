"""`desched explain POD --record FILE`: one pod's fate in every cycle, its layer and reason."""

from __future__ import annotations

import argparse
from typing import Any

from pytest_desched import render as out
from pytest_desched.errors import EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    # heavy: its imports, kept out of `desched` start-up
    from pytest_desched.evidence.explain import explain, load, to_text

    x = explain(args.pod, load(args.record))
    out.emit(out.render(x, args.output, text=lambda: to_text(x)))
    return EXIT_OK


def add_parser(sub: Any) -> None:
    ex = sub.add_parser("explain", help="one pod's fate in every cycle, its layer and reason")
    ex.set_defaults(func=cmd_explain, parser=ex)
    ex.add_argument("pod", metavar="POD", help="pod name or namespace/name")
    ex.add_argument(
        "--record",
        required=True,
        metavar="FILE",
        help="cycles.json, an experiment's evidence folder, a <round>.json record, or a replay "
        "ledger (desched replay ... -o json)",
    )
    out.add_output(ex)
