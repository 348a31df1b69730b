"""The `desched` command's parser: typos get the nearest spelling, bare is help, exit codes cited.

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

from pytest_desched.errors import EXIT_CODES

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
