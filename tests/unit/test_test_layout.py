"""Unit tests mirror the engine's packages: a folder here is a pytest_desched package."""

from __future__ import annotations

from tests.unit import REPO


def test_every_test_folder_names_an_engine_package() -> None:
    unit = REPO / "tests" / "unit"
    folders = {
        p.name for p in unit.iterdir() if p.is_dir() and p.name not in {"data", "__pycache__"}
    }
    packages = {p.parent.name for p in (REPO / "pytest_desched").glob("*/__init__.py")}
    assert folders, "no package folders under tests/unit"
    assert folders <= packages, f"tests/unit folders that name no package: {folders - packages}"
    for folder in folders:
        assert (unit / folder / "__init__.py").is_file(), f"tests/unit/{folder}/__init__.py missing"
