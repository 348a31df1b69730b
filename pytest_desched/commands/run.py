"""`desched run`: registered experiments on one session, with the evidence pytest writes.

Exit 0 every experiment passed (or failed as expected), 1 one failed, 2 bad input before any
cluster, 3 no cluster or tool.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_desched import render as out
from pytest_desched.bounds import check_cycles, check_no_loop, cycles_to_run
from pytest_desched.config import add_config_options, config_from_args
from pytest_desched.errors import EXIT_FAILED, EXIT_OK, ConfigError
from pytest_desched.log import say


def cmd_run(args: argparse.Namespace) -> int:
    # heavy: evidence.summary and its imports; experiments the kubernetes client; session and its imports, kept out of `desched` start-up
    from pytest_desched.evidence.summary import summary_line
    from pytest_desched.experiments import REGISTRY, lookup
    from pytest_desched.session import DeschedSession

    names = args.experiments or ["positive", "nodefit", "pdb"]
    cycles = check_cycles(args.cycles, "--cycles")  # before any cluster
    if args.parallel and (cycles > 1 or args.no_loop):
        raise ConfigError("--cycles/--no-loop with --parallel: not supported; drop --parallel")
    for n in names:
        try:
            cls = lookup(n)
        except KeyError:
            raise ConfigError(f"unknown experiment {n!r}; known: {sorted(REGISTRY)}") from None
        if args.no_loop:
            check_no_loop(cycles_to_run(cycles, cls.default_cycles), n)
    # heavy: the kubernetes client, kept out of `desched` start-up
    from pytest_desched.experiments.framework import VARIANTS

    if args.variant is not None and args.variant not in VARIANTS:  # before any cluster
        raise ConfigError(f"--variant {args.variant!r}: unknown; use one of {', '.join(VARIANTS)}")
    config = config_from_args(args)
    if args.parallel and len(names) > 1 and config.workers < 2 * len(names):
        # two workers per lane (a source and a target); only the embedded cluster grows
        config = config.with_(workers=2 * len(names))
    outcomes: list[dict[str, Any]] = []
    failed: list[str] = []
    session = DeschedSession(config, report=say)
    for n in names:  # the cluster starts with the metrics sources the policies read
        if lookup(n).metrics_sources:
            session.need_metrics(lookup(n).metrics_sources, n)
    with session:
        by_name: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        if args.parallel:
            ran = session.run_concurrently(
                [(n, args.variant) for n in names],
                on_record=lambda rec: by_name[_experiment_of(rec, names)].append(rec),
            )
        else:
            more = {"cycles": cycles} if cycles > 1 else {}
            more |= {"no_loop": True} if args.no_loop else {}
            ran = [
                session.run(n, variant=args.variant, on_record=by_name[n].append, **more)
                for n in names
            ]
        for n, result in zip(names, ran, strict=True):
            rounds = by_name[n]
            session.failed |= result.outcome in ("fail", "error")
            entry = {"name": f"{n}[{result.variant}]", "outcome": _shown(result.outcome)}
            if args.output == "text":  # one line per experiment as it ends
                print(summary_line({**entry, "rounds": rounds}), flush=True)
            if result.outcome in ("fail", "error"):
                failed.append(entry["name"])
                print(result.message, file=sys.stderr)
            outcomes.append({**entry, **result.summary()})
    summary = config.artifacts / "run-summary.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps(outcomes, indent=1, default=str))
    say(f"evidence: {config.artifacts} (summary {summary.name})")
    report = getattr(session, "info", {}).get("report")  # written by session.close()
    if report:
        say(f"report: {report}")
    if args.output != "text":
        data = {
            "experiments": outcomes,
            "failed": failed,
            "artifacts": str(config.artifacts),
            "summary": str(summary),
            "report": str(report) if report else None,
        }
        cols = {"name": "EXPERIMENT", "variant": "VARIANT", "outcome": "OUTCOME"}
        cols |= {"evictions": "EVICTIONS", "blocking_layer": "BLOCKED BY"}
        out.emit(out.render(data, args.output, md=lambda: out.table(outcomes, cols, "md")))
    return EXIT_FAILED if failed else EXIT_OK


def _experiment_of(record: dict[str, Any], names: list[str]) -> str:
    """Which of `names` a round record belongs to (records carry the experiment's title)."""
    # heavy: the kubernetes client, kept out of `desched` start-up
    from pytest_desched.experiments import lookup

    label = str(record.get("experiment", ""))
    return next((n for n in names if label.startswith(lookup(n).title + "[")), names[0])


def _shown(outcome: str) -> str:
    return {"pass": "passed", "xfail": "xfailed", "fail": "failed", "error": "error"}[outcome]


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run experiments (default: positive nodefit pdb)")
    r.set_defaults(func=cmd_run, parser=r)
    r.add_argument("experiments", nargs="*", help="registered experiment names (`desched list`)")
    r.add_argument("--variant", default=None, help="policy variant (runbook, ...)")
    r.add_argument(
        "--parallel",
        action="store_true",
        help="run the experiments side by side, a lane each (own namespace, nodes, release; "
        "needs two workers per experiment: the embedded cluster gets them) where lanes pay: "
        "the engine picks lanes or one after another from the CPU count and the load and "
        "records which and why (session/execution.json)",
    )
    r.add_argument(
        "--cycles",
        default=1,
        metavar="K",
        help="K descheduling cycles (1..50): K Jobs from the suspended CronJob, the lab settled "
        "between them; every fate per cycle in the record",
    )
    r.add_argument(
        "--no-loop",
        action="store_true",
        help="fail the experiment unless the eviction-loop detector proves no loop in the K "
        "cycles (K >= 2, every cycle settled; fewer cycles: refused, exit 2)",
    )
    add_config_options(r, "run")
    out.add_output(r)
