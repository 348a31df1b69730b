"""`desched snapshot` and `desched replay`: the incident-replay front end.

    desched snapshot --context NAME [--kubeconfig PATH] [--namespace NS ...] [--redact]
                     [--exporter auto|kwokctl|client] --output-file snap.yaml [-o FORMAT]
    desched replay snap.yaml [--descheduler VERSION|source:PATH] [--policy FILE] [--rounds N]
                   [--log incident.log] [--ages shift|preserve] [-o md|json|yaml|text]
                   [--output-file FILE]

`-o` is the output format, as on every `desched` subcommand; the old `-o FILE` still writes
the file (with a deprecation note), and so does the old `--format`.
    desched record --context NAME --until 30m|TIME [--namespace NS ...] [--redact]
                   [--audit-log FILE] --output-file window.jsonl
    desched record --context NAME --since 2h [--until TIME] --audit-log FILE --snapshot START
                   --output-file window.jsonl          (a past window, from an audit log)
    desched replay --timeline window.jsonl [--speed 10] [--pause-at T] [--every D]
    desched replay ... --repeat N                    (N fresh replays; same evictions?)
    desched replay --from-log incident.log [--descheduler VERSION]     (no cluster)
    desched replay --from-record <artifacts>/<experiment>/<round>.json (no cluster)

The main `desched` parser only needs `add_parsers(sub)`; each command's function returns the
exit code (0 done, 1 a round failed, 2 bad input: nothing was changed, 3 no cluster, or a
--log/--repeat verdict that compared nothing: "not comparable").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_desched import render
from pytest_desched.bounds import MAX_CYCLES, MIN_CYCLES, check_client_rate, check_cycles
from pytest_desched.config import add_config_options, config_from_args
from pytest_desched.descheduler.decisions import cycle_gap
from pytest_desched.errors import EXIT_INFRA, ConfigError, InputError
from pytest_desched.evidence.compare import NOT_COMPARABLE
from pytest_desched.inputs_safe import json_lines, read_text
from pytest_desched.log import say
from pytest_desched.render import add_output
from pytest_desched.replay import repeat as rep
from pytest_desched.replay.schema import first_problem
from pytest_desched.tools.groups import TOOL_GROUP


def _emit(text: str, output: str | None) -> None:

    render.emit(text, output, say)


def _ledger_out(ledger: Any, fmt: str, md: Any, data: Any) -> str:
    """A ledger (or a replay's result) in `fmt`: text and md are the ledger's own writers."""

    return render.render(data, fmt, text=ledger.to_text, md=md)


def _kwokctl(exporter: str, cache_dir: Path | None) -> Path | None:
    """The pinned kwokctl for the exporter: built only when asked for by name, else if cached."""
    if exporter == "client":
        return None
    # heavy: +2 modules (~4ms), kept out of `desched` start-up
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain(cache_dir=cache_dir, report=say)
    cached = tc.bin_dir(tc.groups[TOOL_GROUP["kwokctl"]]) / "kwokctl"
    return tc.path("kwokctl") if exporter == "kwokctl" or cached.is_file() else None


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Take a read-only snapshot (no Secrets) and write it to `-o`."""
    # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
    from pytest_desched.replay.snapshot import take_snapshot

    if not args.output_file:
        raise ConfigError(
            "desched snapshot needs --output-file FILE (the snapshot is never printed)"
        )
    kwokctl = _kwokctl(args.exporter, args.cache_dir)
    snap = take_snapshot(
        args.kubeconfig,
        args.context,
        namespaces=args.namespace,
        redact=args.redact,
        exporter=args.exporter,
        kwokctl=kwokctl,
        report=say,
    )
    path = snap.write(args.output_file)
    h = snap.header
    line = (
        f"snapshot {path}: {len(snap.nodes)} nodes, {len(snap.pods)} pods, descheduler "
        f"{h.get('descheduler', {}).get('version') or 'not found'}, secrets filtered: "
        f"{h['filtered'].get('secrets')}, redacted: {h.get('redacted')}"
    )
    if args.output == "text":
        say(line)
    else:
        data = {
            "snapshot": str(path),
            "nodes": len(snap.nodes),
            "pods": len(snap.pods),
            "descheduler": h.get("descheduler", {}).get("version"),
            "secrets_filtered": h["filtered"].get("secrets"),
            "redacted": h.get("redacted"),
        }
        render.emit(render.render(data, args.output, text=lambda: line))
    return 0


def read_log(path: str | Path, flag: str) -> str:
    """A descheduler JSON log, bounded (size, UTF-8, line depth); refused when it has none."""

    text = read_text(path, kind="bulk", what=f"{flag} log")
    lines = [(i, doc) for i, doc in json_lines(text, f"{path}") if "msg" in doc]
    for i, doc in lines:  # a line of the wrong types is no descheduler log: refused, not skipped
        found = first_problem("log line", doc)
        if found is not None:
            raise InputError(
                f"{flag} {path}",
                f"line {i}",
                f"{' '.join(filter(None, found))}: not a descheduler JSON log line",
                "give the log of a descheduler run with --logging-format=json",
            )
    if not lines:
        raise ConfigError(
            f'{flag} {path}: no descheduler JSON log line (an object with "msg"); give the '
            "log of a descheduler run with --logging-format=json"
        )
    return text


def cmd_record(args: argparse.Namespace) -> int:
    """Record an incident window as a timeline file (read-only, no Secrets)."""
    # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
    from pytest_desched.replay.record import record

    if not args.output_file:
        raise ConfigError("desched record needs --output-file FILE (the timeline is never printed)")
    tl = record(
        args.kubeconfig,
        args.context,
        until=args.until,
        since=args.since,
        namespaces=args.namespace,
        redact=args.redact,
        audit_log=args.audit_log,
        start_snapshot=args.snapshot,
        report=say,
    )
    path = tl.write(args.output_file)
    verbs: dict[str, int] = {}
    for c in tl.changes:
        verbs[c.verb] = verbs.get(c.verb, 0) + 1
    say(
        f"timeline {path}: window {tl.window_s:g} s from {tl.header.get('windowStart')}, "
        f"{len(tl.snapshot.nodes)} nodes, {len(tl.snapshot.pods)} pods at the start, "
        f"{len(tl.changes)} changes {verbs}, redacted: {bool(tl.header.get('redacted'))}"
    )
    return 0


def _timeline_replay(args: argparse.Namespace) -> int:
    """`replay --timeline`: checked whole (timeline, speed, pause, repeat) before any cluster."""
    # heavy: +8 modules (~15ms), kept out of `desched` start-up
    from pytest_desched.replay.timeline_run import check_timeline, replay_timeline

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
        config = _run_config(base, args.repeat, i)
        return replay_timeline(
            args.timeline,
            descheduler=args.descheduler,
            policy=args.policy,
            config=config,
            report=say,
            resume=resume,
            checked=checked,
            client=args.client,
        )

    return _finish(args, one)


def _run_config(base: Any, repeat: int, i: int) -> Any:
    """Run i's configuration: with --repeat, one evidence root and a `repeat-i` folder each
    under it (and under the run folder), so the runs never share or scatter their evidence."""
    if repeat == 1:
        return base
    return base.with_(
        run_dir=base.run_dir / f"repeat-{i}", artifacts=base.artifacts / f"repeat-{i}"
    )


def _finish(args: argparse.Namespace, one: Any) -> int:
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
    # a timeline change that failed to apply, a round run on a stale state (timeline_run)
    failed += [f for res in results for f in (res.timeline or {}).get("failures") or []]
    return 1 if failed else (EXIT_INFRA if not_comparable(results, repeats) else 0)


def not_comparable(results: list[Any], repeats: dict[str, Any] | None) -> bool:
    """A verdict asked for (--log, --repeat) that compared nothing: exit 3, as the canary's
    NO VERDICT; the report says "not comparable" and why."""
    verdicts = [repeats.get("same")] if repeats is not None else []
    for res in results:
        c = res.ledger.comparison or {}  # none: no --log given, no verdict asked for
        verdicts += [
            c.get(k) for k in ("same_evictions", "same_refusals", "same_fates_up_to_order")
        ]
    return NOT_COMPARABLE in verdicts


def failed_rounds(results: list[Any]) -> list[str]:
    """Each replayed round whose Job is not proven to have completed with exit 0: failed, or
    its exit code not measured (None is "not measured", never success)."""
    return [
        f"{r.name}: {gap}"
        for res in results
        for r in res.ledger.rounds
        if (
            gap := cycle_gap(
                None, (r.extra or {}).get("succeeded"), (r.extra or {}).get("exit_code")
            )
        )
    ]


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a snapshot (or build a ledger from a log or a record, with no cluster)."""
    # heavy: +5 modules (~15ms), kept out of `desched` start-up
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
    # heavy: +9 modules (~26ms), kept out of `desched` start-up
    from pytest_desched.replay.engine import replay

    base = config_from_args(args, provider="embedded")

    def one(i: int) -> Any:
        config = _run_config(base, args.repeat, i)
        return replay(
            args.snapshot,
            descheduler=args.descheduler,
            policy=args.policy,
            rounds=args.rounds,
            log=args.log,
            config=config,
            report=say,
            ages=args.ages,
            client=args.client,
        )

    return _finish(args, one)


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
    # heavy: kubernetes client and the engine (+30 modules), kept out of `desched` start-up
    from pytest_desched.replay.host import replay_on_host

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
        policy=args.policy,
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


def add_parsers(sub: Any) -> None:
    """Register `snapshot` and `replay` on the main `desched` subparsers."""

    s = sub.add_parser("snapshot", help="snapshot a cluster read-only (no Secrets) for replay")
    s.set_defaults(parser=s)
    s.add_argument("--context", required=True, help="kubeconfig context (never assumed)")
    s.add_argument("--kubeconfig", default=None, help="default $KUBECONFIG; never ~/.kube/config")
    s.add_argument("--namespace", action="append", default=None, help="only these (repeatable)")
    s.add_argument("--redact", action="store_true", help="consistent aliases, for sharing")
    s.add_argument(
        "--exporter",
        choices=("auto", "kwokctl", "client"),
        default="auto",
        help="who lists the objects: kwokctl (cluster-wide only), the Python client, or auto "
        "(default: kwokctl when cached and no --namespace, else the client)",
    )
    s.add_argument("--cache-dir", type=Path, default=None, help="where kwokctl is cached")
    add_output(s, output_file=True)  # --output-file: the snapshot
    s.set_defaults(func=cmd_snapshot)
    rc = sub.add_parser("record", help="record an incident window as a timeline (read-only)")
    rc.set_defaults(parser=rc)
    rc.add_argument("--context", required=True, help="kubeconfig context (never assumed)")
    rc.add_argument("--kubeconfig", default=None, help="default $KUBECONFIG; never ~/.kube/config")
    rc.add_argument("--until", default=None, help="window end: a duration from now or a time")
    rc.add_argument("--since", default=None, help="window start in the past (needs --audit-log)")
    rc.add_argument("--namespace", action="append", default=None, help="only these (repeatable)")
    rc.add_argument("--redact", action="store_true", help="consistent aliases, for sharing")
    rc.add_argument("--audit-log", default=None, metavar="FILE", help="kube-apiserver audit log")
    rc.add_argument("--snapshot", default=None, metavar="FILE", help="the start (with --since)")
    add_output(rc, output_file=True)
    rc.set_defaults(func=cmd_record)
    r = sub.add_parser("replay", help="replay a snapshot on a fresh embedded cluster; fate ledger")
    r.set_defaults(parser=r)
    r.add_argument("snapshot", nargs="?", default=None, help="a file from `desched snapshot`")
    r.add_argument(
        "--descheduler", default=None, metavar="VERSION|source:PATH", help="default: the snapshot's"
    )
    r.add_argument(
        "--policy", default=None, metavar="FILE", help="default: the snapshot's ConfigMap"
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
