"""One way to build the tools (issue 40): `desched tools`. `make tools`, `desched-tools` and
`python -m pytest_desched.tools.toolchain` run that command, so bad input exits 2 and a tool
that cannot be built exits 3 on every spelling (errors.EXIT_CODES, docs/cli.md), and no error
message cites another spelling.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_desched.errors import EXIT_CODES, EXIT_INFRA, EXIT_USAGE
from tests.unit import REPO

ENTRY_POINTS = {
    "desched tools": [sys.executable, "-m", "pytest_desched.cli", "tools"],
    "python -m pytest_desched.tools.toolchain": [
        sys.executable,
        "-m",
        "pytest_desched.tools.toolchain",
    ],
    "desched-tools": [sys.executable, "-c", "from pytest_desched.cli import tools_entry as e; e()"],
}


def _run(cmd: list[str], cache: Path, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DESCHED_CACHE_DIR": str(cache), "PATH": path}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_bad_input_exits_2_and_a_failed_build_exits_3(name: str, tmp_path: Path) -> None:
    """An unknown tool is bad input; helm with an empty cache and no Go (and no helm) on PATH
    cannot be provided. Was: the module entry point exited 1 for the latter, the code of UNSAFE."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    bad = _run([*ENTRY_POINTS[name], "no-such-tool"], tmp_path / "cache", str(empty))
    assert bad.returncode == EXIT_USAGE, bad.stderr
    assert "unknown tool(s) ['no-such-tool']" in bad.stderr
    failed = _run([*ENTRY_POINTS[name], "helm"], tmp_path / "cache", str(empty))
    assert failed.returncode == EXIT_INFRA, failed.stderr
    assert "not cached and no `go` on PATH" in failed.stderr
    assert {EXIT_USAGE, EXIT_INFRA} <= set(EXIT_CODES)


def test_make_tools_runs_desched_tools() -> None:
    recipe = re.search(r"^tools:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe and recipe.group(1).strip() == "$(VENV)/bin/desched tools"


def test_docs_cli_lists_the_tools_exit_codes() -> None:
    text = (REPO / "docs" / "cli.md").read_text()
    section = text.split("## `desched tools`", 1)[1].split("\n## ", 1)[0]
    for code in (0, EXIT_USAGE, EXIT_INFRA):
        assert f"`{code}`" in section, f"docs/cli.md's desched tools section lacks exit {code}"


# as a message cites a command, in backticks (the cache key's prefix `desched-tools` is none)
OTHER_SPELLINGS = re.compile(
    r"`(make tools|desched-tools|python -m pytest_desched\.tools\.toolchain)"
)


def test_no_message_cites_another_way_to_build_the_tools() -> None:
    """Every string in the package other than the old names' own notes and docstrings."""
    cited = []
    for path in sorted((REPO / "pytest_desched").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if id(node) in docstrings or node.value.startswith("note: "):
                continue
            if OTHER_SPELLINGS.search(node.value):
                cited.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value[:80]}")
    assert cited == []
