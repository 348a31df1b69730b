"""The package is a stack: no import runs back up a floor, and no two packages import each other.

Every import of a pytest_desched module counts, wherever it stands: module level, inside a
function, under `if TYPE_CHECKING:` (a type is a neighbour too). A unit is a top-level
package (`providers`) or a top-level module (`config`); `FLOORS` lists them bottom up, and a
unit may import only units on its own floor or below. A new package must be placed here.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest_desched
from tests.unit import REPO

ROOT = Path(pytest_desched.__file__).resolve().parent

# Bottom up. Why this order: docs/internals.md ("The floors").
FLOORS: list[set[str]] = [
    # the ground floor: imports nothing above it
    {"__init__", "errors", "names", "log", "proc", "redaction", "render", "inputs_safe"}
    | {"interrupts", "artifacts_dir", "capabilities", "bounds", "scratch"},
    # the per-pod fate model every use produces (fates, ledger, identity, verdict): pure data
    # on the ground floor only, so the descheduler's parser and every engine can speak it
    {"outcome"},
    {"tools"},  # versions, resolution, Go builds, candidates
    {"config"},  # the frozen configuration (checks tool names and candidate specs itself)
    {"kube"},  # waiting on the API
    {"providers"},  # clusters and their capabilities
    {"descheduler"},  # the release, policies, rounds
    {"lab"},
    {"evidence"},
    {"experiments"},  # framework (Runner) < declared (Experiment, run_experiment)
    {"session", "session_experiments", "session_lifecycle", "session_state"},  # one class
    {"canary", "replay", "fidelity"},  # the front-end engines
    {"plugin", "commands", "cli"},  # the front ends (cli: commands' old name, re-exports)
]
FLOOR = {unit: i for i, units in enumerate(FLOORS) for unit in units}


def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def imports(mods: dict[str, tuple[Path, bool]]) -> list[tuple[str, str, int]]:
    """(importer, imported module, line) for every import of a pytest_desched module."""
    edges = []
    for name, (path, is_pkg) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join([*pkg, *([node.module] if node.module else [])])
                # `from pkg import mod` imports the module; `from mod import name` the module
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            else:
                continue
            edges += [
                (name, t, node.lineno) for t in targets if t.split(".")[0] == "pytest_desched"
            ]
    return edges


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_unit_has_a_floor() -> None:
    missing = sorted({unit(m) for m in modules()} - set(FLOOR))
    assert not missing, f"place these in FLOORS (tests/unit/test_import_graph.py): {missing}"


def test_no_import_runs_back_up_a_floor() -> None:
    back = [
        f"{a}:{line} imports {b} (floor {FLOOR[unit(a)]} -> {FLOOR[unit(b)]})"
        for a, b, line in imports(modules())
        if unit(a) in FLOOR and unit(b) in FLOOR and FLOOR[unit(b)] > FLOOR[unit(a)]
    ]
    assert back == [], "imports running back up a floor:\n" + "\n".join(back)


def test_no_package_cycle() -> None:
    graph: defaultdict[str, set[str]] = defaultdict(set)
    for a, b, _ in imports(modules()):
        if unit(a) != unit(b):
            graph[unit(a)].add(unit(b))

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            u = todo.pop()
            if u == goal:
                return True
            if u not in seen:
                seen.add(u)
                todo += graph[u]
        return False

    pairs = [(a, b) for a, bs in list(graph.items()) for b in bs]
    cycles = sorted({tuple(sorted((a, b))) for a, b in pairs if reaches(b, a)})
    assert cycles == [], f"packages that import each other (directly or around): {cycles}"


def test_the_graph_is_read() -> None:
    """The checks above see real imports (a parser that found none would pass them all)."""
    edges = {(unit(a), unit(b)) for a, b, _ in imports(modules())}
    assert ("descheduler", "providers") in edges and ("providers", "proc") in edges
    assert ("errors", "redaction") in edges  # a ground-floor module on the ground floor


def test_mypy_is_strict_on_exactly_the_ground_floor() -> None:
    """One list of the ground floor: pyproject's strict mypy override names the same modules."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict = next(
        set(o["module"])
        for o in config["tool"]["mypy"]["overrides"]
        if o.get("disallow_untyped_defs")
    )
    ground = {"pytest_desched" if u == "__init__" else f"pytest_desched.{u}" for u in FLOORS[0]}
    assert strict == ground, f"strict only: {strict - ground}; ground floor only: {ground - strict}"
