"""`desched`: the engine without pytest (tools, up, down, run), for people and for CI.

    desched tools [TOOL ...] [--descheduler V]           build or find the pinned binaries
    desched up [--workers N] ...                           a kept cluster with the release
    desched down [NAME ...] [--all]                        delete kept embedded clusters
    desched run [EXPERIMENT ...] [--variant V] [--cycles K] experiments, with the same evidence
    desched lint [FILE...] [-f VALUES...] [--fail-on F]    the policy that will run, linted
                 [--select|--ignore CODE,...] [--list-rules]
    desched canary --candidate SPEC [--expect FILE] ...    a candidate against the baseline
    desched matrix RELEASE... [--chart RELEASE=CHART]      experiments on each release, bugs proven
    desched snapshot --context NAME --output-file snap.yaml   a read-only cluster snapshot
    desched replay snap.yaml [--descheduler V] ...         an incident, replayed, every fate
    desched list                                           the experiments, variants, strategies
    desched explain POD --record FILE                      a pod's fate in every cycle, and why
    desched merge DIR... --out-dir OUT                     N CI shards' evidence as one run
    desched version (or --version)                         this tool, its pins, the descheduler
    desched init                                           a starter test, values, CI workflow
    desched completion bash|zsh|fish                       a shell completion script

Every subcommand takes `-o text|json|yaml|md` (lint also sarif): machine-readable output on
stdout, progress on stderr. Every `--desched-*` option of the plugin is here without its
prefix (`--provider`, `--keep`, `--artifacts`, ...) on the subcommands it applies to, with the
same `DESCHED_*` environment variables.

Exit codes (the same on every subcommand; docs/cli.md#exit-codes):
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from pytest_desched import interrupts, scratch
from pytest_desched import render as out
from pytest_desched.artifacts_dir import CLAIMED, release_if_empty
from pytest_desched.bounds import check_cycles, check_no_loop, cycles_to_run
from pytest_desched.cli_completion import add_parser as add_completion
from pytest_desched.cli_info import _VersionAction, cmd_list, cmd_version
from pytest_desched.cli_init import add_parser as add_init
from pytest_desched.cli_lint import add_parser as add_lint
from pytest_desched.cli_matrix import add_parser as add_matrix
from pytest_desched.cli_parser import Parser, cite_exit_codes, exit_code_table
from pytest_desched.cli_up import cmd_down, cmd_up
from pytest_desched.config import (
    OPTION_ENV,
    add_config_options,
    cli_flag,
    config_from_args,
    deprecated,
    parse_bins,
    resolve,
    respell,
)
from pytest_desched.errors import (
    EXIT_FAILED,
    EXIT_INFRA,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    PolicyError,
    ProviderError,
    ToolError,
)
from pytest_desched.evidence.merge import add_parser as add_merge
from pytest_desched.fidelity.cli import add_parser as add_fidelity
from pytest_desched.inputs_safe import check_output
from pytest_desched.log import say
from pytest_desched.redaction import scrub_secrets
from pytest_desched.render import printable
from pytest_desched.replay.cli import add_parsers
from pytest_desched.tools.cache_key import cache_key
from pytest_desched.tools.candidate import parse_candidate


def _error(msg: str) -> None:
    """The one error line: control characters a raw file name carries are shown escaped."""
    say(f"error: {printable(msg)}")


def _spelling(parser: argparse.ArgumentParser | None) -> Any:
    """How this subcommand's errors name a plugin option: the flag it takes, else the env var."""
    have = set(parser._option_string_actions) if parser else set()

    def spell(flag: str) -> str:
        short = cli_flag(flag)
        return short if short in have else OPTION_ENV[flag]

    return spell


def cmd_tools(args: argparse.Namespace) -> int:
    import time

    # heavy: +2 modules (~4ms), kept out of `desched` start-up
    from pytest_desched.tools.toolchain import Toolchain, provide

    cand = None
    if args.candidate:
        cand = parse_candidate(args.candidate)
    cache = resolve("--desched-cache-dir", args.cache_dir)
    tc = Toolchain(
        cache_dir=Path(cache) if cache else None,
        overrides=parse_bins(resolve("--desched-bin", args.bin)),
        descheduler_version=_old_version(args) or args.descheduler,
        candidate=cand,
        report=say,
    )
    if args.cache_key:  # nothing built: the key a CI cache of tc.cache_dir is saved under
        out.emit(cache_key(tc.groups.values(), tc.versions))
        return EXIT_OK
    started = time.monotonic()
    rows = list(provide(tc, args.tools))
    say(f"tools ready in {time.monotonic() - started:.1f}s (cache: {tc.cache_dir})")
    headers = {"tool": "TOOL", "version": "VERSION", "source": "SOURCE", "path": "PATH"}
    out.emit(
        out.render(
            {"cache": str(tc.cache_dir), "tools": rows},
            args.output,
            text=lambda: out.table(rows, headers, "text"),
            md=lambda: out.table(rows, headers, "md"),
        )
    )
    return EXIT_OK


def _old_version(args: argparse.Namespace) -> str | None:
    """`desched tools --descheduler-version V`: still taken this release, with a note."""
    if args.old_version and not args.descheduler:
        deprecated("--descheduler-version", "--descheduler")
        return str(args.old_version)
    return None


def cmd_run(args: argparse.Namespace) -> int:
    # heavy: evidence.summary +6 modules (~9ms); experiments kubernetes client (0.2-0.7 s); session +5 modules (~15ms), kept out of `desched` start-up
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
    # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
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
    # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
    from pytest_desched.experiments import lookup

    label = str(record.get("experiment", ""))
    return next((n for n in names if label.startswith(lookup(n).title + "[")), names[0])


def cmd_canary(args: argparse.Namespace) -> int:
    """Both tracks, the diff, the verdict; the Markdown report on stdout (or JSON)."""
    # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
    from pytest_desched.canary.engine import run_canary

    config = config_from_args(args)
    candidate = getattr(config, "candidate", None)
    if not candidate:
        raise ConfigError(
            "desched canary needs --candidate SPEC (version:vX.Y.Z, source:PATH, binary:PATH)"
        )
    if args.snapshot:
        # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
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
    if rep.broken:  # a track could not run: no verdict on the candidate, exit as infra
        return EXIT_INFRA
    return EXIT_OK if rep.ok else EXIT_FAILED


def _shown(outcome: str) -> str:
    return {"pass": "passed", "xfail": "xfailed", "fail": "failed", "error": "error"}[outcome]


def cmd_explain(args: argparse.Namespace) -> int:
    # heavy: +7 modules (~24ms), kept out of `desched` start-up
    from pytest_desched.evidence.explain import explain, load, to_text

    x = explain(args.pod, load(args.record))
    out.emit(out.render(x, args.output, text=lambda: to_text(x)))
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="desched",
        description=f"{__doc__}{exit_code_table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--version", action=_VersionAction, help="this tool, its pins; then exit")
    ap.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    sub = ap.add_subparsers(dest="command")  # none: the help, exit 2 (cli_parser.Parser)

    def command(name: str, func: Any, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.set_defaults(func=func, parser=p)
        return p

    v = command("version", cmd_version, "this tool's version and every pinned version")
    out.add_output(v)
    ls = command("list", cmd_list, "the registered experiments, their variants and strategies")
    out.add_output(ls)
    t = command("tools", cmd_tools, "build or find the pinned binaries")
    t.add_argument(
        "tools", nargs="*", help="tools to provide (default: all but kind and actionlint)"
    )
    t.add_argument("--descheduler", default=None, help="another release tag or commit")
    t.add_argument("--descheduler-version", dest="old_version", help="deprecated: --descheduler")
    t.add_argument("--candidate", default=None, help="a canary candidate to build (source:PATH)")
    t.add_argument("--cache-dir", default=None, help="default: DESCHED_CACHE_DIR or the XDG cache")
    t.add_argument("--bin", default=None, metavar="TOOL=PATH,...", help="use these binaries")
    key_help = "print the key for a CI cache of the tools (the pins, the platform); build nothing"
    t.add_argument("--cache-key", action="store_true", help=key_help)
    out.add_output(t)
    u = command("up", cmd_up, "bring up a kept cluster with the release installed")
    add_config_options(u, "up")
    out.add_output(u)
    d = command("down", cmd_down, "delete kept embedded clusters (list them without names)")
    d.add_argument("names", nargs="*", help="kept clusters to delete (none: list them)")
    d.add_argument("--all", action="store_true", help="every kept embedded cluster")
    d.add_argument("--cache-dir", default=None, help="default: DESCHED_CACHE_DIR or the XDG cache")
    out.add_output(d)
    r = command("run", cmd_run, "run experiments (default: positive nodefit pdb)")
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
    add_lint(sub)
    c = command("canary", cmd_canary, "a candidate descheduler/chart against the baseline")
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
    ex = command("explain", cmd_explain, "one pod's fate in every cycle, its layer and reason")
    ex.add_argument("pod", metavar="POD", help="pod name or namespace/name")
    ex.add_argument(
        "--record",
        required=True,
        metavar="FILE",
        help="cycles.json, an experiment's evidence folder, a <round>.json record, or a replay "
        "ledger (desched replay ... -o json)",
    )
    out.add_output(ex)
    add_parsers(sub)
    add_fidelity(sub, add_config_options)
    add_matrix(sub, add_config_options)
    add_init(sub)
    add_merge(sub)
    add_completion(sub, ap)
    cite_exit_codes(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; every outcome is one of errors.py's exit codes and a line, never a
    traceback (unless --debug). SIGINT and SIGTERM unwind the work (its cleanup runs); once
    the work is over (`interrupts.finishing`) a signal no longer interrupts saying so."""
    interrupts.reset()
    args = parser().parse_args(argv)
    spell = _spelling(getattr(args, "parser", None))
    debug = bool(args.debug or os.environ.get("DESCHED_DEBUG"))
    made_before = scratch.made()
    with interrupts.interrupts_unwind():  # SIGTERM cleans up like Ctrl-C
        try:
            try:
                if getattr(args, "output_file", None):  # before any work: never fail at the end
                    check_output(args.output_file)
                return int(args.func(args))
            finally:  # a signal past here cannot turn the error being said into another
                interrupts.finishing()
                while CLAIMED:  # a run that wrote nothing leaves no empty folder
                    release_if_empty(CLAIMED.pop())
                scratch.remove_all(but=made_before)  # its temporary folders, on every path
        except PolicyError as exc:  # one line: the source, then each problem
            one = f"invalid DeschedulerPolicy ({exc.source}): " + "; ".join(exc.problems)
            _error(respell(one, spell))
            return EXIT_USAGE
        except ConfigError as exc:
            _error(respell(" ".join(str(exc).split()), spell))
            return EXIT_USAGE
        except (ToolError, ProviderError) as exc:
            say(f"error: {respell(scrub_secrets(str(exc)), spell)}")  # a URL's user may be a token
            if done := interrupts.cleanup_summary():  # a cluster deleted after it, checked
                say(done)
            return EXIT_INFRA
        except KeyboardInterrupt:
            say(interrupts.exit_message())  # what the cleanups verified, kept or left
            return EXIT_INTERRUPTED
        except Exception as exc:  # no traceback reaches the user unless asked (--debug)
            if debug:
                raise

            if isinstance(exc, OSError) and exc.filename:  # a path the user named: bad input
                _error(f"{scrub_secrets(str(exc.filename))}: {exc.strerror}; check the path")
                return EXIT_USAGE
            first = (str(exc).splitlines() or [""])[0][:300]
            _error(
                f"internal error: {type(exc).__name__}: {scrub_secrets(first)} (a bug in "
                "pytest-desched; rerun with --debug or DESCHED_DEBUG=1 for the traceback, and "
                f"report it; exit {EXIT_INTERNAL})"
            )
            return EXIT_INTERNAL


def _exit_now(rc: int) -> NoReturn:
    """Flush what was said and exit without the interpreter's finalization."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(rc)


def entry() -> None:
    """The `desched` console script: `main`, and after a signal an exit without finalization.

    After a signal the interpreter's own shutdown (collecting every client, pool and cached
    object) took ~1.8 s on a loaded 2-core machine, past the 2 s a SIGTERM is given: it is
    skipped, output flushed first. A signal outside main's work ends the process at once:
    before it with 130, after it with the command's own code, already said (was: -15).
    """
    import signal

    done: list[int] = []

    def outside_the_work(signum: int, frame: object) -> None:
        if not done:
            os.write(2, b"[desched] interrupted; nothing had been started\n")
        os._exit(done[0] if done else EXIT_INTERRUPTED)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, outside_the_work)
    done.append(main())

    if done[0] == EXIT_INTERRUPTED or interrupts.late_signal():
        _exit_now(done[0])
    raise SystemExit(done[0])


def tools_entry() -> None:
    """The `desched-tools` console script: `desched tools` under an old name, with a note."""
    say("note: `desched-tools` is `desched tools`; use that")
    sys.argv[1:1] = ["tools"]
    entry()


if __name__ == "__main__":
    entry()
