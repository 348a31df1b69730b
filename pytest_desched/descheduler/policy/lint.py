"""`desched lint`: the runbook's policy rules on top of the descheduler's own verdict.

Whether a policy is valid, what it means after defaults, and which fields the descheduler
silently drops come from the ``policycheck`` helper (:mod:`.checker`), i.e. from the
descheduler's own code at the version under test. This module adds the runbook's rules (caps,
minPodAge, event notification, lowered protections, deprecated booleans, credentials, known
bugs), each with a stable id, a severity, a location (file, path, line when known) and a
concrete fix; :mod:`.lint_output` renders them as text, JSON or SARIF 2.1.0 with a verdict.

Inputs: a DeschedulerPolicy file, a rendered ConfigMap (``data["policy.yaml"]``, also inside a
multi-document ``helm template`` output), or Helm values. Values are linted as what will run:
the pinned chart renders them (:mod:`.values`, helm coalesces several files in Helm's order) and
the rendered policy is linted, each finding placed at the user's file and line that set the key,
or at the chart's default when no file does. Runbook numbers (caps, minPodAge) are read from the
runbook's own policy (manifests/policy-safe-rebalance.yaml), the one source of truth.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.descheduler.chart_source import obtain_chart
from pytest_desched.descheduler.known_bugs import REGISTRY, KnownBug
from pytest_desched.descheduler.policy.checker import (
    CheckResult,
    PolicyChecker,
    checker_for,
)
from pytest_desched.descheduler.policy.lint_metrics import values_token_paths
from pytest_desched.descheduler.policy.lint_metrics_migration import rbac_findings
from pytest_desched.descheduler.policy.lint_output import (
    RULES,
    Severity,
    render,
    render_json,
    render_sarif,
    render_text,
    verdict,
)
from pytest_desched.descheduler.policy.lint_rules import (
    DEPRECATED_EVICTOR_BOOLEANS,
    go_seconds,
    line_of,
    path_tokens,
    policy_findings,
    runbook_numbers,
    will_run,
)
from pytest_desched.descheduler.policy.values import (
    POLICY_KEY,
    RenderedValues,
    ValuesFile,
    read_values,
    render_values,
    safety_off,
    unknown_keys,
)
from pytest_desched.errors import ConfigError, InputError, PolicyError
from pytest_desched.inputs_safe import load_yaml, load_yaml_all, read_text, require_mapping
from pytest_desched.log import say
from pytest_desched.proc import helm_env
from pytest_desched.redaction import scrub_secrets
from pytest_desched.tools.toolchain import Toolchain

__all__ = [
    "DEPRECATED_EVICTOR_BOOLEANS",
    "RULES",
    "Finding",
    "Renderer",
    "Target",
    "error_problems",
    "go_seconds",
    "has_errors",
    "lint_files",
    "lint_or_refuse",
    "lint_policy_doc",
    "lint_targets",
    "load_targets",
    "render",
    "render_json",
    "render_sarif",
    "render_text",
    "runbook_numbers",
    "values_target",
    "verdict",
]


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
    # "chart default" when no user file sets the key (Helm values: the chart supplied it)
    origin: str = ""

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
    rule: str = "DL000"  # the rule a problem is reported under (DL003: a duplicate key)
    # Helm values: what the chart rendered from them; findings are placed in the user's files.
    rendered: RenderedValues | None = None

    @property
    def id(self) -> str:
        return f"{self.file}#{self.prefix}" if self.prefix else self.file


# ------------------------------------------------------------------------------- inputs ---

# Renders values files together (Helm's order) with the chart under lint; see `pinned_renderer`.
Renderer = Callable[[Sequence[ValuesFile]], RenderedValues]


def is_values(doc: Mapping[str, Any]) -> bool:
    """Helm values: they set the chart's policy keys, or are no Kubernetes object or policy
    (the chart's own values have a ``kind``: CronJob or Deployment)."""
    if POLICY_KEY in doc or "deschedulerPolicyAPIVersion" in doc:
        return True
    return doc.get("kind") in (None, "CronJob", "Deployment") and not (
        {"apiVersion", "profiles"} & set(doc)
    )


def pinned_renderer(
    toolchain: Any = None, chart: str | Path | None = None, report: Any = None
) -> Renderer:
    """A renderer with the pinned helm and chart (or the chart tree or .tgz at ``chart``).

    The chart and helm are resolved on the first values file only: policies and ConfigMaps
    need neither.
    """

    def render(files: Sequence[ValuesFile]) -> RenderedValues:
        tc = toolchain or Toolchain(report=report or say)
        if chart is not None:
            path = Path(chart)
            if not path.exists():
                raise ConfigError(f"--chart {path}: no such chart directory or .tgz")
            label = str(path)
        else:
            ref = obtain_chart(tc, tc.versions, "auto", report=report or say)
            path, label = ref.path, f"{tc.versions.chart_name}-{ref.version}"
        env = helm_env(tc.cache_dir / "charts")
        return render_values(files, path, tc.path("helm"), env, chart_label=label)

    return render


def values_target(rendered: RenderedValues) -> Target:
    """The policy the chart renders from the user's values, placed in the user's files."""
    name = str(rendered.files[-1].path)
    if rendered.policy_text is None:
        problem = (
            f"the chart {rendered.chart} renders no policy ConfigMap from these values "
            f"({POLICY_KEY} empty or null): the CronJob still mounts it, so its pods never "
            f"start; give {POLICY_KEY} a policy"
        )
        return Target(name, None, "", POLICY_KEY, problem=problem, rendered=rendered)
    try:
        doc = load_yaml(rendered.policy_text, f"{name} (rendered policy.yaml)")
        node = yaml.compose(rendered.policy_text)
    except (yaml.YAMLError, InputError) as exc:
        problem = f"the chart renders a policy.yaml that is not YAML: {exc}"
        return Target(name, None, "", POLICY_KEY, problem=problem, rendered=rendered)
    if not isinstance(doc, dict):
        problem = "the chart renders a policy.yaml that is not a mapping"
        return Target(name, None, "", POLICY_KEY, problem=problem, rendered=rendered)
    return Target(name, doc, rendered.policy_text, f"{POLICY_KEY}.", node, rendered=rendered)


_NODE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # nodes for line numbers only


def load_targets(path: str | Path, render: Renderer | None = None) -> list[Target]:
    """Every policy in a file: a policy, ConfigMaps (multi-document too), or Helm values.

    A file that cannot be read or parsed, or values helm refuses, raise ConfigError (the file,
    and the line when known): bad input, refused before any lint.
    """
    name = str(path)
    text = read_text(path, what=_LINTABLE)  # bounded: InputError, exit 2
    # depth, aliases, ints, duplicate keys: refused (exit 2) before any walk
    docs = load_yaml_all(text, name)
    nodes = list(yaml.compose_all(text, Loader=_NODE_LOADER))
    docs_nodes = [(d, n) for d, n in zip(docs, nodes, strict=False) if d is not None]
    if not docs_nodes:  # empty, or comments only
        require_mapping(None, name, _LINTABLE)
    out: list[Target] = []
    single = len(docs_nodes) == 1
    for i, (doc, node) in enumerate(docs_nodes):
        where = "" if single else f"[doc {i}]"
        require_mapping(doc, name, _LINTABLE, "" if single else f"document {i + 1}")
        if doc.get("kind") == "DeschedulerPolicy":
            out.append(Target(name, doc, text if single else json.dumps(doc), where, node))
        elif single and is_values(doc):
            render = render or pinned_renderer()
            out.append(values_target(render([read_values(path)])))
        elif doc.get("kind") == "ConfigMap" and "policy.yaml" in (doc.get("data") or {}):
            inner = doc["data"]["policy.yaml"]
            try:
                pol = load_yaml(str(inner), f"{name}: data.policy.yaml")
                inner_node = yaml.compose(inner, Loader=_NODE_LOADER)
            except InputError as exc:
                if exc.code not in ("DL000", "DL003"):
                    raise
                out.append(Target(name, None, "", where, problem=str(exc), rule=exc.code))
                continue
            except yaml.YAMLError as exc:
                out.append(Target(name, None, "", where, problem=f"policy.yaml: {exc}"))
                continue
            prefix = f'{where}data["policy.yaml"]:'
            if isinstance(pol, dict):
                out.append(Target(name, pol, inner, prefix, inner_node))
            else:
                out.append(Target(name, None, "", prefix, problem="policy.yaml is not a mapping"))
        elif doc.get("kind") in (None, "ConfigMap") or single:
            field = "" if single else f"document {i + 1}"
            kind = doc.get("kind")
            raise InputError(
                name, field, f"kind {kind!r} is nothing lint reads", f"give {_LINTABLE}"
            )
    if not out:
        raise InputError(name, "", "no document lint reads", f"give {_LINTABLE}")
    return out


_LINTABLE = "a DeschedulerPolicy, Helm values (a file of its own) or a ConfigMap with policy.yaml"


def _present(node: yaml.Node | None, toks: Sequence[str | int]) -> int:
    """How many leading tokens of a path exist in a composed document."""
    for n, tok in enumerate(toks):
        if isinstance(node, yaml.SequenceNode) and isinstance(tok, int) and tok < len(node.value):
            node = node.value[tok]
        elif isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == tok), None)
            if node is None:
                return n
        else:
            return n
    return len(toks)


def _origin(target: Target, path: str) -> tuple[str, int | None, str]:
    """(file, line, origin) of a rendered-values finding: the user's file that set the key,
    else (a key the policy lacks) the user's file that set where it would go, else the chart."""
    rendered = target.rendered
    assert rendered is not None
    toks = path_tokens(path)
    keep = _present(target.node, toks)
    where = toks if keep == len(toks) else toks[:keep]
    hit = rendered.locate(where)
    if hit is not None:
        return str(hit[0].path), hit[1], ""
    return target.file, None, "chart default"


def _finding(target: Target, rule: str, path: str, message: str, fix: str) -> Finding:
    full = f"{target.prefix}{path}" if path else target.prefix.rstrip(".:") or "<root>"
    if target.rendered is not None:
        file, line, origin = _origin(target, path)
        if origin and path.startswith("profiles") and RULES[rule].severity != "note":
            fix += (
                f" (the chart's default: set {POLICY_KEY}.profiles in your values to replace "
                "it; helm replaces a list whole)"
            )
    else:
        file, origin = target.file, ""
        line = line_of(target.node, path) if target.node is not None and path else None
    return Finding(
        rule=rule,
        severity=RULES[rule].severity,
        file=file,
        path=full,
        message=scrub_secrets(message),
        fix=scrub_secrets(fix),
        line=line,
        origin=origin,
    )


def _unread_fix(key: str, reads: Iterable[str]) -> str:
    near = difflib.get_close_matches(key, sorted(reads), n=1, cutoff=0.6)
    if near:
        return f'did you mean "{near[0]}"? rename it'
    return "remove it (`helm show values` lists the chart's keys)"


def _safety_findings(rendered: RenderedValues) -> list[Finding]:
    """DL018: the values turn off a flag the runbook's first install relies on; DL021: they
    set a top-level key the chart never reads; DL023: a credential in them, outside the policy."""
    unread = (
        [
            Finding(
                rule="DL021",
                severity=RULES["DL021"].severity,
                file=str(f.path),
                path=key,
                message=f"the chart reads no value {key!r}: helm ignores it silently",
                fix=_unread_fix(key, rendered.reads),
                line=line,
            )
            for f, key, line in unknown_keys(rendered.files, rendered.reads)
        ]
        if rendered.reads
        else []
    )
    tokens = [
        Finding(
            rule="DL023",
            severity=RULES["DL023"].severity,
            file=str(f.path),
            path=path,
            message="<redacted> (a credential in plain text in the values, value not shown): "
            "helm keeps it in the release and every render prints it",
            fix="move it to a Secret the chart references (for Prometheus: "
            "deschedulerPolicy.metricsProviders[].prometheus.authToken.secretReference)",
            line=line_of(f.node, path),
        )
        for f in rendered.files
        for path in values_token_paths(f.doc)
    ]
    return (
        unread
        + tokens
        + [
            Finding(
                rule="DL018",
                severity=RULES["DL018"].severity,
                file=str(f.path),
                path=key,
                message=f"{json.dumps(value)} turns it off; {why}",
                fix=f"remove {key} (or set it to true): the runbook installs with --set {key}=true, "
                "and desched run/up refuse these values",
                line=line,
            )
            for f, key, value, line, why in safety_off(rendered.files)
        ]
    )


def lint_targets(
    targets: Sequence[Target],
    checker: PolicyChecker,
    bugs: Iterable[KnownBug] = REGISTRY,
) -> list[Finding]:
    """Lint every target with one helper process; findings in input order."""
    bugs = tuple(bugs)
    facts = checker.facts()
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
        if t.rendered is not None:
            out += _safety_findings(t.rendered)
        if t.doc is None:
            out.append(_finding(t, "DL000", "", t.problem, "lint a policy, values or ConfigMap"))
            continue
        res = results[t.id]
        found = policy_findings(t.doc, res, checker.version, bugs, facts)
        if t.rendered is not None and res.accepted:
            found = will_run(t.rendered, res.effective, facts) + found
        if t.rendered is not None:  # DL029: the chart's RBAC against the metrics it reads
            found += rbac_findings(t.doc, t.rendered.manifests, t.rendered.chart)
        for rule, path, msg, fix in found:
            out.append(_finding(t, rule, path, msg, fix))
    return out


def lint_files(
    paths: Sequence[str | Path],
    version: str | None = None,
    values: Sequence[str | Path] = (),
    render: Renderer | None = None,
) -> list[Finding]:
    """Lint each file alone, and the ``values`` files together (Helm's order) if any.

    Every input is read (and values rendered) first: bad input raises ConfigError before
    any finding.
    """
    render = render or pinned_renderer()
    targets = [t for p in paths for t in load_targets(p, render)]
    if values:
        targets.append(values_target(render([read_values(v) for v in values])))
    return lint_targets(targets, checker_for(version))


def lint_policy_doc(
    doc: Mapping[str, Any], source: str, checker: PolicyChecker
) -> tuple[list[Finding], CheckResult]:
    """One in-memory policy (Release.apply_policy): its findings and the helper's result."""
    target = Target(source, dict(doc), json.dumps(doc))
    res = checker.check_many([(target.id, target.text)])[0]
    findings = [
        _finding(target, rule, path, msg, fix)
        for rule, path, msg, fix in policy_findings(
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
