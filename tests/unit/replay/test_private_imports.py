"""No module imports another module's `_private` name into or inside `pytest_desched.replay`
(issue 51 items 3 and 4): a stage that needs another's helper gets a public one, or extends
`Replay`, so the subfolders stay seams and not a file cut by length."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_desched

ROOT = Path(pytest_desched.__file__).resolve().parent
REPLAY = "pytest_desched.replay"


def _module_of(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def private_imports(source: str, module: str, is_pkg: bool = False) -> list[str]:
    """`line: target.name` for each private name `module` imports from another module of
    pytest_desched.replay (a private module in the dotted path counts too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                target = ".".join([*pkg, *([node.module] if node.module else [])])
            if target != REPLAY and not target.startswith(REPLAY + "."):
                continue
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith(REPLAY + ".")]
            target = ""
        else:
            continue
        for name in names:
            dotted = f"{target}.{name}" if target else name
            if target == module:
                continue
            if any(part.startswith("_") and part != "__init__" for part in dotted.split(".")):
                found.append(f"{node.lineno}: {dotted}")
    return found


def test_no_private_name_crosses_a_replay_module() -> None:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        module, is_pkg = _module_of(path)
        bad += [f"{module}:{hit}" for hit in private_imports(path.read_text(), module, is_pkg)]
    assert bad == [], "give these a public name (or a `Replay` method):\n" + "\n".join(bad)


def test_the_check_sees_a_private_import() -> None:
    """The scan is not vacuous: private names across modules are found, a module's own and
    public ones are not."""
    source = """
from pytest_desched.replay.run import Replay, _play
from pytest_desched.replay.capture import snapshot
from ..capture.snapshot import _Reads
from . import _helpers
from .replay import _own
from pytest_desched.errors import _other_package
import pytest_desched.replay._hidden
"""
    hits = private_imports(source, "pytest_desched.replay.host.replay")
    assert hits == [
        "2: pytest_desched.replay.run._play",
        "4: pytest_desched.replay.capture.snapshot._Reads",
        "5: pytest_desched.replay.host._helpers",
        "8: pytest_desched.replay._hidden",
    ]
