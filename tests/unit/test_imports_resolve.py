"""Every `from pytest_desched... import name` (or `from tests...`) in tests/ and bench/ names
something that exists.

Function-level imports in e2e tests only run when a cluster is up, so a name moved between
modules (kept_clusters, cluster.py -> owners.py) once surfaced only 20 minutes into CI; this
check finds it in a second, without a cluster.
"""

from __future__ import annotations

import ast
import importlib

import pytest

from tests.unit import REPO as ROOT


def _imports() -> list[tuple[str, int, str, str]]:
    found = []
    for folder in ("tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and node.module
                    and node.module.split(".")[0] in {"pytest_desched", "tests"}
                ):
                    rel = str(path.relative_to(ROOT))
                    found += [(rel, node.lineno, node.module, a.name) for a in node.names]
    return found


def test_the_walk_sees_function_level_imports() -> None:
    """The walk is not vacuous: it finds this project's own function-level imports."""
    seen = {(f, m) for f, _, m, _ in _imports()}
    assert ("tests/e2e/test_cli_e2e.py", "pytest_desched.providers.embedded.owners") in seen


def test_every_imported_name_exists() -> None:
    missing = []
    for rel, line, module, name in _imports():
        if name == "*":
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{rel}:{line}: {module}: {exc}")
            continue
        if not hasattr(mod, name):
            try:  # a submodule imported by name (from pkg import module)
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{rel}:{line}: {module} has no {name!r}")
    if missing:
        pytest.fail("imports that name nothing:\n" + "\n".join(missing))
