"""Locate the shipped manifests, in a source checkout or an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # the pytest_desched package


def manifests_dir() -> Path:
    """The repo's manifests/ in a checkout (editable install), else the copy packed in the wheel."""
    for candidate in (_PKG.parent / "manifests", _PKG / "manifests"):
        if (candidate / "versions.yaml").is_file():
            return candidate
    raise FileNotFoundError("pytest-desched manifests/ not found next to the package; reinstall it")


def manifest_path(name: str) -> Path:
    return manifests_dir() / name
