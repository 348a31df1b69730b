"""`desched fidelity`: built-in experiments (or yours) run in dry run and for real, compared.

    desched fidelity [--experiment NAME ...] [--policy FILE] [--values FILE] [-o FORMAT]
    desched fidelity snapshot.yaml [--policy FILE]     (a replay snapshot restored twice)

Prints, per experiment, "dry-run predicted N of M real evictions; K differences, each
explained" and the per-pod table, or ERROR "not comparable: ..." when a half's round completed
no descheduling cycle. Exit 0 every comparison held, 1 a difference unexplained or a half
failed, 2 bad input (nothing changed), 3 no verdict: no toolchain or cluster, or a comparison
that could not be made (a half raised or was not comparable), as canary and replay exit.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pytest_desched import render as out
from pytest_desched.config import add_config_options, config_from_args
from pytest_desched.errors import ConfigError
from pytest_desched.fidelity.compare import COLUMNS, VERDICT_OF, table_rows
from pytest_desched.log import say
from pytest_desched.outcome.verdict import Verdict, combine

SHOWN = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fidelity", help="does dry run predict the real run? the same state run both ways"
    )
    p.set_defaults(func=cmd_fidelity, parser=p)
    p.add_argument(
        "--experiment",
        action="append",
        default=None,
        metavar="NAME",
        help="a built-in fidelity experiment (positive, nodefit, pdb, pdb-zero, "
        "topology-spread) or any registered experiment; repeatable (default: the runbook's three)",
    )
    p.add_argument(
        "snapshot",
        nargs="?",
        default=None,
        help="a `desched snapshot` file: restored twice (real, then dry run) instead of the "
        "built-in experiments",
    )
    p.add_argument("--variant", default=None, help="policy variant (runbook, ...)")
    add_config_options(p, "run")
    out.add_output(p)


def text_of(outcome: Any) -> str:
    """One experiment's block: its line, then the table of every pod either half decided."""
    head = f"{outcome.head}  {SHOWN[outcome.outcome]}"
    c = outcome.comparison
    if c is None or outcome.outcome == "error":  # nothing compared: never "each explained"
        return f"{head}  {outcome.message}"
    lines = [
        f"{head}  {c.line()}",
        out.table(table_rows(c), {k: k for k in COLUMNS}, "text"),
    ]
    lines += [f"  {r.identity} on {r.node}: {r.proof}" for r in c.differences if r.proof]
    if outcome.outcome != "pass" and outcome.message:
        lines.append(outcome.message)
    return "\n".join(lines)


def cmd_fidelity(args: argparse.Namespace) -> int:
    # heavy: experiments.framework: the kubernetes client; fidelity.cases and its imports; fidelity.engine: the kubernetes client; session and its imports, kept out of `desched` start-up
    from pytest_desched.experiments.framework import VARIANTS
    from pytest_desched.fidelity.cases import DEFAULT, lookup_case
    from pytest_desched.fidelity.engine import run_fidelity
    from pytest_desched.session import DeschedSession

    if args.snapshot is not None:
        if args.experiment or args.variant:
            raise ConfigError("desched fidelity SNAPSHOT takes no --experiment or --variant")
        return _snapshot(args)
    cases = [lookup_case(n) for n in (args.experiment or DEFAULT)]  # before any cluster
    if args.variant is not None and args.variant not in VARIANTS:
        raise ConfigError(f"--variant {args.variant!r}: unknown; use one of {', '.join(VARIANTS)}")
    config = config_from_args(args)
    results = []
    with DeschedSession(config, report=say) as session:
        for case in cases:
            o = run_fidelity(
                session, case.experiment, args.variant or case.variant, name=f"fidelity-{case.name}"
            )
            session.failed |= o.outcome != "pass"
            results.append(o)
            if args.output == "text":
                out.emit(text_of(o))
    summary = config.artifacts / "fidelity-summary.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    data = [o.summary() for o in results]
    summary.write_text(json.dumps(data, indent=1, default=str))
    say(f"evidence: {config.artifacts} (summary {summary.name})")
    report = getattr(session, "info", {}).get("report")
    if report:
        say(f"report: {report}")
    if args.output != "text":
        out.emit(
            out.render(
                {"fidelity": data}, args.output, md=lambda: "\n\n".join(text_of(o) for o in results)
            )
        )
    return combine(o.final_verdict for o in results).exit_code


def _snapshot(args: argparse.Namespace) -> int:
    # heavy: fidelity.snapshot and its imports, kept out of `desched` start-up
    from pytest_desched.fidelity.snapshot import run_snapshot_fidelity

    config = config_from_args(args)
    version = getattr(args, "--desched-descheduler", None)
    o = run_snapshot_fidelity(args.snapshot, config, config.policy, version)
    if args.output == "text":
        out.emit(text_of(o))
    else:
        out.emit(out.render({"fidelity": [o.summary()]}, args.output, md=lambda: text_of(o)))
    say(f"evidence: {config.artifacts} (fidelity.json; the halves' replays under real/, dry-run/)")
    return o.final_verdict.exit_code


def exit_code(outcomes: list[str]) -> int:
    """A verdict against you (1) outranks no verdict (3): a failed comparison is news even when
    another could not be made; "error" is a comparison not made, the canary's NO VERDICT."""
    return combine(Verdict(VERDICT_OF[o]) for o in outcomes).exit_code
