"""`desched lint`: the runbook's policy rules on top of the descheduler's own verdict.

Whether a policy is valid, what it means after defaults, and which fields the descheduler
silently drops come from the ``policycheck`` helper (:mod:`.checker`), i.e. from the
descheduler's own code at the version under test. This module adds the runbook's rules (caps,
minPodAge, event notification, lowered protections, deprecated booleans, credentials, known
bugs), each with a stable id, a severity, a location (file, path, line when known) and a
concrete fix, and renders them as text, JSON or SARIF 2.1.0.

Inputs: a DeschedulerPolicy file, a Helm values file (``deschedulerPolicy``), or a rendered
ConfigMap (``data["policy.yaml"]``), also inside a multi-document ``helm template`` output.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from pytest_desched.descheduler.known_bugs import REGISTRY, KnownBug
from pytest_desched.descheduler.policy.checker import (
    CheckResult,
    DeschedulerFacts,
    PolicyChecker,
    checker_for,
)
from pytest_desched.descheduler.policy.safety import credential_problems, template_problems
from pytest_desched.evidence.redaction import scrub_secrets

__all__ = [
    "RULES",
    "Finding",
    "Target",
    "error_problems",
    "has_errors",
    "lint_files",
    "lint_or_refuse",
    "lint_policy_doc",
    "lint_targets",
    "load_targets",
    "render",
]

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("DL000", "unreadable-input", "error", "the file is not a policy, values or ConfigMap"),
        Rule("DL001", "rejected-by-descheduler", "error", "the descheduler refuses the policy"),
        Rule("DL002", "dropped-field", "error", "a field the descheduler silently ignores"),
        Rule("DL003", "duplicate-field", "error", "a key given twice; one is silently kept"),
        Rule("DL004", "inline-credential", "error", "a credential written into the policy"),
        Rule("DL005", "template-marker", "error", "a '{{' the chart's tpl would evaluate"),
        Rule("DL006", "deprecated-evictor-boolean", "warning", "a deprecated DefaultEvictor flag"),
        Rule("DL007", "nothing-enabled", "warning", "no plugin evicts: the run does nothing"),
        Rule("DL008", "protections-lowered", "warning", "default pod protections disabled"),
        Rule("DL009", "no-eviction-cap", "warning", "no per-namespace or no total eviction cap"),
        Rule("DL010", "event-notification-off", "warning", "failed evictions leave no event"),
        Rule("DL011", "min-pod-age-missing", "warning", "new pods can be evicted at once"),
        Rule("DL012", "known-bug", "warning", "the policy triggers a known bug of this version"),
        Rule("DL013", "needs-live-cluster", "note", "accepted; only a live cluster can check it"),
    )
}

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


@dataclass(frozen=True)
class Finding:
    """One rule hit: where (file, path in the file's document, line) and what to do about it."""

    rule: str
    severity: Severity
    file: str
    path: str
    message: str
    fix: str
    line: int | None = None

    @property
    def name(self) -> str:
        return RULES[self.rule].name


@dataclass
class Target:
    """One policy found in an input file; ``prefix`` places its paths in that file."""

    file: str
    doc: dict[str, Any] | None
    text: str  # what the helper reads (the file's own text when it is the policy itself)
    prefix: str = ""
    node: yaml.Node | None = None  # composed document, for line numbers
    problem: str = ""
    # Helm values without deschedulerPolicyAPIVersion: the checked descheduler's apiVersion and
    # kind are added before checking (the chart renders them in front of the body).
    needs_type_meta: bool = False

    @property
    def id(self) -> str:
        return f"{self.file}#{self.prefix}" if self.prefix else self.file


# ------------------------------------------------------------------------------- inputs ---


def _policy_from_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The chart's configmap.yaml: apiVersion from deschedulerPolicyAPIVersion, then the body."""
    body = dict(values.get("deschedulerPolicy") or {})
    api = values.get("deschedulerPolicyAPIVersion")
    return {"apiVersion": api, "kind": "DeschedulerPolicy", **body} if api else body


def _with_type_meta(t: Target, facts: DeschedulerFacts) -> Target:
    if not t.needs_type_meta or t.doc is None:
        return t
    doc = {"apiVersion": facts.api_version, "kind": facts.kind, **t.doc}
    return Target(t.file, doc, json.dumps(doc), t.prefix, t.node, t.problem)


def load_targets(path: str | Path) -> list[Target]:
    """Every policy in a file: a policy, Helm values, or ConfigMaps (multi-document too)."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        docs = list(yaml.safe_load_all(text))
        nodes = list(yaml.compose_all(text))
    except (OSError, yaml.YAMLError) as exc:
        return [Target(name, None, "", problem=f"cannot read YAML: {exc}")]
    docs_nodes = [(d, n) for d, n in zip(docs, nodes, strict=False) if d is not None]
    out: list[Target] = []
    single = len(docs_nodes) == 1
    for i, (doc, node) in enumerate(docs_nodes):
        where = "" if single else f"[doc {i}]"
        if not isinstance(doc, dict):
            out.append(Target(name, None, "", where, problem="document is not a mapping"))
        elif doc.get("kind") == "DeschedulerPolicy":
            out.append(Target(name, doc, text if single else json.dumps(doc), where, node))
        elif "deschedulerPolicy" in doc:
            pol = _policy_from_values(doc)
            prefix = f"{where}deschedulerPolicy."
            bare = "deschedulerPolicyAPIVersion" not in doc
            out.append(Target(name, pol, json.dumps(pol), prefix, node, needs_type_meta=bare))
        elif doc.get("kind") == "ConfigMap" and "policy.yaml" in (doc.get("data") or {}):
            inner = doc["data"]["policy.yaml"]
            try:
                pol = yaml.safe_load(inner)
                inner_node = yaml.compose(inner)
            except yaml.YAMLError as exc:
                out.append(Target(name, None, "", where, problem=f"policy.yaml: {exc}"))
                continue
            prefix = f'{where}data["policy.yaml"]:'
            if isinstance(pol, dict):
                out.append(Target(name, pol, inner, prefix, inner_node))
            else:
                out.append(Target(name, None, "", prefix, problem="policy.yaml is not a mapping"))
        elif doc.get("kind") in (None, "ConfigMap") or single:
            out.append(
                Target(
                    name,
                    None,
                    "",
                    where,
                    problem=(
                        "not a DeschedulerPolicy, Helm values with deschedulerPolicy, or a "
                        "ConfigMap with data.policy.yaml"
                    ),
                )
            )
    if not out:
        out.append(Target(name, None, "", problem="no document in the file"))
    return out


# -------------------------------------------------------------------------------- paths ---


def _tokens(path: str) -> list[str | int]:
    toks: list[str | int] = []
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        toks.append(int(part[1:-1]) if part.startswith("[") and part[1:-1].isdigit() else part)
    return toks


def _line_of(node: yaml.Node | None, path: str) -> int | None:
    """1-based line of ``path`` in a composed document (the key's line for a mapping entry)."""
    line = None
    for tok in _tokens(path):
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


def _dropped_findings(res: CheckResult) -> list[tuple[str, str, str, str]]:
    out = []
    for d in res.dropped:
        leaf = _tokens(d.path)[-1] if d.path else ""
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


def _policy_findings(
    doc: Mapping[str, Any],
    res: CheckResult,
    version: str,
    bugs: Iterable[KnownBug],
    facts: DeschedulerFacts,
) -> list[tuple[str, str, str, str]]:
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
    for i, prof in enumerate(doc.get("profiles") or []):
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
    missing = [
        k for k in ("maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal") if k not in eff
    ]
    if missing:
        out.append(
            (
                "DL009",
                missing[0],
                f"no {' and no '.join(missing)}: one round may evict without bound",
                "; ".join(f"set {k}: 1 (the runbook's value)" for k in missing),
            )
        )
    if not eff.get("evictionFailureEventNotification"):
        out.append(
            (
                "DL010",
                "evictionFailureEventNotification",
                "off: a refused eviction (PDB 429) leaves no EvictionFailed event",
                "set evictionFailureEventNotification: true",
            )
        )
    for i, prof in enumerate(eff.get("profiles") or []):
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
            if not age or age.startswith("-"):
                # The descheduler accepts a negative duration: every pod is old enough.
                said = f"has a negative minPodAge ({age}) and " if age else ""
                out.append(
                    (
                        "DL011",
                        f"{base}.minPodAge",
                        f"profile {prof.get('name')!r} {said}may evict pods seconds after they start",
                        "set minPodAge (the runbook uses 10m)",
                    )
                )
    for bug in bugs:
        if bug.applies_to(version) and bug.policy_trigger is not None:
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


def _finding(target: Target, rule: str, path: str, message: str, fix: str) -> Finding:
    full = f"{target.prefix}{path}" if path else target.prefix.rstrip(".:") or "<root>"
    return Finding(
        rule=rule,
        severity=RULES[rule].severity,
        file=target.file,
        path=full,
        message=scrub_secrets(message),
        fix=scrub_secrets(fix),
        line=_line_of(target.node, path) if target.node is not None and path else None,
    )


def lint_targets(
    targets: Sequence[Target],
    checker: PolicyChecker,
    bugs: Iterable[KnownBug] = REGISTRY,
) -> list[Finding]:
    """Lint every target with one helper process; findings in input order."""
    bugs = tuple(bugs)
    facts = checker.facts()
    targets = [_with_type_meta(t, facts) for t in targets]
    checkable = [t for t in targets if t.doc is not None]
    results = dict(
        zip(
            (t.id for t in checkable),
            checker.check_many((t.id, t.text) for t in checkable),
            strict=True,
        )
    )
    out: list[Finding] = []
    for t in targets:
        if t.doc is None:
            out.append(_finding(t, "DL000", "", t.problem, "lint a policy, values or ConfigMap"))
            continue
        res = results[t.id]
        for rule, path, msg, fix in _policy_findings(t.doc, res, checker.version, bugs, facts):
            out.append(_finding(t, rule, path, msg, fix))
    return out


def lint_files(paths: Sequence[str | Path], version: str | None = None) -> list[Finding]:
    checker = checker_for(version)
    return lint_targets([t for p in paths for t in load_targets(p)], checker)


def lint_policy_doc(
    doc: Mapping[str, Any], source: str, checker: PolicyChecker
) -> tuple[list[Finding], CheckResult]:
    """One in-memory policy (Release.apply_policy): its findings and the helper's result."""
    target = Target(source, dict(doc), json.dumps(doc))
    res = checker.check_many([(target.id, target.text)])[0]
    findings = [
        _finding(target, rule, path, msg, fix)
        for rule, path, msg, fix in _policy_findings(
            target.doc or {}, res, checker.version, REGISTRY, checker.facts()
        )
    ]
    return findings, res


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def lint_or_refuse(
    doc: Mapping[str, Any], source: str, version: str, toolchain: Any = None
) -> tuple[list[Finding], CheckResult]:
    """Release.apply_policy's gate: raise PolicyError on any error finding, before any change."""
    from pytest_desched.errors import PolicyError

    findings, res = lint_policy_doc(doc, source, checker_for(version, toolchain))
    problems = error_problems(findings)
    if problems:
        raise PolicyError(problems, source)
    return findings, res


def error_problems(findings: Iterable[Finding]) -> list[str]:
    """The error findings as :class:`PolicyError` problems (``path: DL0xx name: message; fix``),
    the one wording of a refusal for Policy.validate and the apply_policy gate."""
    return [
        f"{f.path}: {f.rule} {f.name}: {f.message}; fix: {f.fix}"
        for f in findings
        if f.severity == "error"
    ]


# ------------------------------------------------------------------------------- output ---


def render_text(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        loc = f"{f.file}:{f.line}" if f.line else f.file
        lines.append(f"{loc}: {f.severity} {f.rule} {f.name}: {f.path}: {f.message}")
        lines.append(f"    fix: {f.fix}")
    errors = sum(f.severity == "error" for f in findings)
    notes = sum(f.severity == "note" for f in findings)
    summary = f"{errors} error(s), {len(findings) - errors - notes} warning(s)"
    lines.append(summary + (f", {notes} note(s)" if notes else ""))
    return "\n".join(lines)


def render_json(findings: Sequence[Finding], version: str) -> str:
    return json.dumps(
        {
            "descheduler": version,
            "findings": [{**asdict(f), "name": f.name} for f in findings],
            "errors": sum(f.severity == "error" for f in findings),
            "warnings": sum(f.severity == "warning" for f in findings),
            "notes": sum(f.severity == "note" for f in findings),
        },
        indent=2,
    )


def render_sarif(findings: Sequence[Finding], version: str) -> str:
    """SARIF 2.1.0: one run, the rules as the driver's reportingDescriptors."""
    ids = list(RULES)
    results = []
    for f in findings:
        phys: dict[str, Any] = {"artifactLocation": {"uri": Path(f.file).as_posix()}}
        if f.line:
            phys["region"] = {"startLine": f.line}
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": ids.index(f.rule),
                "level": f.severity,
                "message": {"text": f"{f.path}: {f.message}. Fix: {f.fix}"},
                "locations": [
                    {
                        "physicalLocation": phys,
                        "logicalLocations": [{"fullyQualifiedName": f.path, "kind": "member"}],
                    }
                ],
            }
        )
    rules = [
        {
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "defaultConfiguration": {"level": r.severity},
        }
        for r in RULES.values()
    ]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "desched-lint",
                        "version": version,
                        "informationUri": "https://github.com/kubernetes-sigs/descheduler",
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2)


def render(findings: Sequence[Finding], fmt: str, version: str) -> str:
    if fmt == "json":
        return render_json(findings, version)
    if fmt == "sarif":
        return render_sarif(findings, version)
    return render_text(findings)
