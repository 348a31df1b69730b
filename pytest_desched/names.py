"""The one source of truth for names that become paths or Kubernetes names.

A descheduler version, a release, a namespace, a variant or an experiment name ends up in a
cache folder, a lock file, an artifacts folder or an object name. Each is checked here at the
front door against a strict pattern, so `../`, absolute paths, NUL and shell metacharacters
never reach a path join. Ground floor: imports only `errors`.
"""

from __future__ import annotations

import re
from pathlib import Path

from pytest_desched.errors import InputError

__all__ = ["DNS_LABEL", "PATH_SEGMENT", "RELEASE", "check", "inside"]

# A path segment: starts with a letter or digit, then letters, digits and . _ + - ; no "..".
# Covers release tags (v0.36.0, v0.36.0-rc.1+build), commits (hex), branches (master).
PATH_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")  # RFC 1123 label, 63
RELEASE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,51}[a-z0-9])?")  # helm: a label of <= 53

_KINDS: dict[str, tuple[re.Pattern[str], str]] = {
    "version": (PATH_SEGMENT, "a release tag (v0.36.0) or a commit"),
    "segment": (PATH_SEGMENT, "letters, digits and . _ + - (no / and no ..)"),
    "release": (RELEASE, "lower-case letters, digits and -, at most 53 (a helm release)"),
    "namespace": (DNS_LABEL, "lower-case letters, digits and -, at most 63 (RFC 1123)"),
}


def check(kind: str, value: object, field: str, source: str = "input") -> str:
    """`value` if it matches the `kind` pattern; else one InputError naming field and fix."""
    pattern, rule = _KINDS[kind]
    if not isinstance(value, str) or not pattern.fullmatch(value) or ".." in value:
        shown = repr(value)[:60]
        raise InputError(source, field, f"{shown} is not a valid {kind} name", f"use {rule}")
    return value


def inside(root: Path, *parts: str) -> Path:
    """`root/parts...`, refused when the result would leave `root` (a last line of defence)."""
    path = root.joinpath(*parts).resolve()
    if not path.is_relative_to(root.resolve()):
        raise InputError(str(root), "/".join(parts), "leaves its folder", "use a plain name")
    return path
