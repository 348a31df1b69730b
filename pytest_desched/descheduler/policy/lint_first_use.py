"""The first `desched lint` after `pip install`: say what it builds, how long and why, first.

Lint needs two binaries and nothing else from the toolchain: helm (renders Helm values with the
pinned chart) and the policy checker (the descheduler's own decoding and validation, built
against the pinned descheduler). They ship in the optional pytest-desched-lint-bin wheel
(`pytest-desched[lint-bin]`; `make wheel-lint` here, nothing is published), taken when it
matches the pins (tools/lint_bin.py); without it the first lint builds them with Go, cached,
and later lints answer in seconds. The time below was measured from a cold cache
(docs/lint.md#first-use): it is the one figure the message gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from pytest_desched.descheduler.policy.lint import is_values
from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import load_yaml_all

if TYPE_CHECKING:
    from pytest_desched.tools.toolchain import Toolchain

__all__ = ["COLD_BUILD_MINUTES", "LINT_TOOLS", "first_use_line", "has_values"]

# Measured on the loaded 2-core development VM from an empty tool, Go build and module cache
# (docs/lint.md#first-use has the run): helm, then the policy checker.
COLD_BUILD_MINUTES = 19  # 1124 s, 2026-12-02
LINT_TOOLS = {"helm": "helm", "policycheck": "the policy checker"}  # tool -> how it is said


def first_use_line(tc: Toolchain, values: bool) -> str | None:
    """The line lint says before a build (None: everything it needs is there). ``values``:
    Helm values may be rendered, so helm is needed too."""
    tools: Sequence[str] = ("helm", "policycheck") if values else ("policycheck",)
    missing = [t for t in tools if tc.needs_build(t)]
    if not missing:
        return None
    names = " and ".join(f"{LINT_TOOLS[t]} {tc.wanted_version(t)}" for t in missing)
    return (
        f"first lint: building {names} with Go (about {COLD_BUILD_MINUTES} min on a "
        f"loaded 2-core machine, once; cached in {tc.cache_dir}): helm renders values with the "
        "pinned chart, the policy checker is the descheduler's own validation "
        "(docs/lint.md#first-use)"
    )


def has_values(files: Iterable[str]) -> bool:
    """Whether any FILE is Helm values (so helm renders it), as `lint.load_targets` tells them
    apart; a file it cannot read is refused later, before any build, so it counts for nothing."""
    for f in files:
        try:
            docs = [d for d in load_yaml_all(Path(f).read_text(encoding="utf-8"), f) if d]
        except (OSError, UnicodeDecodeError, ConfigError, yaml.YAMLError):
            continue
        one = docs[0] if len(docs) == 1 else None
        if isinstance(one, dict) and one.get("kind") != "DeschedulerPolicy" and is_values(one):
            return True
    return False
