"""Chart values compared: inert opt-ins are info, the rest review or rollback."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_desched.canary.static.difference import Difference, _diff, _fmt, _last_key, _walk
from pytest_desched.canary.static.protections import _lowerings


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


def compare_values(
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    user: Sequence[Mapping[str, Any]] = (),
) -> list[Difference]:
    """`helm show values` of both charts, by path (a key on one side only is one row).

    A removed key matters because helm silently ignores values a chart no longer reads: a
    values file written for the baseline may stop doing what it says under the candidate.
    When one of the ``user`` values documents sets it, that is its own rule (DU007).
    """
    out: list[Difference] = []
    for path, change, b, c in _walk(baseline, candidate, ("values",)):
        where, key = _fmt(path), _last_key(path)
        lowered = _lowerings(path, b, c)
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
        out.append(_diff(rule, "values", where, change, b, c, msg, key))
    return out
