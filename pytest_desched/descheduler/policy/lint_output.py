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
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pytest_desched import __version__
from pytest_desched.descheduler.policy.rule_table import RULES, Rule, Severity, rule_link
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


def render_json(
    findings: Sequence[Finding],
    version: str,
    fail_on: str = "error",
    from_version: str | None = None,
) -> str:
    """The findings as one JSON document; ``from``: the release of `lint --from`, if any."""
    return json.dumps(
        {
            "linter": __version__,
            "descheduler": version,
            **({"from": from_version} if from_version else {}),
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


def render_sarif(findings: Sequence[Finding], version: str, from_version: str | None = None) -> str:
    """SARIF 2.1.0: one run, the rules as the driver's reportingDescriptors (each with its
    summary, fix and docs link); `lint --from`'s release is ``properties.fromRelease``."""
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
            **({"help": {"text": r.fix}} if r.fix else {}),
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
                "properties": {
                    "deschedulerVersion": version,
                    **({"fromRelease": from_version} if from_version else {}),
                },
            }
        ],
    }
    return json.dumps(log, indent=2)


def render(
    findings: Sequence[Finding],
    fmt: str,
    version: str,
    fail_on: str = "error",
    from_version: str | None = None,
) -> str:
    if fmt == "json":
        return render_json(findings, version, fail_on, from_version)
    if fmt == "sarif":
        return render_sarif(findings, version, from_version)
    return render_text(findings, fail_on)
