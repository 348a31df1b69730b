"""`desched down`: delete kept clusters by name (or list them): embedded ones, and the kind
clusters `desched up` made.

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
    from pytest_desched.providers.embedded.owners import (
        kept_clusters,
        kept_up_clusters,
        stale_up_dirs,
    )
    from pytest_desched.tools.toolchain import Toolchain

    cache = resolve("--desched-cache-dir", args.cache_dir)
    tc = Toolchain(cache_dir=Path(cache) if cache else None, report=say)
    root = tc.cache_dir / "clusters"
    kept = kept_clusters(root)
    # `desched up` on kind (or existing); an embedded one is its owner record's
    others = {n: v for n, v in kept_up_clusters(tc.cache_dir / "up").items() if n not in kept}
    for stale in stale_up_dirs(tc.cache_dir / "up", root):  # left by interrupted `up`s
        shutil.rmtree(stale, ignore_errors=True)
        say(f"removed {stale} (its cluster is gone)")
    every = [*kept, *others]
    names = every if args.all else args.names
    if not names:
        marks = {n: mark for n, (_, mark) in others.items()}
        rows = [[k, "embedded"] for k in kept] + [
            [n, str(m.get("provider"))] for n, m in marks.items()
        ]
        data: dict[str, Any] = {"kept": kept} | ({"kept_up": marks} if marks else {})
        lines = [*kept, *(f"{n} ({p})" for n, p in rows if n not in kept)]
        out.emit(
            out.render(
                data,
                args.output,
                text=lambda: "\n".join(lines) if lines else "no kept clusters",
                md=lambda: out.table(rows, ["kept cluster", "provider"], "md"),
            )
        )
        return EXIT_OK
    unknown = sorted(set(names) - set(every))
    if unknown:
        raise ConfigError(f"not a kept cluster: {unknown}; kept: {every or 'none'}")
    for name in names:
        if name in others:
            folder, mark = others[name]
            _forget_up(tc, name, folder, mark)
            continue
        found = delete_cluster(tc, root, name, say)
        for marker in (tc.cache_dir / "up").glob("run-*/cluster-name"):
            if marker.read_text().strip() == name:  # `desched up`'s kubeconfig copy and files
                shutil.rmtree(marker.parent, ignore_errors=True)
        if found["processes_left"] or found["dir_left"]:
            say(f"embedded cluster {name}: not fully deleted ({found}); run desched down again")
            return EXIT_INFRA
        say(f"deleted embedded cluster {name} (0 processes, folder removed)")
    return EXIT_OK


def _forget_up(tc: Any, name: str, folder: Path, mark: dict[str, Any]) -> None:
    """What `desched up` kept on another provider: its module deletes the cluster if `up`
    made it (`delete_kept`), then the folder goes."""
    from pytest_desched.providers import delete_kept  # heavy: as the imports above

    said = delete_kept(str(mark.get("provider")), name, folder, bool(mark.get("created")), tc)
    shutil.rmtree(folder, ignore_errors=True)
    say(f"{said} (folder {folder} removed)")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("down", help="delete kept clusters (list them without names)")
    p.set_defaults(func=cmd_down, parser=p)
    p.add_argument("names", nargs="*", help="kept clusters to delete (none: list them)")
    p.add_argument("--all", action="store_true", help="every kept cluster")
    p.add_argument("--cache-dir", default=None, help="default: DESCHED_CACHE_DIR or the XDG cache")
    out.add_output(p)
