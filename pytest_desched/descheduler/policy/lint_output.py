"""`desched lint`'s rules and output: text, JSON, SARIF 2.1.0, GitHub workflow-command
annotations or JUnit XML, and the one-line verdict of a CI gate.

``--fail-on error`` (the default) fails on error findings only, ``--fail-on warning`` on
warnings too; notes never fail. The verdict (``SAFE`` / ``UNSAFE: 3 findings``) counts the
findings at or above that level, and the exit code follows it. SARIF's ``tool.driver.version``
is the linter's own (the package's version); the descheduler whose code judged the policy is
a property of the run (``deschedulerVersion``).
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pytest_desched import __version__
from pytest_desched.descheduler.policy.rule_table import RULES, Rule, Severity, rule_link
from pytest_desched.redaction import scrub_secrets
from pytest_desched.render import printable

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy.lint import Finding

__all__ = [
    "FAIL_ON",
    "RULES",
    "Rule",
    "Severity",
    "failing",
    "github_data",
    "github_property",
    "render",
    "render_github",
    "render_json",
    "render_junit",
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


# GitHub's workflow commands (@actions/core toCommandValue/escapeData/escapeProperty): a
# message escapes %, CR and LF; a property also the ':' and ',' that would end it.
_GITHUB_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def github_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does (then no other control
    character either): it cannot end the line, so it cannot start a command of its own."""
    escaped = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return printable(escaped)


def github_property(text: str) -> str:
    """A workflow command's property value (file, title): `github_data` plus ':' and ','."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def _repo_path(file: str, root: str | None) -> str:
    """`file` relative to the checkout (GITHUB_WORKSPACE) when inside it: GitHub places an
    annotation by the repository path; anything else is left as given."""
    if not root or not os.path.isabs(file):
        return file
    rel = os.path.relpath(file, root)
    return file if rel == ".." or rel.startswith("../") else rel


def render_github(findings: Sequence[Finding], root: str | None = None) -> str:
    """One ``::error|warning|notice file=F,line=N,title=DLxxx name::message`` line a finding,
    so each shows inline on the pull request; a finding without a line is placed on its file.
    ``root``: the checkout (GITHUB_WORKSPACE) that absolute paths are made relative to."""
    lines = []
    for f in findings:
        props = [f"file={github_property(_repo_path(f.file, root))}"]
        if f.line:
            props.append(f"line={f.line}")
        props.append(f"title={github_property(f'{f.rule} {f.name}')}")
        where = f" ({f.origin})" if f.origin else ""
        text = f"{f.path}{where}: {f.message}\nfix: {f.fix}"
        message = github_data(scrub_secrets(text))
        lines.append(f"::{_GITHUB_LEVEL[f.severity]} {','.join(props)}::{message}")
    return "\n".join(lines)


def render_junit(findings: Sequence[Finding], version: str, fail_on: str = "error") -> str:
    """JUnit XML (one testsuite, a testcase a finding): the findings that fail the gate at
    ``fail_on`` are failures, the rest pass with their message as output; no finding is one
    passing testcase, so a CI test view shows the lint ran. Every value is scrubbed before
    it is escaped (print it with ``emit(..., scrubbed=True)``: a scrub of the escaped XML
    would write a raw ``<redacted>`` into it)."""

    def clean(text: str) -> str:
        return printable(scrub_secrets(text))

    bad = {id(f) for f in failing(findings, fail_on)}
    suite = ET.Element(
        "testsuite",
        name="desched-lint",
        tests=str(max(len(findings), 1)),
        failures=str(len(bad)),
        errors="0",
        skipped="0",
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="linter", value=__version__)
    ET.SubElement(props, "property", name="descheduler", value=clean(version))
    ET.SubElement(props, "property", name="verdict", value=verdict(findings, fail_on))
    if not findings:
        ET.SubElement(suite, "testcase", classname="desched-lint", name="no findings")
    for f in findings:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=clean(f.file),
            name=clean(f"{f.rule} {f.name} {_where(f)} {f.path}"),
        )
        text = clean(f"{_where(f)}: {f.severity} {f.path}: {f.message}") + "\n"
        text += f"fix: {clean(f.fix)}\ndocs: {rule_link(f.rule)}"
        if id(f) in bad:
            failure = ET.SubElement(
                case, "failure", type=f.severity, message=clean(f"{f.path}: {f.message}")
            )
            failure.text = text
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode")


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
    if fmt == "github":
        return render_github(findings, os.environ.get("GITHUB_WORKSPACE"))
    if fmt == "junit":
        return render_junit(findings, version, fail_on)
    return render_text(findings, fail_on)
