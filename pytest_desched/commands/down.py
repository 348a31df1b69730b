"""`desched down`: delete kept embedded clusters by name (or list them).

Also removes the `up/run-*` folders interrupted `desched up`s left. The embedded provider is
imported inside the command: heavy, and `desched --version` needs none of it.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from pytest_desched import render as out
from pytest_desched.config import resolve
from pytest_desched.errors import EXIT_INFRA, EXIT_OK, ConfigError
from pytest_desched.log import say


def cmd_down(args: argparse.Namespace) -> int:
    # heavy: providers.embedded.cluster and its imports; providers.embedded.owners and its imports; tools.toolchain and its imports, kept out of `desched` start-up
    from pytest_desched.providers.embedded.cluster import delete_cluster
    from pytest_desched.providers.embedded.owners import kept_clusters, stale_up_dirs
    from pytest_desched.tools.toolchain import Toolchain

    cache = resolve("--desched-cache-dir", args.cache_dir)
    tc = Toolchain(cache_dir=Path(cache) if cache else None, report=say)
    root = tc.cache_dir / "clusters"
    kept = kept_clusters(root)
    for stale in stale_up_dirs(tc.cache_dir / "up", root):  # left by interrupted `up`s
        shutil.rmtree(stale, ignore_errors=True)
        say(f"removed {stale} (its cluster is gone)")
    names = kept if args.all else args.names
    if not names:
        out.emit(
            out.render(
                {"kept": kept},
                args.output,
                text=lambda: "\n".join(kept) if kept else "no kept embedded clusters",
                md=lambda: out.table([[k] for k in kept], ["kept cluster"], "md"),
            )
        )
        return EXIT_OK
    unknown = sorted(set(names) - set(kept))
    if unknown:
        raise ConfigError(f"not a kept embedded cluster: {unknown}; kept: {kept or 'none'}")
    for name in names:
        found = delete_cluster(tc, root, name, say)
        for marker in (tc.cache_dir / "up").glob("run-*/cluster-name"):
            if marker.read_text().strip() == name:  # `desched up`'s kubeconfig copy and files
                shutil.rmtree(marker.parent, ignore_errors=True)
        if found["processes_left"] or found["dir_left"]:
            say(f"embedded cluster {name}: not fully deleted ({found}); run desched down again")
            return EXIT_INFRA
        say(f"deleted embedded cluster {name} (0 processes, folder removed)")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("down", help="delete kept embedded clusters (list them without names)")
    p.set_defaults(func=cmd_down, parser=p)
    p.add_argument("names", nargs="*", help="kept clusters to delete (none: list them)")
    p.add_argument("--all", action="store_true", help="every kept embedded cluster")
    p.add_argument("--cache-dir", default=None, help="default: DESCHED_CACHE_DIR or the XDG cache")
    out.add_output(p)
