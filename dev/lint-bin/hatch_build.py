"""The wheel's version and platform tag, read from the staged manifest.json.

`dev/lint_wheel.py` writes the manifest (one source of truth for what the wheel
carries); this hook only copies two of its fields into the build: the distribution version
(the pytest-desched version whose pins the binaries match) and the wheel tag (the platform
the static Go binaries were built for; no Python ABI, hence `py3-none-`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

MANIFEST = Path("pytest_desched_lint_bin") / "manifest.json"


def _manifest(root: str) -> dict[str, Any]:
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: build this wheel with `make wheel-lint`")
    return dict(json.loads(path.read_text()))


class LintBinMetadata(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        metadata["version"] = _manifest(self.root)["version"]


class LintBinBuild(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        build_data["tag"] = _manifest(self.root)["tag"]
        build_data["pure_python"] = False
