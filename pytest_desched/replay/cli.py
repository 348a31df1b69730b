"""`desched snapshot` and `desched replay`: the incident-replay front end.

    desched snapshot --context NAME [--kubeconfig PATH] [--namespace NS ...] [--redact]
                     [--exporter auto|kwokctl|client] --output-file snap.yaml [-o FORMAT]
    desched replay snap.yaml [--descheduler VERSION|source:PATH] [--policy FILE] [--rounds N]
                   [--log incident.log] [--ages shift|preserve] [-o md|json|yaml|text]
                   [--output-file FILE]

`-o` is the output format, as on every `desched` subcommand; the old `-o FILE` still writes
the file (with a deprecation note), and so does the old `--format`.
    desched replay --from-log incident.log [--descheduler VERSION]     (no cluster)
    desched replay --from-record <artifacts>/<experiment>/<round>.json (no cluster)

The main `desched` parser only needs `add_parsers(sub)`; each command's function returns the
exit code (0 done, 1 a round failed, 2 bad input: nothing was changed, 3 no cluster).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.log import say


def _emit(text: str, output: str | None) -> None:
    from pytest_desched import render

    render.emit(text, output, say)


def _ledger_out(ledger: Any, fmt: str, md: Any, data: Any) -> str:
    """A ledger (or a replay's result) in `fmt`: text and md are the ledger's own writers."""
    from pytest_desched import render

    return render.render(data, fmt, text=ledger.to_text, md=md)


def _kwokctl(exporter: str, cache_dir: Path | None) -> Path | None:
    """The pinned kwokctl for the exporter: built only when asked for by name, else if cached."""
    if exporter == "client":
        return None
    from pytest_desched.tools.toolchain import TOOL_GROUP, Toolchain

    tc = Toolchain(cache_dir=cache_dir, report=say)
    cached = tc.bin_dir(tc.groups[TOOL_GROUP["kwokctl"]]) / "kwokctl"
    return tc.path("kwokctl") if exporter == "kwokctl" or cached.is_file() else None


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Take a read-only snapshot (no Secrets) and write it to `-o`."""
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
        from pytest_desched import render

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
    from pytest_desched.inputs_safe import json_lines, read_text

    text = read_text(path, kind="bulk", what=f"{flag} log")
    if not any("msg" in doc for _, doc in json_lines(text, f"{path}")):
        raise ConfigError(
            f'{flag} {path}: no descheduler JSON log line (an object with "msg"); give the '
            "log of a descheduler run with --logging-format=json"
        )
    return text


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a snapshot (or build a ledger from a log or a record, with no cluster)."""
    from pytest_desched.replay.ledger import ledger_from_log, ledger_from_record

    sources = [x for x in (args.snapshot, args.from_log, args.from_record) if x]
    if len(sources) != 1:
        raise ConfigError(
            "give exactly one of: a snapshot file, --from-log FILE, --from-record FILE"
        )
    if args.from_log or args.from_record:
        if args.from_log:
            text = read_log(args.from_log, "--from-log")
            ledger = ledger_from_log(text, args.descheduler)
        else:
            ledger = ledger_from_record(args.from_record)
        out = _ledger_out(ledger, args.output, ledger.to_markdown, ledger.to_dict())
        _emit(out, args.output_file)
        return 0
    from pytest_desched.cli import _config
    from pytest_desched.replay.engine import replay

    config = _config(args, provider="embedded")
    result = replay(
        args.snapshot,
        descheduler=args.descheduler,
        policy=args.policy,
        rounds=args.rounds,
        log=args.log,
        config=config,
        report=say,
        ages=args.ages,
    )
    out = _ledger_out(result.ledger, args.output, result.markdown, result.to_dict())
    _emit(out, args.output_file)
    for k, v in result.artifacts.items():
        say(f"{k}: {v}")
    failed = [
        r.name for r in result.ledger.rounds if (r.extra or {}).get("exit_code") not in (0, None)
    ]
    return 1 if failed else 0


def add_parsers(sub: Any) -> None:
    """Register `snapshot` and `replay` on the main `desched` subparsers."""
    from pytest_desched.cli import _add_config_options
    from pytest_desched.render import add_output

    s = sub.add_parser("snapshot", help="snapshot a cluster read-only (no Secrets) for replay")
    s.set_defaults(parser=s)
    s.add_argument("--context", required=True, help="kubeconfig context (never assumed)")
    s.add_argument("--kubeconfig", default=None, help="default $KUBECONFIG; never ~/.kube/config")
    s.add_argument("--namespace", action="append", default=None, help="only these (repeatable)")
    s.add_argument("--redact", action="store_true", help="consistent aliases, for sharing")
    s.add_argument("--exporter", choices=("auto", "kwokctl", "client"), default="auto")
    s.add_argument("--cache-dir", type=Path, default=None, help="where kwokctl is cached")
    add_output(s, output_file=True, legacy_file=True)  # --output-file: the snapshot
    s.set_defaults(func=cmd_snapshot)
    r = sub.add_parser("replay", help="replay a snapshot on a fresh embedded cluster; fate ledger")
    r.set_defaults(parser=r)
    r.add_argument("snapshot", nargs="?", default=None, help="a file from `desched snapshot`")
    r.add_argument(
        "--descheduler", default=None, metavar="VERSION|source:PATH", help="default: the snapshot's"
    )
    r.add_argument(
        "--policy", default=None, metavar="FILE", help="default: the snapshot's ConfigMap"
    )
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument(
        "--log", default=None, metavar="FILE", help="the incident's JSON log, to compare"
    )
    r.add_argument("--ages", choices=("shift", "preserve"), default="shift")
    r.add_argument("--from-log", default=None, metavar="FILE", help="ledger of a log, no cluster")
    r.add_argument("--from-record", default=None, metavar="FILE", help="ledger of a round record")
    add_output(r, default="md", output_file=True, legacy_file=True, aliases={"--format": None})
    _add_config_options(r, "replay")
    r.set_defaults(func=cmd_replay)
