"""Where a subcommand goes has one answer: its own module in commands/, named after it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest_desched
from pytest_desched.commands.parser import parser

ROOT = Path(pytest_desched.__file__).resolve().parent


def test_every_subcommand_s_handler_is_its_own_module_here() -> None:
    subs = parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert len(subs) >= 17, sorted(subs)
    for name, sub in subs.items():
        func = sub.get_default("func")
        assert func.__module__ == f"pytest_desched.commands.{name}", (name, func.__module__)
        assert (ROOT / "commands" / f"{name}.py").is_file(), name


def test_no_command_line_code_outside_commands() -> None:
    """No `cli*.py` but the old name's re-exports, and those define nothing of their own."""
    found = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("cli*.py"))
    assert found == ["cli.py"], found
    tree = ast.parse((ROOT / "cli.py").read_text())
    defined = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert defined == [], [n.name for n in defined]


def test_the_help_lists_every_subcommand() -> None:
    """A subcommand missing from `desched --help` is one nobody finds."""
    from pytest_desched.commands.parser import SUBCOMMANDS, USAGE

    listed = set(re.findall(r"(?m)^\s+desched (\w+)", USAGE))
    names = {m.__name__.rsplit(".", 1)[1] for m in SUBCOMMANDS} - {"listing"} | {"list"}
    assert names - listed == set()
