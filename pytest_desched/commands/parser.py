"""The `desched` command's one parser: every subcommand's module adds itself, typos get the
nearest spelling, bare is help, exit codes cited.

argparse on Python 3.11 has no `suggest_on_error` (3.14 does): `desched lnt` said only
"invalid choice", `desched lint --fial-on` only "unrecognized arguments". This class adds
"did you mean ...?" from difflib to both (subcommands, choices, flags, the `-o` formats),
and `desched` with no subcommand prints the help on stderr and exits 2 (a usage error).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from pytest_desched.commands import (
    canary,
    completion,
    down,
    explain,
    fidelity,
    init,
    lint,
    matrix,
    merge,
    record,
    replay,
    run,
    snapshot,
    tools,
    up,
    version,
)
from pytest_desched.commands import list as listing
from pytest_desched.errors import EXIT_CODES

# `desched --help`: the subcommands, then errors.EXIT_CODES (exit_code_table).
USAGE = """`desched`: the engine without pytest (tools, up, down, run), for people and for CI.

    desched tools [TOOL ...] [--descheduler V]           build or find the pinned binaries
    desched up [--workers N] ...                           a kept cluster with the release
    desched down [NAME ...] [--all]                        delete kept embedded clusters
    desched run [EXPERIMENT ...] [--variant V] [--cycles K] experiments, with the same evidence
    desched lint [FILE...] [-f VALUES...] [--fail-on F]    the policy that will run, linted
                 [--select|--ignore CODE,...] [--list-rules]
    desched canary --candidate SPEC [--expect FILE] ...    a candidate against the baseline
    desched matrix RELEASE... [--chart RELEASE=CHART]      experiments on each release, bugs proven
    desched snapshot --context NAME --output-file snap.yaml   a read-only cluster snapshot
    desched record --context NAME --until 30m --output-file w.jsonl   an incident window
    desched replay snap.yaml [--descheduler V] ...         an incident, replayed, every fate
    desched fidelity [--experiment NAME ...] ...           dry run against the real run, compared
    desched list                                           the experiments, variants, strategies
    desched explain POD --record FILE                      a pod's fate in every cycle, and why
    desched merge DIR... --out-dir OUT                     N CI shards' evidence as one run
    desched version (or --version)                         this tool, its pins, the descheduler
    desched init                                           a starter test, values, CI workflow
    desched completion bash|zsh|fish                       a shell completion script

Every subcommand takes `-o text|json|yaml|md` (lint also sarif|github|junit): machine-readable
output on stdout, progress on stderr. Every `--desched-*` option of the plugin is here without its
prefix (`--provider`, `--keep`, `--artifacts`, ...) on the subcommands it applies to, with the
same `DESCHED_*` environment variables.

Exit codes (the same on every subcommand; docs/cli.md#exit-codes):
"""

_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from ([^)]*)\)")


def nearest(value: str, options: Iterable[str]) -> str | None:
    """The option closest to `value` (difflib's ratio >= 0.6), or None."""
    close = difflib.get_close_matches(value, list(options), n=1)
    return close[0] if close else None


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser with suggestions (add_subparsers makes its parsers of this
    class too)."""

    def error(self, message: str) -> NoReturn:
        m = _CHOICE.search(message)
        if m and "did you mean" not in message:
            options = [o.strip().strip("'") for o in m.group(2).split(",")]
            if guess := nearest(m.group(1), options):  # before any hint that follows
                message = f"{message[: m.end()]}; did you mean {guess!r}?{message[m.end() :]}"
        super().error(message)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, but an unknown flag is refused by the subcommand that got it, with
        the nearest flag it takes; no subcommand at all prints the help (exit 2)."""
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            owner: Parser = getattr(ns, "parser", None) or self
            owner.error(owner.unrecognized(extra))
        if self._subparsers is not None and getattr(ns, "func", None) is None:
            self.print_help(sys.stderr)
            self.exit(2, f"\n{self.prog}: error: give a subcommand (listed above)\n")
        return ns

    def unrecognized(self, extra: list[str]) -> str:
        """'unrecognized arguments: ...' with the nearest flag for each unknown one."""
        flags = [f for f in self._option_string_actions if f.startswith("--")]
        hints = {
            arg: guess
            for arg in extra
            if arg.startswith("-") and (guess := nearest(arg.split("=", 1)[0], flags))
        }
        said = f"unrecognized arguments: {' '.join(extra)}"
        if len(extra) == 1 and hints:
            return f"{said}; did you mean {hints[extra[0]]}?"
        return (
            f"{said} ({'; '.join(f'{a}: did you mean {g}?' for a, g in hints.items())})"
            if hints
            else said
        )


def exit_code_table() -> str:
    """errors.EXIT_CODES as `desched --help` shows them (docs/cli.md has the same table)."""
    import textwrap

    return "\n".join(
        textwrap.fill(text, 92, initial_indent=f"  {code:<4}", subsequent_indent=" " * 6)
        for code, text in EXIT_CODES.items()
    )


def cite_exit_codes(sub: Any) -> None:
    """Each subcommand's --help ends with the codes in short and where the table is."""
    short = ", ".join(f"{c} {t.split(':')[0].split(' (')[0]}" for c, t in EXIT_CODES.items())
    for p in sub.choices.values():
        p.epilog = f"exit codes: {short} (desched --help, docs/cli.md#exit-codes)"


# Every subcommand's module, in `desched --help` order (completion is added last: it reads the
# whole tree).
SUBCOMMANDS = (
    version,
    listing,
    tools,
    up,
    down,
    run,
    lint,
    canary,
    explain,
    snapshot,
    record,
    replay,
    fidelity,
    matrix,
    init,
    merge,
)


def parser(prog: str = "desched") -> argparse.ArgumentParser:
    """The whole `desched` parser: each subcommand module's `add_parser`, in `--help` order.

    ``prog``: the name the help and the errors give the command (`kubectl desched` when run
    as the kubectl plugin; the subcommand list then spells it so too)."""
    usage = USAGE
    if prog != "desched":  # each command line renamed, its continuation lines moved with it
        usage = re.sub(r"(?m)^(\s+)desched ", rf"\1{prog} ", USAGE)
        usage = re.sub(r"(?m)^(\s{5,})\[", rf"\1{' ' * (len(prog) - 7)}[", usage)
    ap = Parser(
        prog=prog,
        description=f"{usage}{exit_code_table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--version", action=version.VersionAction, help="this tool, its pins; then exit"
    )
    ap.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    sub = ap.add_subparsers(dest="command")  # none: the help, exit 2 (Parser.parse_args)
    for command in SUBCOMMANDS:
        command.add_parser(sub)
    completion.add_parser(sub, ap)
    cite_exit_codes(sub)
    return ap
