"""`desched record`: an incident window recorded as a timeline file (read-only, no Secrets).

desched record --context NAME --until 30m|TIME [--namespace NS ...] [--redact]
               [--audit-log FILE] --output-file window.jsonl
desched record --context NAME --since 2h [--until TIME] --audit-log FILE --snapshot START
               --output-file window.jsonl          (a past window, from an audit log)
"""

from __future__ import annotations

import argparse
from typing import Any

from pytest_desched.errors import EXIT_INFRA, ConfigError
from pytest_desched.log import say
from pytest_desched.render import add_output


def cmd_record(args: argparse.Namespace) -> int:
    """Record an incident window as a timeline file (read-only, no Secrets)."""
    # heavy: the kubernetes client, kept out of `desched` start-up
    from pytest_desched.replay.capture.record import record

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
    refused = (tl.header.get("recorded") or {}).get("watch_refused") or []
    if refused:
        # The file is kept (it holds what was seen), but a window with an unwatched resource
        # would replay as if nothing changed there: no success.
        say(
            f"desched record: the server refused {len(refused)} watch(es), so {path} is not the "
            f"whole window: {refused[0]}; grant get/list/watch on it (desched snapshot "
            "--print-rbac prints the Role) and record again"
        )
        return EXIT_INFRA
    return 0


def add_parser(sub: Any) -> None:
    """Register `record` on the main `desched` subparsers."""
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
