"""`desched replay`: an incident replayed on a fresh cluster, every pod's fate in a ledger.

    desched replay snap.yaml [--descheduler VERSION|source:PATH] [--policy FILE] [--rounds N]
                   [--log incident.log] [--ages shift|preserve] [-o md|json|yaml|text]
                   [--output-file FILE]
    desched replay --timeline window.jsonl [--speed 10] [--pause-at T] [--every D]
    desched replay ... --repeat N                    (N fresh replays; same evictions?)
    desched replay --from-log incident.log [--descheduler VERSION]     (no cluster)
    desched replay --from-record <artifacts>/<experiment>/<round>.json (no cluster)

`--policy` is the one configuration's (`--desched-policy`, `DESCHED_POLICY`), as on every
subcommand: given (or set in the environment), it is the policy the session announces and
the one the replay applies (so is `--values`' deschedulerPolicy); unset, the snapshot's own
ConfigMap runs. `-o` is the output format, as on every `desched` subcommand. Exit 0 done, 1 a round failed, 2 bad input
(nothing was changed), 3 no cluster, or a --log/--repeat verdict that compared nothing:
"not comparable".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_desched import render
from pytest_desched.bounds import MAX_CYCLES, MIN_CYCLES, check_client_rate, check_cycles
from pytest_desched.config import add_config_options, config_from_args
from pytest_desched.errors import ConfigError
from pytest_desched.log import say
from pytest_desched.render import add_output
from pytest_desched.replay import repeat as rep
from pytest_desched.replay.log_compare import read_log
from pytest_desched.replay.repeat import failed_rounds, replay_verdict


def _emit(text: str, output: str | None) -> None:

    render.emit(text, output, say)


def _ledger_out(ledger: Any, fmt: str, md: Any, data: Any) -> str:
    """A ledger (or a replay's result) in `fmt`: text and md are the ledger's own writers."""

    return render.render(data, fmt, text=ledger.to_text, md=md)


def _timeline_replay(args: argparse.Namespace) -> int:
    """`replay --timeline`: checked whole (timeline, speed, pause, repeat) before any cluster."""
    # heavy: its imports, kept out of `desched` start-up
    from pytest_desched.replay.timeline.run import check_timeline, replay_timeline

    speed = args.speed if args.speed is not None else 1
    checked = check_timeline(args.timeline, speed, args.pause_at, args.every, args.repeat)
    pause_for = args.pause_for

    def resume(t: float) -> None:
        if sys.stdin.isatty() and pause_for is None:
            input(f"[desched] paused at t={t:.1f}s: press Enter to resume ")
            return
        import threading

        say(f"paused at t={t:.1f}s for {pause_for or 0:g} s (--pause-for; stdin is no terminal)")
        threading.Event().wait(pause_for or 0)

    base = config_from_args(args, provider="embedded")

    def one(i: int) -> Any:
        config = run_config(base, args.repeat, i)
        return replay_timeline(
            args.timeline,
            descheduler=args.descheduler,
            policy=config.policy,  # --policy, else DESCHED_POLICY: the one announced
            config=config,
            report=say,
            resume=resume,
            checked=checked,
            client=args.client,
        )

    return finish_replays(args, one)


def run_config(base: Any, repeat: int, i: int) -> Any:
    """Run i's configuration: with --repeat, one evidence root and a `repeat-i` folder each
    under it (and under the run folder), so the runs never share or scatter their evidence."""
    if repeat == 1:
        return base
    return base.with_(
        run_dir=base.run_dir / f"repeat-{i}", artifacts=base.artifacts / f"repeat-{i}"
    )


def finish_replays(args: argparse.Namespace, one: Any) -> int:
    """One replay, or --repeat N of them and their comparison; the exit code."""

    repeats: dict[str, Any] | None = None  # --repeat's comparison
    if args.repeat == 1:
        result = one(1)
        out = _ledger_out(result.ledger, args.output, result.markdown, result.to_dict())
        _emit(out, args.output_file)
        for k, v in result.artifacts.items():
            say(f"{k}: {v}")
        results = [result]
    else:
        cmp = rep.repeat(one, args.repeat, say)
        results = cmp.pop("results")
        data = {**cmp, "artifacts": [r.artifacts for r in results]}
        repeats = cmp

        out = render.render(
            data, args.output, text=lambda: rep.markdown(cmp), md=lambda: rep.markdown(cmp)
        )
        _emit(out, args.output_file)
    failed = failed_rounds(results)
    for f in failed:
        say(f"round {f}")
    return replay_verdict(results, repeats).exit_code


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a snapshot (or build a ledger from a log or a record, with no cluster)."""
    # heavy: replay.ledger and its imports, kept out of `desched` start-up
    from pytest_desched.replay.ledger import ledger_from_log, ledger_from_record

    sources = [x for x in (args.snapshot, args.from_log, args.from_record, args.timeline) if x]
    if len(sources) != 1:
        raise ConfigError(
            "give exactly one of: a snapshot file, --timeline FILE, --from-log FILE, "
            "--from-record FILE"
        )
    if (args.host or args.namespace_prefix or args.kwok_image) and not args.snapshot:
        raise ConfigError("--host, --namespace-prefix and --kwok-image replay a snapshot file")
    if isinstance(args.repeat, bool) or not 1 <= args.repeat <= 100:
        raise ConfigError(f"--repeat {args.repeat}: an integer from 1 to 100")
    args.rounds = check_cycles(args.rounds, "--rounds")  # K in 1..50, as --cycles
    args.client = check_client_rate(args.client_qps, args.client_burst)
    if args.client and (args.from_log or args.from_record):
        raise ConfigError(
            "--client-qps and --client-burst set the replayed descheduler's API client: they "
            "need a replay on a cluster (a snapshot file or --timeline), not --from-log/--from-record"
        )
    if args.assume_usage and (not args.snapshot or args.host):
        raise ConfigError("--assume-usage needs a snapshot file replayed on a fresh cluster")
    say_check_cost(args.snapshot or args.timeline)  # a big file's checks take seconds
    if args.timeline:
        return _timeline_replay(args)
    if args.speed is not None or args.pause_at is not None or args.every is not None:
        raise ConfigError("--speed, --pause-at and --every need --timeline FILE")

    if args.from_log or args.from_record:
        if args.from_log:
            text = read_log(args.from_log, "--from-log")
            ledger = ledger_from_log(text, args.descheduler)
        else:
            ledger = ledger_from_record(args.from_record)
        out = _ledger_out(ledger, args.output, ledger.to_markdown, ledger.to_dict())
        _emit(out, args.output_file)
        return 0
    if args.host or args.namespace_prefix or args.kwok_image:
        return _host_replay(args)
    # heavy: its imports, kept out of `desched` start-up
    from pytest_desched.replay.run import replay

    base = config_from_args(args, provider="embedded")

    def one(i: int) -> Any:
        config = run_config(base, args.repeat, i)
        return replay(
            args.snapshot,
            descheduler=args.descheduler,
            policy=config.policy,  # --policy, else DESCHED_POLICY: the one announced
            rounds=args.rounds,
            log=args.log,
            config=config,
            report=say,
            ages=args.ages,
            client=args.client,
            assume_usage=args.assume_usage,
        )

    return finish_replays(args, one)


# Measured (issue 54): the checks of a 100,000-pod snapshot before any cluster took 32 s in
# the hostile probe; a generated one (147 MB JSON) took 19.2 CPU-s here (102 s wall at load
# 18; cProfile: the JSON parse and its bounds walk, inputs_safe.check_tree, about 40%, the
# restore plan's deep copies, format.copy_json, about 30%, validation twice 9%). Each is a
# refusal before a cluster exists, so the time is said, not skipped.
CHECK_S_PER_MB = 32 / 147
CHECK_SAY_FROM_MB = 20


def say_check_cost(snapshot: str | Path | None) -> None:
    """A big snapshot's input checks take seconds: say so, and why, before they start."""
    try:
        mb = Path(snapshot).stat().st_size / 1e6 if snapshot else 0.0
    except OSError:
        return  # the check itself names a missing file
    if mb >= CHECK_SAY_FROM_MB:
        say(
            f"checking {snapshot} ({mb:.0f} MB) before any cluster: parse, bounds, fields, "
            f"credentials and the restore plan, about {mb * CHECK_S_PER_MB:.0f} s at this size "
            "(32 s measured at 100,000 pods); nothing is changed until they pass"
        )


def _host_replay(args: argparse.Namespace) -> int:
    """`replay SNAPSHOT --host CONTEXT`: one replay on a host cluster (replay.host)."""
    if not args.host:
        raise ConfigError(
            "--namespace-prefix and --kwok-image are for a host replay: add --host CONTEXT"
        )
    if args.repeat != 1 or args.log:
        raise ConfigError("--host replays once, without --repeat or --log (not yet supported)")
    # heavy: kubernetes client and the engine (and their imports), kept out of `desched` start-up
    from pytest_desched.replay.host.replay import replay_on_host

    kube = getattr(args, "--desched-existing-kubeconfig", None)
    config = config_from_args(args, provider="existing")
    result = replay_on_host(
        args.snapshot,
        args.host,
        allow=bool(getattr(args, "--desched-allow-existing", False)),
        kubeconfig=Path(kube) if kube else None,
        namespace_prefix=args.namespace_prefix,
        kwok_image=args.kwok_image,
        descheduler=args.descheduler,
        policy=config.policy,  # --policy, else DESCHED_POLICY: the one announced
        rounds=args.rounds,
        config=config,
        report=say,
        ages=args.ages,
        client=args.client,
    )
    _emit(
        _ledger_out(result.ledger, args.output, result.markdown, result.to_dict()), args.output_file
    )
    for k, v in result.artifacts.items():
        say(f"{k}: {v}")
    return 1 if failed_rounds([result]) else 0


def add_parser(sub: Any) -> None:
    """Register `replay` on the main `desched` subparsers."""
    r = sub.add_parser("replay", help="replay a snapshot on a fresh embedded cluster; fate ledger")
    r.set_defaults(parser=r)
    r.add_argument("snapshot", nargs="?", default=None, help="a file from `desched snapshot`")
    r.add_argument(
        "--descheduler", default=None, metavar="VERSION|source:PATH", help="default: the snapshot's"
    )
    r.add_argument(  # the one configuration's --desched-policy, with replay's own default
        "--policy",
        dest="--desched-policy",
        default=None,
        metavar="FILE",
        help="your DeschedulerPolicy file, announced and applied [env DESCHED_POLICY] "
        "(default: the snapshot's ConfigMap)",
    )
    r.add_argument(
        "--rounds",
        default=1,
        metavar="K",
        help=f"descheduling rounds, {MIN_CYCLES}..{MAX_CYCLES} (as `desched run --cycles`)",
    )
    r.add_argument(
        "--log", default=None, metavar="FILE", help="the incident's JSON log, to compare"
    )
    r.add_argument(
        "--ages",
        choices=("shift", "preserve"),
        default="shift",
        help="pod timestamps: shift them by the snapshot's age, so ages are as when it was "
        "taken (default), or preserve them as recorded",
    )
    r.add_argument(
        "--assume-usage",
        choices=("requests",),
        default=None,
        help="for a snapshot without recorded usage and a policy on actual utilization: "
        "state the assumption that each pod uses what it requests (docs/replay.md)",
    )
    r.add_argument("--timeline", default=None, metavar="FILE", help="a `desched record` window")
    r.add_argument("--speed", default=None, help="window seconds per wall second (default 1)")
    r.add_argument("--pause-at", default=None, metavar="T", help="pause at window time T")
    r.add_argument(
        "--pause-for", type=float, default=None, metavar="S", help="resume after S s (no tty)"
    )
    r.add_argument("--every", default=None, metavar="D", help="round cadence in window time")
    r.add_argument("--repeat", type=int, default=1, metavar="N", help="N fresh replays, compared")
    r.add_argument(
        "--client-qps",
        default=None,
        metavar="Q",
        help="the descheduler's API client requests/s (default: its own, 5); recorded",
    )
    r.add_argument(
        "--client-burst",
        default=None,
        metavar="B",
        help="the descheduler's API client burst (default: its own, 10); recorded",
    )
    r.add_argument(
        "--host",
        default=None,
        metavar="CONTEXT",
        help="replay on this host cluster's control plane (kwok fake nodes there), not on a "
        "fresh embedded one; needs --allow-existing (docs/replay-at-scale.md)",
    )
    r.add_argument(
        "--namespace-prefix",
        default=None,
        metavar="PREFIX",
        help="with --host: prefix every snapshot namespace (needed when the host has one)",
    )
    r.add_argument(
        "--kwok-image",
        default=None,
        metavar="IMAGE",
        help="with --host: the kwok controller image on the host's nodes "
        "(default: the one built here from the pinned kwok, desched.local/kwok:VERSION)",
    )
    r.add_argument("--from-log", default=None, metavar="FILE", help="ledger of a log, no cluster")
    r.add_argument("--from-record", default=None, metavar="FILE", help="ledger of a round record")
    add_output(r, default="md", output_file=True)
    add_config_options(r, "replay")
    r.set_defaults(func=cmd_replay)
