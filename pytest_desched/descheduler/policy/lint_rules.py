"""The runbook's rules for `desched lint`, each a (rule id, path, message, fix) on one policy.

The policy is the descheduler's own effective policy (defaults applied, from the policycheck
helper); what evicts, where a plugin can be limited and which flags are deprecated come from
its facts (:class:`~.checker.DeschedulerFacts`). The runbook's numbers (caps, minPodAge) are
read from the runbook's own policy file, the one source of truth (:func:`runbook_numbers`).
:mod:`.lint` places each hit in the user's file and gives it its severity.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import yaml

from pytest_desched.descheduler.known_bugs import KnownBug
from pytest_desched.descheduler.policy.checker import CheckResult, DeschedulerFacts
from pytest_desched.descheduler.policy.lint_metrics import metrics_findings
from pytest_desched.descheduler.policy.lint_metrics_migration import migration_findings
from pytest_desched.descheduler.policy.lint_prometheus import secret_findings
from pytest_desched.descheduler.policy.model import notifies_eviction_failures
from pytest_desched.descheduler.policy.safety import credential_problems, template_problems
from pytest_desched.tools.resources import manifest_path

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy.values import RenderedValues

__all__ = [
    "DEPRECATED_EVICTOR_BOOLEANS",
    "RunbookNumbers",
    "go_seconds",
    "policy_findings",
    "runbook_numbers",
    "will_run",
]

Hit = tuple[str, str, str, str]  # (rule id, path in the policy, message, fix)

# The fix text for the DefaultEvictor booleans v0.36.0 deprecates: the podProtections entry each
# means when true (their Go doc comments in pkg/framework/plugins/defaultevictor/types.go). Which
# flags are deprecated comes from the helper (DeschedulerFacts.deprecated_evictor_flags); a flag
# missing here gets a generic fix, and a unit test holds this table to the helper's facts.
DEPRECATED_EVICTOR_BOOLEANS: dict[str, tuple[str, str]] = {
    "evictLocalStoragePods": ("defaultDisabled", "PodsWithLocalStorage"),
    "evictDaemonSetPods": ("defaultDisabled", "DaemonSetPods"),
    "evictSystemCriticalPods": ("defaultDisabled", "SystemCriticalPods"),
    "evictFailedBarePods": ("defaultDisabled", "FailedBarePods"),
    "ignorePvcPods": ("extraEnabled", "PodsWithPVC"),
    "ignorePodsWithoutPDB": ("extraEnabled", "PodsWithoutPDB"),
}


class RunbookNumbers(NamedTuple):
    """The runbook's caps and minPodAge, as its policy file says them."""

    caps: dict[str, int]  # maxNoOfPodsToEvictPerNode/PerNamespace/Total
    min_pod_age: str
    min_pod_age_s: float


_CAPS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_seconds(text: str) -> float | None:
    """A Go duration ("10m", "1h0m0s", "-5m0s") in seconds; None when it is not one."""
    raw = str(text).strip()
    sign = -1.0 if raw.startswith("-") else 1.0
    body = raw.lstrip("+-")
    parts = _GO_DURATION.findall(body)
    if not body or "".join(n + u for n, u in parts) != body:
        return None
    return sign * sum(float(n) * _UNIT_S[u] for n, u in parts)


@functools.cache
def runbook_numbers() -> RunbookNumbers:

    doc = yaml.safe_load(manifest_path("policy-safe-rebalance.yaml").read_text(encoding="utf-8"))
    evictor = next(
        pc.get("args") or {}
        for prof in doc["profiles"]
        for pc in prof.get("pluginConfig") or []
        if pc.get("name") == "DefaultEvictor"
    )
    age = str(evictor["minPodAge"])
    return RunbookNumbers({k: int(doc[k]) for k in _CAPS}, age, go_seconds(age) or 0.0)


# -------------------------------------------------------------------------------- paths ---


def path_tokens(path: str) -> list[str | int]:
    """A lint path (`profiles[0].args.x`) as its keys and list indexes, in order."""
    toks: list[str | int] = []
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        toks.append(int(part[1:-1]) if part.startswith("[") and part[1:-1].isdigit() else part)
    return toks


def line_of(node: yaml.Node | None, path: str) -> int | None:
    """1-based line of ``path`` in a composed document (the key's line for a mapping entry)."""
    line = None
    for tok in path_tokens(path):
        if isinstance(node, yaml.SequenceNode) and isinstance(tok, int) and tok < len(node.value):
            node = node.value[tok]
            line = node.start_mark.line + 1
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == tok:
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        else:
            return line
    return line


def _suggest(word: str, known: Sequence[str]) -> str:
    lowered = {k.lower(): k for k in known}
    if word.lower() in lowered:
        return lowered[word.lower()]
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return close[0] if close else ""


# -------------------------------------------------------------------------------- rules ---


def _evictor_args(
    profile: Mapping[str, Any], facts: DeschedulerFacts
) -> list[tuple[int, dict[str, Any]]]:
    return [
        (j, pc.get("args") or {})
        for j, pc in enumerate(profile.get("pluginConfig") or [])
        if isinstance(pc, dict) and pc.get("name") == facts.default_evictor
    ]


def _evicting(profile: Mapping[str, Any], facts: DeschedulerFacts) -> list[str]:
    plugins = profile.get("plugins") or {}
    return [
        n
        for ep in facts.evicting_points
        if isinstance(plugins.get(ep), dict)
        for n in plugins[ep].get("enabled") or []
    ]


def _listed(value: Any) -> list[Any]:
    """A list field as a list; anything else (the checker refuses it, DL001) as empty."""
    return value if isinstance(value, list) else []


def _plugin_args(profile: Mapping[str, Any], name: str) -> tuple[int, dict[str, Any]] | None:
    for j, pc in enumerate(profile.get("pluginConfig") or []):
        if isinstance(pc, dict) and pc.get("name") == name:
            return j, pc.get("args") or {}
    return None


def _scope_findings(i: int, profile: Mapping[str, Any], facts: DeschedulerFacts) -> list[Hit]:
    """DL014: the profile's evicting plugins that reach every namespace and every pod label.

    A scope is a DefaultEvictor ``labelSelector`` or ``namespaceLabelSelector`` (for the whole
    profile), or a plugin's own ``labelSelector`` or ``namespaces.include``.
    """
    evictor = (_plugin_args(profile, facts.default_evictor) or (0, {}))[1]
    if evictor.get("labelSelector") or evictor.get("namespaceLabelSelector"):
        return []
    loose = []
    for name in _evicting(profile, facts):
        args = (_plugin_args(profile, name) or (0, {}))[1]
        if args.get("labelSelector") or (args.get("namespaces") or {}).get("include"):
            continue
        loose.append(name)
    if not loose:
        return []
    namespaced = [n for n in loose if n in facts.plugins and facts.plugins[n].namespaced]
    fix = (
        f"give {facts.default_evictor} a labelSelector (the runbook: matchLabels "
        'descheduler.example.com/enabled: "true")'
    )
    if namespaced:
        fix += f", or each of {', '.join(namespaced)} a namespaces.include list"
    return [
        (
            "DL014",
            f"profiles[{i}].plugins",
            f"profile {profile.get('name')!r}: {', '.join(loose)} may evict any pod in any "
            "namespace (no namespace or label scope)",
            fix,
        )
    ]


def _lifetime_findings(i: int, profile: Mapping[str, Any], runbook: RunbookNumbers) -> list[Hit]:
    """DL016: PodLifeTime evicting pods younger than the runbook's minPodAge."""
    hit = _plugin_args(profile, "PodLifeTime")
    enabled = "PodLifeTime" in [
        n
        for ep in (profile.get("plugins") or {}).values()
        if isinstance(ep, dict)
        for n in ep.get("enabled") or []
    ]
    if hit is None or not enabled:
        return []
    j, args = hit
    limit = args.get("maxPodLifeTimeSeconds")
    if not isinstance(limit, int) or limit >= runbook.min_pod_age_s:
        return []
    return [
        (
            "DL016",
            f"profiles[{i}].pluginConfig[{j}].args.maxPodLifeTimeSeconds",
            f"PodLifeTime evicts every pod older than {limit}s, under the runbook's minPodAge "
            f"{runbook.min_pod_age}: pods are evicted and replaced in a loop",
            f"raise maxPodLifeTimeSeconds to at least {int(runbook.min_pod_age_s)}",
        )
    ]


def _dropped_findings(res: CheckResult) -> list[Hit]:
    out = []
    for d in res.dropped:
        leaf = path_tokens(d.path)[-1] if d.path else ""
        if d.kind == "ignored":
            out.append(("DL002", d.path, f"{d.message}; the descheduler says nothing", "remove it"))
            continue
        if d.kind == "duplicate":
            out.append(
                (
                    "DL003",
                    d.path,
                    f"{leaf!s} is given more than once; the descheduler keeps one silently",
                    "keep exactly one",
                )
            )
            continue
        guess = _suggest(str(leaf), d.known)
        fix = f'did you mean "{guess}"? rename it' if guess else "remove it"
        if d.known and not guess:
            fix += f" (valid here: {', '.join(d.known)})"
        out.append(
            (
                "DL002",
                d.path,
                f'"{leaf}" is not a field here; descheduler drops it without a word',
                fix,
            )
        )
    return out


def policy_findings(
    doc: Mapping[str, Any],
    res: CheckResult,
    version: str,
    bugs: Iterable[KnownBug],
    facts: DeschedulerFacts,
) -> list[Hit]:
    """(rule, path, message, fix) for one checked document."""
    out = _dropped_findings(res)
    for p in template_problems(doc):
        out.append(("DL005", p.split(": ", 1)[0], "contains '{{'", p.split(": ", 1)[1]))
    for p in credential_problems(doc):
        out.append(
            (
                "DL004",
                p.split(": ", 1)[0],
                "inline credential (value not shown)",
                p.split("; ", 1)[1],
            )
        )
    for i, prof in enumerate(_listed(doc.get("profiles"))):
        if not isinstance(prof, dict):
            continue
        for j, args in _evictor_args(prof, facts):
            pc_path = f"profiles[{i}].pluginConfig[{j}].args"
            for flag in facts.deprecated_evictor_flags:
                if isinstance(args, dict) and flag in args:
                    val = args[flag]
                    field, protection = DEPRECATED_EVICTOR_BOOLEANS.get(flag, ("", ""))
                    if not protection:
                        form = "the matching podProtections entry (see the descheduler's docs)"
                    elif val is True:
                        form = f"podProtections.{field}: [{protection}]"
                    else:
                        form = f"nothing (false is the default; {protection} stays as it is)"
                    out.append(
                        (
                            "DL006",
                            f"{pc_path}.{flag}",
                            f"{flag} is deprecated (and refused together with podProtections)",
                            f"replace `{flag}: {json.dumps(val)}` with {form}",
                        )
                    )
    out += metrics_findings(doc)  # static: read as written, whether or not it is accepted
    out += migration_findings(doc, version)  # the metricsCollector -> metricsProviders move
    out += secret_findings(doc)  # DL030: the token Secret the chart's RBAC cannot read
    if not res.accepted:
        fix = "fix the field the descheduler names; nothing of this policy would run"
        out.insert(
            0, ("DL001", "", f"descheduler {version} refuses it ({res.stage}): {res.error}", fix)
        )
        return out
    eff = res.effective
    for note in res.notes:
        out.append(("DL013", "", note, "check it on the target cluster before the first round"))
    if res.enabled_plugins == 0:
        out.append(
            (
                "DL007",
                "profiles",
                "no plugin is enabled at deschedule or balance: the descheduler starts and does nothing",
                "enable a strategy under profiles[].plugins.deschedule.enabled or .balance.enabled",
            )
        )
    runbook = runbook_numbers()
    for cap, scope in zip(_CAPS, ("per node", "per namespace", "in total"), strict=True):
        if eff.get(cap) is None:
            out.append(
                (
                    "DL009",
                    cap,
                    f"no {cap}: one round may evict without bound {scope}",
                    f"set {cap}: {runbook.caps[cap]} (the runbook's value)",
                )
            )
    if not notifies_eviction_failures(eff):
        out.append(
            (
                "DL010",
                "evictionFailureEventNotification",
                "off: a refused eviction (PDB 429) leaves no EvictionFailed event",
                "set evictionFailureEventNotification: true",
            )
        )
    for i, prof in enumerate(_listed(eff.get("profiles"))):
        if not _evicting(prof, facts):
            continue
        for j, args in _evictor_args(prof, facts):
            base = f"profiles[{i}].pluginConfig[{j}].args"
            disabled = (args.get("podProtections") or {}).get("defaultDisabled") or []
            if disabled:
                out.append(
                    (
                        "DL008",
                        f"{base}.podProtections.defaultDisabled",
                        f"profile {prof.get('name')!r} evicts pods the defaults protect: {disabled}",
                        "remove them from defaultDisabled unless the runbook step needs them",
                    )
                )
            age = str(args.get("minPodAge") or "")
            seconds = go_seconds(age) if age else None
            if not age or age.startswith("-"):
                # The descheduler accepts a negative duration: every pod is old enough.
                said = f"has a negative minPodAge ({age}) and " if age else ""
                out.append(
                    (
                        "DL011",
                        f"{base}.minPodAge",
                        f"profile {prof.get('name')!r} {said}may evict pods seconds after they start",
                        f"set minPodAge (the runbook uses {runbook.min_pod_age})",
                    )
                )
            elif seconds is not None and seconds < runbook.min_pod_age_s:
                out.append(
                    (
                        "DL017",
                        f"{base}.minPodAge",
                        f"profile {prof.get('name')!r} evicts pods from {age} old, under the "
                        f"runbook's {runbook.min_pod_age}: a replacement can be evicted again "
                        "before it settles",
                        f"set minPodAge: {runbook.min_pod_age} or more",
                    )
                )
            if args.get("nodeFit") is not True:
                out.append(
                    (
                        "DL015",
                        f"{base}.nodeFit",
                        f"profile {prof.get('name')!r} has nodeFit off: a pod that fits no other "
                        "node is evicted anyway and its replacement stays Pending",
                        "set nodeFit: true in the DefaultEvictor args (the runbook's value)",
                    )
                )
        out += _scope_findings(i, prof, facts)
        out += _lifetime_findings(i, prof, runbook)
    for bug in bugs:
        # a chart bug (chart_range) depends on the chart installed, which a policy's lint does
        # not know: the canary's static comparison judges it from the render (DR009)
        if bug.applies_to(version) and bug.policy_trigger is not None and not bug.chart_range:
            why = bug.policy_trigger(eff)
            if why:
                on = (
                    version
                    if version in bug.affected
                    else f"{version} (built after {version.split('-', 1)[0]}: it may carry "
                    "the fix; a round's signature tells)"
                )
                out.append(
                    (
                        "DL012",
                        why.split(" ", 1)[0],
                        f"{bug.id} on {on}: {bug.title} ({bug.link}); triggered: {why}",
                        f"{bug.workaround or 'see ' + bug.link}; upstream fix: {bug.fix or 'none'}",
                    )
                )
    return out


def will_run(
    rendered: RenderedValues, eff: Mapping[str, Any], facts: DeschedulerFacts
) -> list[Hit]:
    """DL019: each profile's evicting strategies as the chart renders them from the values."""
    out = []
    for i, prof in enumerate(_listed(eff.get("profiles"))):
        if isinstance(prof, dict):
            names = _evicting(prof, facts) or ["nothing"]
            out.append(
                (
                    "DL019",
                    f"profiles[{i}].plugins",
                    f"with chart {rendered.chart}, profile {prof.get('name')!r} runs "
                    f"{', '.join(names)}",
                    "check this is what you meant to run",
                )
            )
    return out
