"""The `desched` command's four output formats (`-o text|json|yaml|md`), written once.

A command builds one JSON-able value (what `-o json` prints) and, where a person reads it,
a table or a text of its own; this module turns that into the format asked for. Tables go
through `tabulate` (plain columns for text, GitHub pipes for Markdown), never a hand-written
writer. Machine-readable output goes to stdout; progress stays on stderr (the `[desched]`
lines), so `desched run -o json | jq` sees only JSON. Imports only `redaction`: every result
it prints or writes is scrubbed of secrets (`emit`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from tabulate import tabulate

from pytest_desched.redaction import scrub_secrets

FORMATS = ("text", "json", "yaml", "md")

# What a terminal or a line-based reader takes as a new line, a cursor move or a reordering:
# C0/C1 controls, DEL, the Unicode line/paragraph separators and the bidi overrides/isolates.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(value: object) -> str:
    r"""`value` as text that cannot forge a line: each control character written as an escape.

    A file name is raw bytes from the user (a newline or ESC is valid in one); printed as is,
    it would start a line of its own in lint's text output or an error. A newline becomes the
    two characters \n, ESC becomes \x1b, U+2028 becomes \u2028; everything else is unchanged.
    """
    return _UNPRINTABLE.sub(
        lambda m: m.group().encode("unicode_escape").decode("ascii"), str(value)
    )


def plain(data: Any) -> Any:
    """`data` as JSON types only (paths, tuples and dataclass leftovers become strings/lists)."""
    return json.loads(json.dumps(data, default=str))


def to_json(data: Any) -> str:
    return json.dumps(data, indent=1, default=str)


def to_yaml(data: Any) -> str:
    return yaml.safe_dump(plain(data), sort_keys=False, default_flow_style=False).rstrip("\n")


def table(
    rows: Sequence[Mapping[str, Any]] | Sequence[Sequence[Any]], headers: Any, fmt: str
) -> str:
    """Rows as aligned columns (`text`) or a GitHub Markdown table (`md`).

    `headers` is a list of column titles for sequence rows, or {key: title} for mapping rows
    (columns in that order, missing keys empty).
    """
    if isinstance(headers, Mapping):
        body = [[_cell(r.get(k)) for k in headers] for r in rows]  # type: ignore[union-attr]
        titles = list(headers.values())
    else:
        body = [[_cell(c) for c in r] for r in rows]
        titles = list(headers)
    if not body:
        return "(none)" if fmt == "text" else "_none_"
    return tabulate(body, titles, tablefmt="github" if fmt == "md" else "simple")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, list | tuple | set):
        return printable(", ".join(str(x) for x in v))
    return printable(v)


def render(
    data: Any,
    fmt: str,
    *,
    text: Callable[[], str] | None = None,
    md: Callable[[], str] | None = None,
) -> str:
    """`data` in `fmt`; `text`/`md` give the human forms (md falls back to text, text to YAML)."""
    if fmt == "json":
        return to_json(data)
    if fmt == "yaml":
        return to_yaml(data)
    if fmt == "md":
        return (md or text or (lambda: to_yaml(data)))()
    if fmt == "text":
        return (text or (lambda: to_yaml(data)))()
    raise ValueError(f"unknown output format {fmt!r}; use one of {FORMATS}")


def emit(
    out: str,
    path: str | Path | None = None,
    say: Callable[[str], None] | None = None,
    *,
    scrubbed: bool = False,
) -> None:
    """Print `out` to stdout, or write it to `path` (then say so on stderr), secrets scrubbed:
    a command's result may quote a tool's output, and a token in it (`scrub_secrets`).

    ``scrubbed``: a markup `out` whose every value the writer scrubbed before escaping it
    (XML): scrubbing the escaped text would put a raw ``<redacted>`` into its markup."""
    if not scrubbed:
        out = scrub_secrets(out)
    if path:
        Path(path).write_text(out if out.endswith("\n") else out + "\n")
        if say:
            say(f"wrote {path}")
        return
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    sys.stdout.flush()


# -- the option ------------------------------------------------------------------------------
class _OutputAction(argparse.Action):
    """`-o FORMAT`, and only a format: `-o jsno` is refused (exit 2) with the valid ones.

    `-o FILE` (lint, replay, snapshot once took a file) is retired: a file is `--output-file`,
    and the refusal says so where the command has it.
    """

    def __init__(self, *args: Any, formats: Sequence[str], file_hint: bool, **kw: Any) -> None:
        self.formats, self.file_hint = tuple(formats), file_hint
        super().__init__(*args, **kw)

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, opt: Any = None
    ) -> None:
        if value in self.formats:
            ns.output = value
            return
        hint = f"; to write a file use --output-file {value}" if self.file_hint else ""
        parser.error(
            f"argument {opt}: invalid choice: {value!r} (choose from "
            f"{', '.join(self.formats)}){hint}"
        )


class _RetiredAction(argparse.Action):
    """A retired spelling of `-o` (`--format F`, `--json`): refused, naming the current flag."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, opt: Any = None
    ) -> None:
        fmt = value if isinstance(value, str) else "json" if opt == "--json" else "FORMAT"
        parser.error(f"{opt} is retired; use -o {fmt} (-o/--output takes a format)")


RETIRED: dict[str, int | str] = {"--format": "?", "--json": 0}  # flag -> nargs; refused everywhere


def add_output(
    ap: argparse.ArgumentParser,
    *,
    formats: Sequence[str] = FORMATS,
    default: str = "text",
    output_file: bool = False,
) -> None:
    """`-o/--output FORMAT` (dest `output`), optionally `--output-file FILE` (dest
    `output_file`); the retired spellings (RETIRED) are refused with the current one."""
    choices = "|".join(formats)
    ap.add_argument(
        "-o",
        "--output",
        action=_OutputAction,
        formats=formats,
        file_hint=output_file,
        default=default,
        metavar=choices,
        help=f"output format (default: {default}); machine-readable output goes to stdout, "
        "progress to stderr",
    )
    if output_file:
        ap.add_argument(
            "--output-file",
            "--out",
            dest="output_file",
            default=None,
            metavar="FILE",
            help="write the output to FILE instead of stdout",
        )
    else:
        ap.set_defaults(output_file=None)
    for flag, nargs in RETIRED.items():
        ap.add_argument(flag, action=_RetiredAction, nargs=nargs, help=argparse.SUPPRESS)
