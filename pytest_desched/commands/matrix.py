"""`desched matrix`: the runbook's experiments on several releases, one row a release.

    desched matrix RELEASE... [--chart RELEASE=CHART ...] [--experiment NAME[VARIANT] ...]
                   [--kubernetes VERSION ...] [--values FILE] [--policy FILE]
                   [--round-timeout SECONDS] [-o text|json|yaml|md]

A RELEASE is any form `desched canary --candidate/--baseline` takes (`pinned`,
`version:vX.Y.Z`, `source:PATH[@LABEL]`, `binary:PATH`, `image:REPO:TAG`). Releases are
arguments, as experiments are to `desched run` and files to `desched lint`: `--release` is
the Helm release's name on every subcommand. `--kubernetes` more than once makes a grid:
every release at every version, one cluster per cell. Exit 0 every row ran and every outcome is
explained by the known-bug registry, 1 a disagreement or an unexplained outcome, 2 bad input
(before any cluster), 3 a release could not run.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from pytest_desched import render as out
from pytest_desched.config import add_config_options, config_from_args
from pytest_desched.log import say


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "matrix",
        help="the runbook's experiments on several releases; known bugs proven per release",
    )
    p.set_defaults(func=cmd_matrix, parser=p)
    p.add_argument(
        "releases",
        nargs="*",
        metavar="RELEASE",
        help="a release as --candidate takes it (pinned, version:vX.Y.Z, source:PATH[@LABEL], "
        "binary:PATH); one row each, in this order",
    )
    p.add_argument(
        "--chart",
        action="append",
        default=[],
        metavar="RELEASE=CHART",
        help="a release's chart, as --candidate-chart takes it (repeatable; default: the pinned "
        "chart, or the candidate's rule)",
    )
    p.add_argument(
        "--experiment",
        action="append",
        default=None,
        metavar="NAME[VARIANT]",
        help="a registered experiment (`desched list`), all its variants or one (repeatable; "
        "default: the runbook's three, both variants)",
    )
    p.add_argument(
        "--expect",
        default=None,
        metavar="FILE",
        help="a canary explanation file: its static policy-translation entries accept a "
        "protection a release cannot express (docs/matrix.md)",
    )
    # Repeatable here (a grid), where every other command takes one: defined before the shared
    # options, so add_config_options leaves the spelling to it (DESCHED_KUBERNETES still
    # gives the one version when no --kubernetes is given).
    p.add_argument(
        "--kubernetes",
        action="append",
        default=None,
        dest="grid_kubernetes",
        metavar="VERSION",
        help="a served Kubernetes release (vX.Y.Z) every release runs at (repeatable: a grid "
        "of releases x versions, one cluster per cell; default: --desched-kubernetes's "
        "environment and ini, else the pin) [env DESCHED_KUBERNETES]",
    )
    p.add_argument(
        "--round-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="stop a round's Job after this long and read it (default 120; a release that "
        "hangs at start, #1839, costs this per round)",
    )
    add_config_options(p, "matrix")
    out.add_output(p)


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: a number of seconds above 0")
    return value


def command_line(args: argparse.Namespace) -> str:
    """The command as a user would type it again (for the report)."""
    argv = ["desched", "matrix", *args.releases]
    argv += [f"--chart={c}" for c in args.chart]
    argv += [f"--experiment={e}" for e in args.experiment or ()]
    argv += [f"--kubernetes={k}" for k in getattr(args, "grid_kubernetes", None) or ()]
    argv += [f"--expect={args.expect}"] if args.expect else []
    argv += [f"--round-timeout={args.round_timeout:g}"] if args.round_timeout else []
    for flag in ("--desched-values", "--desched-policy", "--desched-provider"):
        for v in _as_list(getattr(args, flag, None)):
            argv.append(f"--{flag.removeprefix('--desched-')}={v}")
    return shlex.join(argv)


def _as_list(v: Any) -> list[Any]:
    return [] if v in (None, False) else list(v) if isinstance(v, list | tuple) else [v]


def cmd_matrix(args: argparse.Namespace) -> int:
    # heavy: the kubernetes client, kept out of `desched` start-up
    from pytest_desched.canary.expectations import load_explanations
    from pytest_desched.canary.matrix import (
        check_grid,
        pair_charts,
        parse_experiments,
        run_matrix,
    )

    pair_charts(args.releases, args.chart)  # bad input before a run folder is claimed
    parse_experiments(args.experiment)
    load_explanations(args.expect)
    kubes = list(args.grid_kubernetes or ())
    check_grid(kubes)
    config = config_from_args(args)
    if args.round_timeout:
        config = config.with_(round_timeout=args.round_timeout)
    matrix = run_matrix(
        config,
        args.releases,
        args.chart,
        experiments=args.experiment,
        report=say,
        command=command_line(args),
        expect=args.expect,
        kubernetes=kubes,
    )
    out.emit(
        out.render(
            matrix.to_dict(),
            args.output,
            text=lambda: matrix.render("text"),
            md=lambda: matrix.render("md"),
        )
    )
    say(f"report: {config.artifacts / 'matrix.md'} and matrix.json")
    return matrix.exit_code
