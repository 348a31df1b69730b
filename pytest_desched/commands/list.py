"""`desched list`: the registered experiments, their variants and strategies.

It needs no tool and no cluster: the experiments come from the registry.
"""

from __future__ import annotations

import argparse
from textwrap import shorten
from typing import Any

from pytest_desched import render as out
from pytest_desched.errors import EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    # heavy: the kubernetes client, kept out of `desched` start-up
    from pytest_desched.experiments.catalogue import catalogue

    rows = catalogue()
    cols = {"name": "NAME", "variants": "VARIANTS", "strategies": "STRATEGIES"}
    cols |= {"description": "DESCRIPTION"}

    def text() -> str:  # the first sentence, at most 60 characters: a table fits a terminal
        cut = {
            r["name"]: shorten(r["description"].split(". ")[0], 60, placeholder=" ...")
            for r in rows
        }
        return out.table([{**r, "description": cut[r["name"]]} for r in rows], cols, "text")

    out.emit(out.render(rows, args.output, text=text, md=lambda: out.table(rows, cols, "md")))
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("list", help="the registered experiments, their variants and strategies")
    p.set_defaults(func=cmd_list, parser=p)
    out.add_output(p)
