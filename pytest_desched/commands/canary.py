"""`desched canary`: a candidate descheduler or chart against the baseline, and the verdict.

Exit 0 no unexplained difference, 1 one, 2 bad input before any cluster, 3 a track could not
run (no verdict on the candidate).
"""

from __future__ import annotations

import argparse
from typing import Any

from pytest_desched import render as out
from pytest_desched.config import add_config_options, config_from_args
from pytest_desched.errors import ConfigError
from pytest_desched.log import say


def cmd_canary(args: argparse.Namespace) -> int:
    """Both tracks, the diff, the verdict; the Markdown report on stdout (or JSON)."""
    # heavy: the kubernetes client, kept out of `desched` start-up
    from pytest_desched.canary.engine import run_canary

    config = config_from_args(args)
    candidate = getattr(config, "candidate", None)
    if not candidate:
        raise ConfigError(
            "desched canary needs --candidate SPEC (version:vX.Y.Z, source:PATH, binary:PATH)"
        )
    if args.snapshot:
        # heavy: the kubernetes client, kept out of `desched` start-up
        from pytest_desched.canary.snapshot import from_args

        rep = from_args(args, config, candidate, say)
    else:
        rep = run_canary(
            config,
            candidate,
            getattr(config, "candidate_chart", None),
            expect=args.expect,
            experiments=args.experiment,
            report=say,
            parallel=not args.serial,
            static=not args.no_static,
            behaviour=not args.static_only,
        )
    out.emit(out.render(rep.to_dict(), args.output, text=rep.markdown))
    say(f"report: {config.artifacts / 'canary.md'} and canary.json")
    return rep.final_verdict.exit_code  # a track could not run: no verdict, exit as infra


def add_parser(sub: Any) -> None:
    c = sub.add_parser("canary", help="a candidate descheduler/chart against the baseline")
    c.set_defaults(func=cmd_canary, parser=c)
    add_config_options(c, "canary")  # includes --candidate and --candidate-chart
    c.add_argument("--expect", default=None, metavar="FILE", help="explanations of changes")
    c.add_argument(
        "--experiment",
        action="append",
        default=None,
        help="name or name[variant] (repeatable; default: the runbook's three, both variants)",
    )
    c.add_argument(
        "--snapshot",
        default=None,
        metavar="SNAP",
        help="your cluster's state instead of the lab: a `desched snapshot` file (or a "
        "`desched record` window's start), restored once per track, one round each, every "
        "pod's fate compared",
    )
    c.add_argument("--serial", action="store_true", help="one track after the other")
    c.add_argument("--no-static", action="store_true", help="skip the static comparison")
    c.add_argument(
        "--static-only",
        action="store_true",
        help="charts and policies only: no cluster, no experiments (a CI pre-check)",
    )
    out.add_output(c, default="md")
