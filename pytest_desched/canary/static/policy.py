"""The policy side: lint findings, plugin and protection defaults, served metric names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_desched.canary.static.difference import (
    Difference,
    Path_,
    as_list,
    by_name,
    format_path,
    last_key,
    make_difference,
    walk,
)
from pytest_desched.canary.static.protections import (
    RAW_PROTECTION_KEYS,
    effective_protections,
    lowerings,
)
from pytest_desched.descheduler.policy.lint import RULES, Finding

_LINT_RANK = {"error": 0, "warning": 1, "note": 2}
# The migration rule a lint finding new (or worse) under the candidate falls under, by its DL
# rule; any other by its severity.
_NEW_UNDER_CANDIDATE = {"DL001": "DP001", "DL002": "DP002", "DL003": "DP002", "DL006": "DP003"}
_NEW_BY_SEVERITY = {"error": "DP005", "warning": "DP006", "note": "DP007"}
_DEPRECATED = "DL006"  # a deprecated field: reported while both releases deprecate it (DP004)


def _new_rule(f: Finding) -> str:
    return _NEW_UNDER_CANDIDATE.get(f.rule) or _NEW_BY_SEVERITY.get(f.severity, "DP006")


def compare_lint(baseline: Sequence[Finding], candidate: Sequence[Finding]) -> list[Difference]:
    """The same policy linted under each version, by (rule, path).

    A new error means the candidate refuses the policy or drops a field of it: the policy
    would not do under the candidate what it does now, so it must be explained. A deprecated
    field both releases report stays a row (DP004): the upgrade is the time to move off it.
    """

    def key(f: Finding) -> tuple[str, str]:
        return f.rule, f.path

    fb, fc = {key(f): f for f in baseline}, {key(f): f for f in candidate}
    out: list[Difference] = []
    for k in dict.fromkeys([*fb, *fc]):
        b, c = fb.get(k), fc.get(k)
        name = RULES[k[0]].name if k[0] in RULES else k[0]
        where = f"{k[0]} {name} {k[1]}"
        if b is None and c is not None:
            msg = f"new under the candidate ({c.severity}): {c.message}"
            out.append(
                make_difference(_new_rule(c), "policy-lint", where, "added", None, c.message, msg)
            )
        elif c is None and b is not None:
            msg = f"no longer reported under the candidate (was {b.severity}): {b.message}"
            out.append(
                make_difference("DP008", "policy-lint", where, "removed", b.message, None, msg)
            )
        elif b is not None and c is not None and (b.severity, b.message) != (c.severity, c.message):
            worse = _LINT_RANK.get(c.severity, 1) < _LINT_RANK.get(b.severity, 1)
            rule = _new_rule(c) if worse else "DP008"
            msg = f"{b.severity} -> {c.severity}: {c.message}"
            out.append(
                make_difference(rule, "policy-lint", where, "changed", b.message, c.message, msg)
            )
        elif b is not None and c is not None and k[0] == _DEPRECATED:
            msg = f"deprecated under both releases, still used: {c.message}"
            out.append(
                make_difference("DP004", "policy-lint", where, "kept", b.message, c.message, msg)
            )
    return out


_EVICTING = ("deschedule", "balance")
_FILTERING = ("filter", "preevictionfilter")


def _plugin_diffs(where: str, b: Mapping[str, Any], c: Mapping[str, Any]) -> list[Difference]:
    out: list[Difference] = []
    for point in dict.fromkeys([*b, *c]):
        eb = as_list((b.get(point) or {}).get("enabled"))
        ec = as_list((c.get(point) or {}).get("enabled"))
        path = f"{where}.plugins.{point}.enabled"
        if added := [p for p in ec if p not in eb]:
            if point in _EVICTING:
                rule, why = "DD001", "more strategies pick candidates: the candidate set can grow"
            else:
                rule, why = "DD002", "a new filter or sort changes which pods are picked"
            msg = f"{', '.join(added)} enabled at {point} after the candidate's defaulting: {why}"
            out.append(make_difference(rule, "defaults", path, "added", eb, ec, msg))
        if gone := [p for p in eb if p not in ec]:
            if point in _FILTERING:
                rule, why = "DD003", "a filter that protected pods no longer runs"
            else:
                rule, why = "DD004", "fewer pods are picked"
            msg = f"{', '.join(gone)} no longer enabled at {point} after the candidate's defaulting: {why}"
            out.append(make_difference(rule, "defaults", path, "removed", eb, ec, msg))
        db = as_list((b.get(point) or {}).get("disabled"))
        dc = as_list((c.get(point) or {}).get("disabled"))
        if db != dc:
            msg = f"the disabled plugins at {point} differ after defaulting"
            out.append(
                make_difference(
                    "DD005", "defaults", f"{where}.plugins.{point}.disabled", "changed", db, dc, msg
                )
            )
    return out


def _evictor_args(profile: Mapping[str, Any]) -> Mapping[str, Any]:
    cfg = by_name(profile.get("pluginConfig")) or {}
    return (cfg.get("DefaultEvictor") or {}).get("args") or {}


def compare_defaults(
    baseline_effective: Mapping[str, Any],
    candidate_effective: Mapping[str, Any],
    *,
    baseline_protections: Sequence[str] | None = None,
    candidate_protections: Sequence[str] | None = None,
) -> list[Difference]:
    """One policy after each version's own defaulting (policycheck's ``effective``).

    Pod protections are compared as the sets each DefaultEvictor leaves active
    (:func:`effective_protections` over that version's defaults: pass the candidate's from
    :func:`default_protections_from_source`), not as raw lists: the descheduler's effective
    form does not list the protections that are on by default, and those are what an
    upgrade can silently take away.
    """
    out: list[Difference] = []
    pb = by_name(baseline_effective.get("profiles")) or {}
    pc = by_name(candidate_effective.get("profiles")) or {}
    for name in dict.fromkeys([*pb, *pc]):
        where = f"profiles[{name}]"
        b, c = pb.get(name), pc.get(name)
        if b is None or c is None:
            change = "added" if b is None else "removed"
            msg = f"profile {name} {change} after defaulting: it runs its own strategies"
            out.append(make_difference("DD006", "defaults", where, change, b, c, msg))
            continue
        out += _plugin_diffs(where, b.get("plugins") or {}, c.get("plugins") or {})
        act_b = effective_protections(_evictor_args(b), baseline_protections)
        act_c = effective_protections(_evictor_args(c), candidate_protections)
        for p in dict.fromkeys([*act_b, *act_c]):
            at = f"{where}.DefaultEvictor.protections[{p}]"
            if p not in act_c:
                msg = f"protection {p} is active under the baseline and not under the candidate: those pods become evictable"
                out.append(
                    make_difference("DD007", "defaults", at, "removed", "active", "inactive", msg)
                )
            elif p not in act_b:
                msg = f"protection {p} is active under the candidate only: fewer pods are evictable"
                out.append(
                    make_difference("DD008", "defaults", at, "added", "inactive", "active", msg)
                )
        cfg_path = ("profiles", f"[{name}]", "pluginConfig")
        for path, change, vb, vc in walk(b.get("pluginConfig"), c.get("pluginConfig"), cfg_path):
            if set(path) & RAW_PROTECTION_KEYS:
                continue  # summarised above as active protections
            out.append(_defaults_row(path, change, vb, vc))
    rest_b = {k: v for k, v in baseline_effective.items() if k != "profiles"}
    rest_c = {k: v for k, v in candidate_effective.items() if k != "profiles"}
    out += [_defaults_row(p, ch, vb, vc) for p, ch, vb, vc in walk(rest_b, rest_c)]
    return out


def _defaults_row(path: Path_, change: str, b: Any, c: Any) -> Difference:
    where, lowered = format_path(path), lowerings(path, b, c)
    if lowered:
        rule, msg = "DD009", f"after the candidate's defaulting: {'; '.join(lowered)}"
    else:
        rule, msg = "DD010", f"{where} {change} after the candidate's defaulting"
    return make_difference(rule, "defaults", where, change, b, c, msg, last_key(path))


def compare_metric_names(baseline: Iterable[str], candidate: Iterable[str]) -> list[Difference]:
    """Metric families each binary served: a lost one breaks dashboards and comparisons."""
    b, c = set(baseline), set(candidate)
    new = sorted(c - b)
    out: list[Difference] = []
    for name in sorted(b - c):
        like = difflib.get_close_matches(name, new, n=1, cutoff=0.8)
        hint = f" (renamed to {like[0]}?)" if like else ""
        msg = f"{name} is no longer served{hint}: metrics lose comparability, a rollback trigger unless explained"
        out.append(make_difference("DM002", "metrics", name, "removed", name, None, msg))
    for name in new:
        msg = f"{name} is new in the candidate"
        out.append(make_difference("DM003", "metrics", name, "added", None, name, msg))
    return out
