"""No module imports another module's `_private` name (issue 51 item 4).

A name one module starts with `_` is its own business; a second module that needs it shows
the code was cut at the wrong place. The fix is to make the name public where it is defined,
move it to the module that uses it, or move both to a small shared module at a natural seam.
Every import counts: module level, inside functions, under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest_desched
from tests.unit import REPO

ROOT = Path(pytest_desched.__file__).resolve().parent

# Areas a move in progress may exempt (each move removes its own entries; none now).
ALLOWED_AREAS: tuple[str, ...] = ()

DESTINATIONS = ("commands/*",)  # an area the moves create: may not exist yet


def module_name(path: Path, root: Path) -> str:
    """The dotted module name of `path` under the package folder `root`."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, "module._name") of each `_private` name `module` imports from another module."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source_module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source_module = node.module or ""
        if source_module == module:
            continue
        found += [
            (node.lineno, f"{source_module}.{a.name}")
            for a in node.names
            if a.name.startswith("_") and not a.name.startswith("__")
        ]
    return found


def allowed(relative: str) -> bool:
    return any(fnmatch(relative, area) for area in ALLOWED_AREAS)


def test_no_module_imports_another_modules_private_name() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 100  # the walk found the package
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        if not allowed(path.relative_to(ROOT).as_posix())
        for line, name in private_imports(
            path.read_text(), module_name(path, ROOT), path.name == "__init__.py"
        )
    ]
    dev = REPO / "dev"  # the build tooling (the checkout's, not the wheel's) too
    bad += [
        f"dev/{path.relative_to(dev)}:{line}: {name}"
        for path in sorted(dev.rglob("*.py"))
        for line, name in private_imports(
            path.read_text(), module_name(path, dev), path.name == "__init__.py"
        )
    ]
    assert bad == [], (
        "make the name public where it is defined, or move it where it belongs:\n" + "\n".join(bad)
    )


def test_every_allowed_area_still_exists() -> None:
    """An area a move has emptied leaves the allow-list with it (a stale entry hides nothing)."""
    files = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")]
    moved = [
        a for a in ALLOWED_AREAS if a not in DESTINATIONS and not any(fnmatch(f, a) for f in files)
    ]
    assert moved == []


def test_the_check_sees_a_private_import() -> None:
    """Absolute, relative and function-level forms are found; the module's own and dunders not."""
    source = """
from pytest_desched.lab.values import _fail, check_int
from .difference import _walk
from . import _helper
from .. import __version__
from pytest_desched.canary.static.manifests import _own

def f():
    from pytest_desched.tools.gobuild import _run_logged
    return _run_logged
"""
    got = private_imports(source, "pytest_desched.canary.static.manifests", is_package=False)
    assert got == [
        (2, "pytest_desched.lab.values._fail"),
        (3, "pytest_desched.canary.static.difference._walk"),
        (4, "pytest_desched.canary.static._helper"),
        (9, "pytest_desched.tools.gobuild._run_logged"),
    ]
    package = private_imports("from .base import _x\n", "pytest_desched.lab", is_package=True)
    assert package == [(1, "pytest_desched.lab.base._x")]
    assert not allowed("canary/compare.py") and not allowed("canary/static/policy.py")
