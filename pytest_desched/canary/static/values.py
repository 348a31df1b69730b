"""Chart values compared: inert opt-ins are info, the rest review or rollback."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_desched.canary.static.difference import (
    Difference,
    Path_,
    format_path,
    last_key,
    make_difference,
    walk,
)
from pytest_desched.canary.static.protections import Roots, lowerings


def _inert(v: Any) -> bool:
    """A value that renders nothing by default (opt-in: `enabled: false`, empty, null)."""
    if isinstance(v, Mapping) and v.get("enabled") is False:
        return True
    return v is None or v is False or v in ("", {}, [])


def _sets(docs: Sequence[Mapping[str, Any]], path: Sequence[str]) -> bool:
    """Whether one of the user's values documents sets ``values.<path>`` (plain keys)."""
    for doc in docs:
        cur: Any = doc
        for key in path[1:]:
            if not isinstance(cur, Mapping) or key not in cur:
                break
            cur = cur[key]
        else:
            return True
    return False


def _get(doc: Any, keys: Sequence[str]) -> Any:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, Mapping) else None
    return doc


def _renames(
    rows: Sequence[tuple[Path_, str, Any, Any]], roots: Roots
) -> dict[Path_, Path_ | None]:
    """Removed key -> the added key it was renamed to; the added key -> None. A pair: the
    same parent, neither lowering a protection, and the same non-empty default or a name
    at least 85% alike (difflib), each key in one pair at most."""
    plain = [(p, ch, b, c) for p, ch, b, c in rows if not lowerings(p, b, c, roots)]
    gone = [(p, b) for p, ch, b, _ in plain if ch == "removed" and not p[-1].startswith("[")]
    new = [(p, c) for p, ch, _, c in plain if ch == "added" and not p[-1].startswith("[")]
    out: dict[Path_, Path_ | None] = {}
    for pr, b in gone:
        for pa, c in new:
            if pa in out or pa[:-1] != pr[:-1]:
                continue
            alike = difflib.SequenceMatcher(None, pr[-1].lower(), pa[-1].lower()).ratio()
            if (b == c and not _inert(b)) or alike >= 0.85:
                out[pr], out[pa] = pa, None
                break
    return out


def compare_values(
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    user: Sequence[Mapping[str, Any]] = (),
) -> list[Difference]:
    """`helm show values` of both charts, by path (a key on one side only is one row).

    A removed key matters because helm silently ignores values a chart no longer reads: a
    values file written for the baseline may stop doing what it says under the candidate.
    When one of the ``user`` values documents sets it, that is its own rule (DU007). A key
    removed beside an added one of the same default or a close name is one rename row (DU008).
    """
    out: list[Difference] = []
    rows = list(walk(baseline, candidate, ("values",)))
    roots: Roots = (baseline, candidate, 1)  # the walk's paths start with "values"
    renamed = _renames(rows, roots)
    for path, change, b, c in rows:
        where, key = format_path(path), last_key(path)
        lowered = lowerings(path, b, c, roots)
        if path in renamed:
            new = renamed[path]
            if new is None:
                continue  # said on the removed key's row
            rule = "DU008"
            yours = " (your values set it)" if _sets(user, path) else ""
            msg = (
                f"{where} looks renamed to {new[-1]} in the candidate's chart{yours}: "
                f"a values file that sets {key} must set {new[-1]} there"
            )
            c = _get(candidate, new[1:])
            out.append(make_difference(rule, "values", where, "renamed", b, c, msg, key))
            continue
        if lowered:
            rule = "DU006"
            msg = f"the chart's default policy lowers a protection: {'; '.join(lowered)}"
        elif change == "added" and _inert(c):
            rule = "DU002"
            msg = f"new value {where}, inert by default (opt-in): renders nothing unless set"
        elif change == "added":
            rule, msg = (
                "DU001",
                f"new value {where} with a non-empty default: check what it renders",
            )
        elif change == "removed" and _sets(user, path):
            rule = "DU007"
            msg = f"{where} is set by your values and gone from the candidate's chart: it does nothing there"
        elif change == "removed":
            rule = "DU003"
            msg = (
                f"{where} is gone: a values file that sets it is silently ignored by the candidate"
            )
        elif _inert(b) and _inert(c):
            rule, msg = "DU005", f"{where}: one empty default for another"
        else:
            rule = "DU004"
            msg = f"default of {where} changed: installs that rely on it change too"
        out.append(make_difference(rule, "values", where, change, b, c, msg, key))
    return out
