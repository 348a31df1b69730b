"""The one source of truth for names that become paths or Kubernetes names.

A descheduler version, a release, a namespace, a variant or an experiment name ends up in a
cache folder, a lock file, an artifacts folder or an object name. Each is checked here at the
front door against a strict pattern, so `../`, absolute paths, NUL and shell metacharacters
never reach a path join. Ground floor: imports only `errors`.
"""

from __future__ import annotations

import re
from pathlib import Path

from pytest_desched.errors import InputError, LabInputError

__all__ = [
    "DNS_LABEL",
    "PATH_SEGMENT",
    "RELEASE",
    "RESERVED_NAMESPACES",
    "check",
    "check_namespace",
    "inside",
]

# A path segment: starts with a letter or digit, then letters, digits and . _ + - ; no "..".
# Covers release tags (v0.36.0, v0.36.0-rc.1+build), commits (hex), branches (master).
PATH_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")  # RFC 1123 label, 63
RELEASE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,51}[a-z0-9])?")  # helm: a label of <= 53
# Namespaces a lab must never be: the cluster's own, and `kube-` is reserved for Kubernetes.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

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
    """`root/parts...` (as joined, not resolved), refused when it would leave `root`.

    The last line of defence where a name becomes a path (cache folders, lock and log files,
    evidence files): a part that is absolute, holds `..` that climbs out, a NUL byte, or a
    symlink pointing outside is one InputError, never a write elsewhere.
    """
    where = "/".join(str(p) for p in parts)
    if any("\x00" in str(p) for p in parts):
        raise InputError(str(root), repr(where)[:80], "holds a NUL byte", "use a plain name")
    path = root.joinpath(*parts)
    if not path.resolve().is_relative_to(root.resolve()):
        raise InputError(str(root), where, "leaves its folder", "use a plain name")
    return path


def check_namespace(name: object, release_namespace: str | None = None) -> str:
    """The lab namespace if it is one a lab may create; LabInputError naming the fix if not."""
    fix = "pick another with --desched-namespace (or namespace=...)"
    if not isinstance(name, str) or not name:
        raise LabInputError(f"lab namespace {name!r} must be a non-empty string; {fix}")
    reserved = {*RESERVED_NAMESPACES, *([release_namespace] if release_namespace else [])}
    if name in reserved or name.startswith("kube-"):
        raise LabInputError(
            f"lab namespace {name!r} is reserved ({', '.join(sorted(reserved))}, kube-*; the "
            f"release lives in {release_namespace or 'kube-system'}) and a lab deletes its "
            f"namespace afterwards; {fix}"
        )
    if len(name) > 63:
        raise LabInputError(
            f"lab namespace {name[:20]!r}... is {len(name)} characters; a namespace name has at "
            f"most 63 (RFC 1123 label); {fix}"
        )
    if not DNS_LABEL.fullmatch(name):
        raise LabInputError(
            f"lab namespace {name!r} is not a valid RFC 1123 label (lower-case letters, digits "
            f"and '-', starting and ending with a letter or digit); {fix}"
        )
    return name
