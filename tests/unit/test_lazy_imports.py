"""Module-level imports only: an import of a pytest_desched module inside a function says why.

The reasons (issue 30 item 1): `# heavy: ...` (it would pull a measurably heavy module, e.g.
the kubernetes client, into pytest start-up, `desched` start-up or a light module's import),
`# optional: ...` (an extra may be missing) or `# cycle: ...` (a module-level import would be
circular; say which modules, and prefer fixing the structure). The comment stands on one of
the import statement's lines or on the line above it; one comment above a run of
consecutive imports covers the run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest_desched

ROOT = Path(pytest_desched.__file__).resolve().parent
REASON = re.compile(r"#\s*(heavy|optional|cycle):\s*\S")


def unexplained(source: str, filename: str = "<src>") -> list[tuple[int, str]]:
    """(line, statement) of each function-level pytest_desched import without a reason comment."""
    lines = source.splitlines()
    tree = ast.parse(source, filename)
    starts = {  # last line of an import -> its first line
        n.end_lineno: n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) and n.end_lineno
    }
    found = []

    def reason_above(line: int) -> bool:
        """A reason comment right above `line`, or above the run of imports it ends."""
        above = line - 1
        while above in starts:
            above = starts[above] - 1
        return (
            above >= 1
            and bool(REASON.search(lines[above - 1]))
            and (lines[above - 1].lstrip().startswith("#"))
        )

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                if isinstance(child, ast.ImportFrom):
                    ours = child.level > 0 or (child.module or "").startswith("pytest_desched")
                else:
                    ours = any(a.name.split(".")[0] == "pytest_desched" for a in child.names)
                text = "\n".join(lines[child.lineno - 1 : child.end_lineno])
                if ours and not REASON.search(text) and not reason_above(child.lineno):
                    found.append((child.lineno, text.strip()))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


def test_every_function_level_import_says_why() -> None:
    bad = [
        f"{path.relative_to(ROOT.parent)}:{line}: {text}"
        for path in sorted(ROOT.rglob("*.py"))
        for line, text in unexplained(path.read_text(), str(path))
    ]
    assert bad == [], (
        "move these to module level, or say why on the import line "
        "(# heavy: ... / # optional: ... / # cycle: ...):\n" + "\n".join(bad)
    )


def test_the_check_sees_an_unexplained_import() -> None:
    """The check above fails on a bare function-level import (a check that finds none passes)."""
    source = """
from pytest_desched.errors import ConfigError

def f():
    from pytest_desched.session import DeschedSession
    from pytest_desched.lab.lab import Lab  # heavy: kubernetes client
    from .engine import (  # cycle: engine imports this module
        replay,
    )
    from . import render
    import pytest_desched.kube
    import json
    return DeschedSession, Lab, replay, render, json

class C:
    def m(self):
        from pytest_desched.kind import x  # optional: kind extra
        def inner():
            from pytest_desched.proc import run  # the reason needs its keyword
        return x, inner
"""
    assert [line for line, _ in unexplained(source)] == [5, 10, 11, 19]
