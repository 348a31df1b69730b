"""The metric families each release declares, read from its own `metrics/metrics.go`.

An upgrade breaks dashboards and alerts quietly: v0.34.0 added `pods_evicted_total`,
`loop_duration_seconds` and `strategy_duration_seconds` beside the old names and marked the
old ones deprecated (`DeprecatedVersion`); a later release drops them. The served families
(metric_probe) say what a binary answers today; the code says what is deprecated and what
replaced it (the same Help text under another name), so an alert on an old name is flagged
before anything runs. Rule codes (rule_table): DM001 deprecated in the candidate, DM002 removed, DM003 new, DM004
deprecated in both (an alert on it still needs the new name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pytest_desched.canary.static.difference import Difference, make_difference

METRICS_GO = Path("metrics") / "metrics.go"
_CONST = re.compile(r'^\s*(\w+)\s*=\s*"([^"]*)"', re.MULTILINE)
_FIELD = re.compile(r'(\w+):\s*(?:"((?:[^"\\]|\\.)*)"|(\w+))')


@dataclass(frozen=True)
class Declared:
    """One metric family as the code declares it."""

    name: str  # the full family name, subsystem included
    help: str
    deprecated_since: str | None


def declared_metrics(tree: Path | None) -> dict[str, Declared] | None:
    """Every `*Opts{...}` block of the tree's metrics/metrics.go; None when there is none."""
    path = tree / METRICS_GO if tree is not None else None
    if path is None or not path.is_file():
        return None
    text = path.read_text(errors="replace")
    consts = dict(_CONST.findall(text))
    out: dict[str, Declared] = {}
    for block in text.split("Opts{")[1:]:
        fields: dict[str, str] = {}
        for key, quoted, ident in _FIELD.findall(block.split("}", 1)[0]):
            fields.setdefault(key, quoted if ident == "" else consts.get(ident, ident))
        if "Name" not in fields:
            continue
        name = "_".join(x for x in (fields.get("Subsystem"), fields["Name"]) if x)
        out[name] = Declared(name, fields.get("Help", ""), fields.get("DeprecatedVersion"))
    return out


def compare_declared_metrics(
    baseline: dict[str, Declared], candidate: dict[str, Declared]
) -> list[Difference]:
    """What an alert or dashboard on the baseline's families meets in the candidate."""

    def successor(old: Declared) -> str:
        """A live family the candidate declares with the same help text as `old`."""
        same = [
            d.name
            for d in candidate.values()
            if d.help == old.help and d.name != old.name and not d.deprecated_since
        ]
        return f"; its successor (same help text): {same[0]}" if same else ""

    out: list[Difference] = []
    for name in sorted(baseline):
        old, new = baseline[name], candidate.get(name)
        if new is None:
            msg = f"DM002 metric-removed: {name} is not declared by the candidate{successor(old)}"
            out.append(make_difference("DM002", "metrics", name, "removed", name, None, msg))
        elif new.deprecated_since and not old.deprecated_since:
            msg = (
                f"DM001 metric-deprecated: {name} is deprecated since {new.deprecated_since} in "
                f"the candidate{successor(new)}: alerts and dashboards on it need the new name"
            )
            out.append(
                make_difference("DM001", "metrics", name, "changed", "served", "deprecated", msg)
            )
        elif new.deprecated_since and old.deprecated_since:
            msg = (
                f"DM004 metric-deprecated-kept: {name} is deprecated in both releases (since "
                f"{new.deprecated_since}){successor(new)}: a later release may drop it"
            )
            out.append(
                make_difference("DM004", "metrics", name, "kept", "deprecated", "deprecated", msg)
            )
    for name in sorted(set(candidate) - set(baseline)):
        msg = f"DM003 metric-added: {name} is new in the candidate"
        out.append(make_difference("DM003", "metrics", name, "added", None, name, msg))
    return out


__all__ = ["Declared", "compare_declared_metrics", "declared_metrics"]
