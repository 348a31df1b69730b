"""`desched snapshot`: a read-only snapshot of a cluster (no Secrets), for `desched replay`.

desched snapshot --context NAME [--kubeconfig PATH] [--namespace NS ...] [--redact]
                 [--exporter auto|kwokctl|client] --output-file snap.yaml [-o FORMAT]
desched snapshot --print-rbac [--service-account NS/NAME]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_desched import render
from pytest_desched.errors import ConfigError
from pytest_desched.log import say
from pytest_desched.render import add_output
from pytest_desched.tools.groups import TOOL_GROUP


def _kwokctl(exporter: str, cache_dir: Path | None) -> Path | None:
    """The pinned kwokctl for the exporter: built only when asked for by name, else if cached."""
    if exporter == "client":
        return None
    # heavy: its imports, kept out of `desched` start-up
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain(cache_dir=cache_dir, report=say)
    cached = tc.bin_dir(tc.groups[TOOL_GROUP["kwokctl"]]) / "kwokctl"
    return tc.path("kwokctl") if exporter == "kwokctl" or cached.is_file() else None


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Take a read-only snapshot (no Secrets) and write it to `-o`."""
    # heavy: the kubernetes client (via the capture package), kept out of `desched` start-up
    from pytest_desched.replay.capture.rbac import render_rbac
    from pytest_desched.replay.capture.snapshot import take_snapshot

    if args.print_rbac:  # printed, not applied: no cluster needed
        print(render_rbac(args.service_account), end="")
        return 0
    if not args.context:  # required, except to print the RBAC: argparse's own error, exit 2
        args.parser.error("the following arguments are required: --context")
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
        f"{h['filtered'].get('secrets')}, redacted: {h.get('redacted')}, usage: "
        + (
            f"{len(snap.usage.get('nodes') or {})} nodes, {len(snap.usage.get('pods') or {})} pods"
            if snap.usage
            else "none recorded"
        )
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
            "usage": h.get("usage"),
        }
        render.emit(render.render(data, args.output, text=lambda: line))
    return 0


def add_parser(sub: Any) -> None:
    """Register `snapshot` on the main `desched` subparsers."""
    s = sub.add_parser("snapshot", help="snapshot a cluster read-only (no Secrets) for replay")
    s.set_defaults(parser=s)
    s.add_argument(
        "--context",
        default=None,
        help="kubeconfig context (never assumed; required but with --print-rbac)",
    )
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
    s.add_argument(
        "--print-rbac",
        action="store_true",
        help="print the read-only ClusterRole + binding snapshot and record need, and exit",
    )
    s.add_argument(
        "--service-account",
        default="desched-reader/desched-snapshot",
        metavar="NS/NAME",
        help="the ServiceAccount --print-rbac binds (default desched-reader/desched-snapshot)",
    )
    add_output(s, output_file=True)  # --output-file: the snapshot
    s.set_defaults(func=cmd_snapshot)
