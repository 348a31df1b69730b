"""No engine module over 600 lines (issue 30): a module that grows past it is split along its
section banners, so a reader still learns its one job from its first screen."""

from __future__ import annotations

from pathlib import Path

LIMIT = 600
PACKAGE = Path(__file__).resolve().parents[2] / "pytest_desched"


def test_no_module_over_the_limit() -> None:
    sizes = {p: len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100  # the walk found the package
    over = sorted(f"{p.relative_to(PACKAGE)}: {n} lines" for p, n in sizes.items() if n > LIMIT)
    assert not over, f"split these along their banners (limit {LIMIT}): {over}"
