"""Protection rules: which change lowers a pod protection or raises an eviction cap.

A pod protection is judged by what a DefaultEvictor's args leave *active*, not leaf by leaf:
chart 0.33's `ignorePvcPods: true, evictLocalStoragePods: true` and chart 0.34+'s
`podProtections: {defaultDisabled: [PodsWithLocalStorage], extraEnabled: [PodsWithPVC]}`
protect the same pods, so that rename lowers nothing, while a `podProtections` list set beside
the old booleans silently overrides them (the descheduler reads one or the other)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_desched.canary.static.difference import Path_, as_list, by_name, leaf_pairs
from pytest_desched.descheduler.policy.lint import DEPRECATED_EVICTOR_BOOLEANS, go_seconds
from pytest_desched.descheduler.policy.release_fields import (
    PROTECTIONS_FIELD,
)
from pytest_desched.descheduler.policy.release_fields import (
    effective_protections as effective_protections,  # its home: the per-release reading
)

_EVICT_FLAGS = {k for k, (f, _) in DEPRECATED_EVICTOR_BOOLEANS.items() if f == "defaultDisabled"}
_IGNORE_FLAGS = {k for k, (f, _) in DEPRECATED_EVICTOR_BOOLEANS.items() if f == "extraEnabled"}
# the keys that say which pods are protected (judged as a whole: the module docstring)
RAW_PROTECTION_KEYS = frozenset({PROTECTIONS_FIELD, *DEPRECATED_EVICTOR_BOOLEANS})
# on by default in every release: the protections the deprecated evict* booleans turn off
_LEGACY_DEFAULTS = tuple(
    p for f, p in DEPRECATED_EVICTOR_BOOLEANS.values() if f == "defaultDisabled"
)
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


def _lowering(path: Path_, b: Any, c: Any, lost: frozenset[str] | None = None) -> str | None:
    """Why a leaf change lowers a protection or raises a cap (the runbook's rollback), or None.
    With `lost` (the protections the change leaves inactive, see :func:`lowerings`), a
    protection leaf counts only for the protections really lost."""

    def kept(names: list[Any]) -> list[Any]:
        return [n for n in names if lost is None or n in lost]

    key = path[-1] if path else ""
    parent = path[-2] if len(path) > 1 else ""
    if parent == PROTECTIONS_FIELD and key == "defaultDisabled":
        new = kept([x for x in as_list(c) if x not in as_list(b)])
        return f"default protection(s) {', '.join(map(str, new))} disabled" if new else None
    if parent == PROTECTIONS_FIELD and key == "extraEnabled":
        gone = kept([x for x in as_list(b) if x not in as_list(c)])
        return (
            f"extra protection(s) {', '.join(map(str, gone))} no longer enabled" if gone else None
        )
    if key in _EVICT_FLAGS and c is True and b is not True:
        if kept([DEPRECATED_EVICTOR_BOOLEANS[key][1]]):
            return f"{key}: true disables the {DEPRECATED_EVICTOR_BOOLEANS[key][1]} protection"
        return None
    if key in _IGNORE_FLAGS and b is True and c is not True:
        if kept([DEPRECATED_EVICTOR_BOOLEANS[key][1]]):
            return f"{key} off drops the {DEPRECATED_EVICTOR_BOOLEANS[key][1]} protection"
        return None
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


Roots = tuple[Any, Any, int]  # the two walked documents, and how many path parts name them


def lowerings(path: Path_, b: Any, c: Any, roots: Roots | None = None) -> list[str]:
    """Every lowering under one walk row. With `roots`, a protection leaf is judged against the
    protections its DefaultEvictor args leave active on each side (the module docstring says
    why), and a protection lost with no leaf of its own to say so is named too."""
    out: list[str] = []
    lost_at: dict[Path_, frozenset[str]] = {}
    for p, x, y in leaf_pairs(path, b, c):
        i = next((i for i, part in enumerate(p) if part in RAW_PROTECTION_KEYS), None)
        if i is None or roots is None:
            if r := _lowering(p, x, y):
                out.append(r)
            continue
        args = p[:i]
        if args not in lost_at:
            lost_at[args] = _lost(roots, args)
            extra = lost_at[args] - _named_by_leaves(path, b, c, args)
            if extra:
                out.append(
                    f"protection(s) {', '.join(sorted(extra))} no longer active: the "
                    f"{PROTECTIONS_FIELD} lists, when set, override the deprecated booleans"
                )
        if r := _lowering(p, x, y, lost=lost_at[args]):
            out.append(r)
    return out


def _named_by_leaves(path: Path_, b: Any, c: Any, args: Path_) -> frozenset[str]:
    """The protections some leaf under `args` would name if it lowered one."""
    names: set[str] = set()
    for p, x, y in leaf_pairs(path, b, c):
        if p[: len(args)] != args or len(p) <= len(args):
            continue
        key = p[-1]
        if key in DEPRECATED_EVICTOR_BOOLEANS:
            names.add(DEPRECATED_EVICTOR_BOOLEANS[key][1])
        elif key in ("defaultDisabled", "extraEnabled"):
            names |= {str(n) for n in (*as_list(x), *as_list(y))}
    return frozenset(names)


def _lost(roots: Roots, args: Path_) -> frozenset[str]:
    """The protections the baseline's args at `args` leave active and the candidate's do not
    (over the defaults every release has, plus any name a side disables: it is on by default)."""
    base, cand, skip = roots
    sides = []
    for root in (base, cand):
        found = _resolve(root, args[skip:])
        side = dict(found) if isinstance(found, Mapping) else {}
        if not isinstance(side.get(PROTECTIONS_FIELD), Mapping):  # malformed: lint says so
            side.pop(PROTECTIONS_FIELD, None)
        sides.append(side)
    named = [
        n for s in sides for n in as_list((s.get(PROTECTIONS_FIELD) or {}).get("defaultDisabled"))
    ]
    defaults = list(dict.fromkeys([*_LEGACY_DEFAULTS, *map(str, named)]))
    active_b, active_c = (_active(s, defaults) for s in sides)
    return frozenset(p for p in active_b if p not in active_c)


def _active(args: Mapping[str, Any], defaults: list[str]) -> list[str]:
    """effective_protections, where a name only a `defaultDisabled` list gives (a release's
    default beyond the four the booleans know) is on under the boolean form too."""
    active = effective_protections(args, defaults)
    pp = args.get(PROTECTIONS_FIELD) or {}
    if pp.get("defaultDisabled") or pp.get("extraEnabled"):
        return active
    return active + [d for d in defaults if d not in _LEGACY_DEFAULTS and d not in active]


def _resolve(root: Any, path: Path_) -> Any:
    """The value at a walk path (`[name]` parts index a named list), or None."""
    cur = root
    for part in path:
        if part.startswith("[") and part.endswith("]"):
            cur = (by_name(cur) or {}).get(part[1:-1])
        elif isinstance(cur, Mapping):
            cur = cur.get(part)
        else:
            return None
    return cur


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
