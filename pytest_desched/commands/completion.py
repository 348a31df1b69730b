"""`desched completion bash|zsh|fish`: a shell completion script generated from the parser.

shtab (a small, maintained library; what DVC and others use) reads the argparse tree, so a
subcommand or flag another module adds is completed with no change here. Install, e.g.:
``desched completion bash > ~/.local/share/bash-completion/completions/desched``.
"""

from __future__ import annotations

import argparse
from typing import Any

from pytest_desched.errors import EXIT_OK

SHELLS = ("bash", "zsh", "fish")


def script(root: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `root` (the whole `desched` parser) for `shell`."""
    import shtab  # third-party, needed only here: kept out of `desched` start-up

    return str(shtab.complete(root, shell=shell))


def cmd_completion(args: argparse.Namespace) -> int:
    print(script(args.root, args.shell))
    return EXIT_OK


def add_parser(sub: Any, root: argparse.ArgumentParser) -> None:
    """`desched completion SHELL`; `root` is read when it runs, so it is the complete tree."""
    p = sub.add_parser("completion", help="print a bash, zsh or fish completion script")
    p.set_defaults(func=cmd_completion, parser=p, root=root)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete for")
