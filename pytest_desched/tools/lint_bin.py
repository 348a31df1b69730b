"""Lint's binaries from the pytest-desched-lint-bin wheel, taken only when they match the pins.

The wheel (`dev/lint-bin/`, built by `make wheel-lint`) carries helm, the policy checker and the
pinned chart, with a manifest.json of what each file is: its build key (the cache's
`<group>-<version>`, plus the digest of the project's Go source for the policy checker) and
its sha256. A file is used only when its key is the one this package would build and its
sha256 matches; anything else is a reason, and the toolchain builds or uses the cache as
without the wheel. The wheel's package is found, never imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_desched.errors import InputError
from pytest_desched.names import inside

DIST = "pytest-desched-lint-bin"
PACKAGE = "pytest_desched_lint_bin"
MANIFEST = "manifest.json"
SCHEMA = 1  # the manifest's layout; another one is not read
TOOLS = ("helm", "policycheck")  # what `desched lint` runs, and all the wheel carries
SOURCE = "lint-bin"  # where `desched tools` says such a binary came from


@dataclass(frozen=True)
class LintBin:
    """An installed wheel: its package folder and manifest."""

    root: Path
    manifest: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{DIST} {self.manifest.get('version', '?')}"

    def file(self, entry: dict[str, Any]) -> Path | None:
        """The manifest entry's file inside the package (None: it names a path outside)."""
        try:
            return inside(self.root, str(entry.get("file", "")))
        except InputError:
            return None


def installed(root: Path | None = None) -> LintBin | None:
    """The installed wheel (or the package folder at `root`); None when absent or unreadable."""
    root = root or _package_dir()
    if root is None:
        return None
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        return None
    return LintBin(root, manifest)


@lru_cache(maxsize=1)
def _package_dir() -> Path | None:
    spec = importlib.util.find_spec(PACKAGE)  # finds the folder; runs none of its code
    locations = list(spec.submodule_search_locations or ()) if spec else []
    return Path(locations[0]) if locations else None


def pick(tool: str, key: str, found: LintBin | None) -> tuple[Path | None, str]:
    """The wheel's `tool` when it was built as `key` and its sha256 checks; else (None, why)."""
    if found is None:
        return None, f"{DIST} is not installed"
    entry = (found.manifest.get("tools") or {}).get(tool)
    if not isinstance(entry, dict):
        return None, f"{found.label} carries no {tool}"
    if entry.get("key") != key:
        return None, f"{found.label} carries {entry.get('key')}, this pytest-desched pins {key}"
    path = found.file(entry)
    if path is None or not (path.is_file() and os.access(path, os.X_OK)):
        return None, f"{found.label}: {entry.get('file')} is missing or not executable"
    if sha256(path) != entry.get("sha256"):
        return None, f"{found.label}: {path} does not match its sha256 in {MANIFEST}"
    return path, SOURCE


def chart(
    found: LintBin | None, name: str, version: str, app_version: str
) -> tuple[Path | None, str]:
    """The wheel's packaged chart when it is `name` at the pinned version and appVersion and its
    sha256 checks; the second item is the chart's own source (repo or module) or why not."""
    if found is None:
        return None, f"{DIST} is not installed"
    entry = found.manifest.get("chart")
    if not isinstance(entry, dict):
        return None, f"{found.label} carries no chart"
    pinned = (name, version, app_version)
    carried = (entry.get("name"), entry.get("version"), entry.get("app_version"))
    if carried != pinned:
        return None, f"{found.label} carries chart {carried}, pinned is {pinned}"
    path = found.file(entry)
    if path is None or not path.is_file() or sha256(path) != entry.get("sha256"):
        return None, f"{found.label}: the chart is missing or does not match its sha256"
    return path, str(entry.get("source", "repo"))


def sha256(path: Path) -> str:
    """The file's sha256, once per process for an unchanged file (lint asks several times)."""
    st = path.stat()
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
