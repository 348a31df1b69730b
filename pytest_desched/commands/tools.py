"""`desched tools`: build or find the pinned binaries (or print the key a CI cache is saved under).

`desched-tools` is this subcommand under its old name (commands.main.tools_entry).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_desched import render as out
from pytest_desched.config import deprecated, parse_bins, resolve
from pytest_desched.errors import EXIT_OK
from pytest_desched.log import say
from pytest_desched.tools.cache_key import cache_key
from pytest_desched.tools.candidate import parse_candidate
from pytest_desched.tools.groups import HELM_HELP, HELM_MAJORS
from pytest_desched.tools.kube_versions import choose_kubernetes
from pytest_desched.tools.versions import load_versions


def cmd_tools(args: argparse.Namespace) -> int:
    import time

    # heavy: its imports, kept out of `desched` start-up
    from pytest_desched.tools.toolchain import Toolchain, provide

    cand = None
    if args.candidate:
        cand = parse_candidate(args.candidate)
    cache = resolve("--desched-cache-dir", args.cache_dir)
    kube = resolve("--desched-kubernetes", args.kubernetes)
    if kube:  # an unserved version: exit 2 before anything is built
        kube = choose_kubernetes(load_versions(), kube, "--kubernetes").version
    tc = Toolchain(
        cache_dir=Path(cache) if cache else None,
        overrides=parse_bins(resolve("--desched-bin", args.bin)),
        descheduler_version=_old_version(args) or args.descheduler,
        candidate=cand,
        report=say,
        kubernetes_version=kube or None,
        helm=resolve("--desched-helm", args.helm),
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


def add_parser(sub: Any) -> None:
    t = sub.add_parser("tools", help="build or find the pinned binaries")
    t.set_defaults(func=cmd_tools, parser=t)
    t.add_argument(
        "tools", nargs="*", help="tools to provide (default: all but kind and actionlint)"
    )
    t.add_argument("--descheduler", default=None, help="another release tag or commit")
    t.add_argument("--descheduler-version", dest="old_version", help="deprecated: --descheduler")
    t.add_argument(
        "--helm", default=None, choices=HELM_MAJORS, help=f"{HELM_HELP} [env DESCHED_HELM]"
    )
    t.add_argument(
        "--kubernetes",
        default=None,
        metavar="VERSION",
        help="build the control plane at this served Kubernetes release [env DESCHED_KUBERNETES]",
    )
    t.add_argument("--candidate", default=None, help="a canary candidate to build (source:PATH)")
    t.add_argument("--cache-dir", default=None, help="default: DESCHED_CACHE_DIR or the XDG cache")
    t.add_argument("--bin", default=None, metavar="TOOL=PATH,...", help="use these binaries")
    key_help = "print the key for a CI cache of the tools (the pins, the platform); build nothing"
    t.add_argument("--cache-key", action="store_true", help=key_help)
    out.add_output(t)
