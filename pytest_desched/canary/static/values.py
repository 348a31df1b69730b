"""Chart values compared: inert opt-ins are info, the rest review or rollback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_desched.canary.static.difference import Difference, _diff, _fmt, _last_key, _walk
from pytest_desched.canary.static.protections import _lowerings


def _inert(v: Any) -> bool:
    """A value that renders nothing by default (opt-in: `enabled: false`, empty, null)."""
    if isinstance(v, Mapping) and v.get("enabled") is False:
        return True
    return v is None or v is False or v in ("", {}, [])


def compare_values(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[Difference]:
    """`helm show values` of both charts, by path (a key on one side only is one row).

    A removed key matters because helm silently ignores values a chart no longer reads: a
    values file written for the baseline may stop doing what it says under the candidate.
    """
    out: list[Difference] = []
    for path, change, b, c in _walk(baseline, candidate, ("values",)):
        where, key = _fmt(path), _last_key(path)
        lowered = _lowerings(path, b, c)
        if lowered:
            sev, msg = (
                "rollback",
                f"the chart's default policy lowers a protection: {'; '.join(lowered)}",
            )
        elif change == "added" and _inert(c):
            sev, msg = (
                "info",
                f"new value {where}, inert by default (opt-in): renders nothing unless set",
            )
        elif change == "added":
            sev, msg = (
                "review",
                f"new value {where} with a non-empty default: check what it renders",
            )
        elif change == "removed":
            sev = "review"
            msg = (
                f"{where} is gone: a values file that sets it is silently ignored by the candidate"
            )
        elif _inert(b) and _inert(c):
            sev, msg = "info", f"{where}: one empty default for another"
        else:
            sev, msg = "review", f"default of {where} changed: installs that rely on it change too"
        out.append(_diff("values", where, change, b, c, sev, msg, key))
    return out
