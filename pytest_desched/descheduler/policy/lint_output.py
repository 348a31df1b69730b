"""`desched lint`'s rules and output: text, JSON or SARIF 2.1.0, and the one-line verdict of a
CI gate.

``--fail-on error`` (the default) fails on error findings only, ``--fail-on warning`` on
warnings too; notes never fail. The verdict (``SAFE`` / ``UNSAFE: 3 findings``) counts the
findings at or above that level, and the exit code follows it. SARIF's ``tool.driver.version``
is the linter's own (the package's version); the descheduler whose code judged the policy is
a property of the run (``deschedulerVersion``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from pytest_desched import __version__
from pytest_desched.render import printable

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy.lint import Finding

__all__ = [
    "FAIL_ON",
    "RULES",
    "Rule",
    "Severity",
    "failing",
    "render",
    "render_json",
    "render_sarif",
    "render_text",
    "rule_link",
    "sarif_uri",
    "verdict",
]

FAIL_ON = ("error", "warning")  # --fail-on choices, most severe first
# The linter's rules (`desched lint` reports them; SARIF lists them as the driver's rules).
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
        Rule("DL009", "no-eviction-cap", "warning", "a per-node, per-namespace or total cap unset"),
        Rule("DL010", "event-notification-off", "warning", "failed evictions leave no event"),
        Rule("DL011", "min-pod-age-missing", "warning", "new pods can be evicted at once"),
        Rule("DL012", "known-bug", "warning", "the policy triggers a known bug of this version"),
        Rule("DL013", "needs-live-cluster", "note", "accepted; only a live cluster can check it"),
        Rule("DL014", "no-scope", "warning", "an evicting strategy with no namespace/label scope"),
        Rule("DL015", "node-fit-off", "warning", "pods evicted with nowhere else to run"),
        Rule("DL016", "short-pod-lifetime", "warning", "PodLifeTime evicts pods younger than it"),
        Rule("DL017", "min-pod-age-short", "warning", "minPodAge below the runbook's"),
        Rule("DL018", "safety-flag-off", "error", "values turn suspend or dry-run off"),
        Rule("DL019", "will-run", "note", "what the chart renders from the values will run"),
        Rule("DL020", "ignore-without-reason", "warning", "an inline ignore with no reason"),
    )
}
# Where each rule is explained: docs/lint.md, one anchor per code (`#dl007`). The project has no
# published URL yet (pyproject.toml has no [project.urls]): set it here, in one place, when it does.
DOCS_URL = "https://github.com/pytest-desched/pytest-desched/blob/main/docs/lint.md"


def rule_link(code: str) -> str:
    """The docs of rule ``code`` (``--list-rules`` prints it; SARIF's ``helpUri``)."""
    return f"{DOCS_URL}#{code.lower()}"


_RANK = {"error": 0, "warning": 1, "note": 2}


def failing(findings: Sequence[Finding], fail_on: str = "error") -> list[Finding]:
    """The findings that fail the gate at ``fail_on`` (that severity or worse)."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}, not {fail_on!r}")
    return [f for f in findings if _RANK[f.severity] <= _RANK[fail_on]]


def verdict(findings: Sequence[Finding], fail_on: str = "error") -> str:
    """``SAFE`` or ``UNSAFE: N findings`` (N at or above ``fail_on``); what is below is said."""
    bad = failing(findings, fail_on)
    if bad:
        return f"UNSAFE: {len(bad)} finding{'s' if len(bad) != 1 else ''}"
    below = [f for f in findings if f.severity == "warning"]
    if below:
        return f"SAFE ({len(below)} warning(s) below --fail-on {fail_on})"
    return "SAFE"


def _where(f: Finding) -> str:
    if f.line:
        return f"{f.file}:{f.line}"
    return f"{f.file} ({f.origin})" if f.origin else f.file


def render_text(findings: Sequence[Finding], fail_on: str = "error") -> str:
    """Two lines a finding; file names, paths and quoted keys cannot add a line of their own."""
    lines = []
    for f in findings:
        head = f"{_where(f)}: {f.severity} {f.rule} {f.name}: {f.path}: {f.message}"
        lines.append(printable(head))
        lines.append(f"    fix: {printable(f.fix)}")
    errors = sum(f.severity == "error" for f in findings)
    notes = sum(f.severity == "note" for f in findings)
    summary = f"{errors} error(s), {len(findings) - errors - notes} warning(s)"
    lines.append(summary + (f", {notes} note(s)" if notes else ""))
    lines.append(verdict(findings, fail_on))
    return "\n".join(lines)


def render_json(findings: Sequence[Finding], version: str, fail_on: str = "error") -> str:
    return json.dumps(
        {
            "linter": __version__,
            "descheduler": version,
            "fail_on": fail_on,
            "verdict": verdict(findings, fail_on),
            "findings": [{**asdict(f), "name": f.name} for f in findings],
            "errors": sum(f.severity == "error" for f in findings),
            "warnings": sum(f.severity == "warning" for f in findings),
            "notes": sum(f.severity == "note" for f in findings),
        },
        indent=2,
    )


def sarif_uri(file: str) -> str:
    """A SARIF ``artifactLocation.uri`` (RFC 3986): an absolute path as a ``file:`` URI, a
    relative one as a relative reference, each byte outside the unreserved set percent-encoded
    (so a space, ``#``, ``?``, ``%``, ``:`` or a newline in a file name stays part of the path)."""
    p = Path(file)
    if p.is_absolute():
        return p.as_uri()
    return quote(p.as_posix(), safe="/")


def render_sarif(findings: Sequence[Finding], version: str) -> str:
    """SARIF 2.1.0: one run, the rules as the driver's reportingDescriptors."""
    ids = list(RULES)
    results = []
    for f in findings:
        phys: dict[str, Any] = {"artifactLocation": {"uri": sarif_uri(f.file)}}
        if f.line:
            phys["region"] = {"startLine": f.line}
        result: dict[str, Any] = {
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
        if f.origin:
            result["properties"] = {"origin": f.origin}
        results.append(result)
    rules = [
        {
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "helpUri": rule_link(r.id),
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
                        "version": __version__,
                        "informationUri": "https://github.com/kubernetes-sigs/descheduler",
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": {"deschedulerVersion": version},
            }
        ],
    }
    return json.dumps(log, indent=2)


def render(findings: Sequence[Finding], fmt: str, version: str, fail_on: str = "error") -> str:
    if fmt == "json":
        return render_json(findings, version, fail_on)
    if fmt == "sarif":
        return render_sarif(findings, version)
    return render_text(findings, fail_on)
