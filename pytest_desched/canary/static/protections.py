"""Protection rules: which change lowers a pod protection or raises an eviction cap."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_desched.canary.static.difference import Path_, _leaf_pairs
from pytest_desched.descheduler.policy.lint import DEPRECATED_EVICTOR_BOOLEANS, go_seconds
from pytest_desched.descheduler.policy.release_fields import (
    effective_protections as effective_protections,  # its home: the per-release reading
)

_EVICT_FLAGS = {k for k, (f, _) in DEPRECATED_EVICTOR_BOOLEANS.items() if f == "defaultDisabled"}
_IGNORE_FLAGS = {k for k, (f, _) in DEPRECATED_EVICTOR_BOOLEANS.items() if f == "extraEnabled"}
_CAPS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _seconds(v: Any) -> float | None:
    """A Go duration ("10m0s", as the effective policy spells minPodAge) in seconds."""
    if v is None or v in ("", "0"):
        return 0.0
    if _num(v) is not None:
        return _num(v)
    return go_seconds(str(v))


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else []


def _lowering(path: Path_, b: Any, c: Any) -> str | None:
    """Why a leaf change lowers a protection or raises a cap (the runbook's rollback), or None."""
    key = path[-1] if path else ""
    parent = path[-2] if len(path) > 1 else ""
    if parent == "podProtections" and key == "defaultDisabled":
        new = [x for x in _as_list(c) if x not in _as_list(b)]
        return f"default protection(s) {', '.join(map(str, new))} disabled" if new else None
    if parent == "podProtections" and key == "extraEnabled":
        gone = [x for x in _as_list(b) if x not in _as_list(c)]
        return (
            f"extra protection(s) {', '.join(map(str, gone))} no longer enabled" if gone else None
        )
    if key in _EVICT_FLAGS and c is True and b is not True:
        return f"{key}: true disables the {DEPRECATED_EVICTOR_BOOLEANS[key][1]} protection"
    if key in _IGNORE_FLAGS and b is True and c is not True:
        return f"{key} off drops the {DEPRECATED_EVICTOR_BOOLEANS[key][1]} protection"
    if key == "nodeFit" and b is True and c is not True:
        return "nodeFit off: pods are evicted even where no other node fits them"
    if key == "minReplicas" and (_num(c) or 0) < (_num(b) or 0):
        return f"minReplicas lowered ({b} -> {c}): smaller owners become evictable"
    if key == "minPodAge":
        sb, sc = _seconds(b), _seconds(c)
        if sb is not None and sc is not None and sc < sb:
            return f"minPodAge lowered ({b} -> {c}): younger pods become evictable"
    if key == "noEvictionPolicy" and b == "Mandatory" and c != "Mandatory":
        return "noEvictionPolicy no longer Mandatory: annotated pods become evictable"
    if parent == "priorityThreshold" and key == "value":
        nb, nc = _num(b), _num(c)
        if nb is not None and nc is not None and nc > nb:
            return f"priorityThreshold raised ({b} -> {c}): fewer pods count as system-critical"
    if key in _CAPS and _num(b) is not None and (c is None or (_num(c) or 0) > (_num(b) or 0)):
        return f"eviction cap {key} {'removed' if c is None else 'raised'} ({b} -> {c})"
    return None


def _lowerings(path: Path_, b: Any, c: Any) -> list[str]:
    return [r for p, x, y in _leaf_pairs(path, b, c) if (r := _lowering(p, x, y))]


_GO_CONST = re.compile(r"(\w+)\s+PodProtection\s*=\s*\"([^\"]+)\"")
_GO_DEFAULTS = re.compile(r"defaultPodProtections\s*=\s*\[\]PodProtection\{([^}]*)\}", re.S)


def default_protections_from_source(source: Path) -> tuple[str, ...]:
    """`defaultPodProtections` of a descheduler source tree (a candidate's own defaults).

    Read from pkg/framework/plugins/defaultevictor/types.go, because a candidate may change
    which protections are on by default ("subject to change in future versions", it says).
    """
    types_go = source / "pkg/framework/plugins/defaultevictor/types.go"
    text = types_go.read_text(encoding="utf-8")
    consts = dict(_GO_CONST.findall(text))
    m = _GO_DEFAULTS.search(text)
    if m is None:
        raise ValueError(f"{types_go}: no defaultPodProtections list")
    names = [re.sub(r"//.*", "", n).strip() for n in m.group(1).split(",")]
    return tuple(consts.get(n, n.strip('"')) for n in names if n)
