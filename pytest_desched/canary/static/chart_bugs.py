"""Known chart bugs in the rendered roles: a chart whose ClusterRole lacks what its release
lists at start (descheduler#1839: chart 0.35.0 and PersistentVolumeClaims), and a candidate
role that widens to grant it, which is that bug's fix: a rollback trigger named by the bug.

The registry (known_bugs: `chart_range`, `rbac`) says which charts and releases; the render
says whether the role grants it. A role a user's values extend is judged as rendered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_desched.canary.static.difference import Difference, make_difference
from pytest_desched.canary.static.manifests import covers, rule_perms
from pytest_desched.descheduler.known_bugs import REGISTRY, KnownBug

__all__ = ["chart_bug_differences", "name_fixes"]


def _missing(bug: KnownBug, docs: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """(resource, verbs) of the bug's rules no rendered ClusterRole grants."""
    have = set().union(
        *(rule_perms(d.get("rules")) for d in docs if d.get("kind") == "ClusterRole")
    )
    out = []
    for group, resource, verbs in bug.rbac:
        lacking = [v for v in verbs if not any(covers(h, (group, resource, "", v)) for h in have)]
        if lacking:
            out.append((resource, lacking))
    return out


def _trigger(bug: KnownBug, policies: Sequence[Mapping[str, Any]]) -> str:
    for doc in policies:
        if bug.policy_trigger is not None and (why := bug.policy_trigger(doc)):
            return f"; with this policy: {why}"
    return ""


def chart_bug_differences(
    side: str,
    docs: Sequence[Mapping[str, Any]],
    chart_version: str,
    release: str,
    policies: Sequence[Mapping[str, Any]] = (),
    registry: Sequence[KnownBug] = REGISTRY,
) -> list[Difference]:
    """DR009 for each registered chart bug `side`'s render has: the chart is in the bug's
    chart range, the release in its range, and no ClusterRole grants what the bug names."""
    out: list[Difference] = []
    for bug in registry:
        if bug.chart_range is None or not bug.rbac or not bug.applies_to(release):
            continue
        if not bug.chart_range.holds(chart_version):
            continue
        for resource, verbs in _missing(bug, docs):
            msg = (
                f"{bug.id} on the {side}: chart {chart_version}'s ClusterRole does not grant "
                f"{', '.join(verbs)} on {resource}, which {release} lists at start "
                f"({bug.affected.since_proof.removeprefix('code: ')}); its informer never "
                f"syncs and no cycle runs ({bug.describe()}; fixed in chart "
                f"{bug.chart_range.fixed_in}){_trigger(bug, policies)}"
            )
            where = f"{side} ClusterRole rules[{resource}]"
            out.append(make_difference("DR009", "rbac", where, "narrowed", verbs, [], msg))
    return out


def name_fixes(
    diffs: Sequence[Difference],
    baseline_chart: str,
    baseline_release: str,
    policies: Sequence[Mapping[str, Any]] = (),
    registry: Sequence[KnownBug] = REGISTRY,
) -> list[Difference]:
    """A widened role (DR001) that grants what a chart bug of the baseline's lacked is that
    bug's fix: still a rollback trigger unless explained, now named by the bug."""
    out = []
    for d in diffs:
        for bug in registry:
            if d.rule != "DR001" or bug.chart_range is None or not bug.rbac:
                continue
            if not (bug.chart_range.holds(baseline_chart) and bug.applies_to(baseline_release)):
                continue
            if any(d.path.endswith(f"rules[{r if not g else f'{g}/{r}'}]") for g, r, _ in bug.rbac):
                d = replace(
                    d,
                    message=(
                        f"{d.message}; it is the fix of {bug.id} (the baseline's chart "
                        f"{baseline_chart} cannot list it while {baseline_release} does at "
                        f"start): explain it with --expect kind=static link={bug.link}"
                        f"{_trigger(bug, policies)}"
                    ),
                )
        out.append(d)
    return out
