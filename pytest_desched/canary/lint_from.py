"""`desched lint FILE --from RELEASE`: an upgrade's migration findings, as lint findings.

The canary's static comparison (:mod:`.static`) between the release the user runs now (the
from-release and its chart) and the release lint judges (``--descheduler`` / ``--candidate``,
default the pin), for the user's own values or policy: both charts' values and renders of the
user's values, the policy each chart renders linted and defaulted by each release's own policy
checker, and the metric families each release's code declares. Each difference becomes a
:class:`Finding` under its migration rule: the code and severity come from
:mod:`~pytest_desched.descheduler.policy.rule_table`, the one table the canary's static stage
classifies by too. A finding is placed at the user's file and line that set the key when
there is one, else at the file with its origin said (rendered chart, defaulting, release code).
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.canary.static import (
    Difference,
    compare_charts,
    compare_defaults,
    compare_lint,
)
from pytest_desched.canary.static.metric_code import compare_declared_metrics, declared_metrics
from pytest_desched.descheduler.chart_source import chart_meta
from pytest_desched.descheduler.policy.checker import PolicyChecker
from pytest_desched.descheduler.policy.lint import (
    Finding,
    Target,
    lint_targets,
    load_targets,
    values_target,
)
from pytest_desched.descheduler.policy.rule_table import RULES
from pytest_desched.descheduler.policy.values import (
    RenderedValues,
    ValuesFile,
    node_line,
    read_values,
    render_values,
)
from pytest_desched.errors import UnsafeRender
from pytest_desched.redaction import scrub_secrets

__all__ = ["LintRelease", "finding_of", "migration_findings", "values_keys"]


@dataclass(frozen=True)
class LintRelease:
    """One side of the upgrade: its label, policy checker, chart and own source tree."""

    label: str  # the spec as given ("version:v0.35.1", "pinned")
    checker: PolicyChecker
    chart: Path  # a .tgz or a chart directory
    chart_label: str  # e.g. "descheduler-0.35.1"
    tree: Path | None = None  # the release's source (metrics/metrics.go), None for a binary

    @property
    def version(self) -> str:
        return self.checker.version


# Where a difference of each area sits when no line of the user's file set it.
_ORIGIN = {
    "values": "chart default",
    "object": "rendered chart",
    "rbac": "rendered chart",
    "args": "rendered chart",
    "image": "rendered chart",
    "cronjob": "rendered chart",
    "policy-lint": "",
    "defaults": "after defaulting",
    "metrics": "release code (metrics/metrics.go)",
}
_TOKEN = re.compile(r'\.?([A-Za-z0-9_-]+)|\["((?:[^"\\]|\\.)*)"\]|\[([^\]]*)\]')


def values_keys(path: str) -> list[str]:
    """The leading plain keys of a values difference's path (``values.a.b[name].c`` -> a, b):
    a named list element has no index to place, so placing stops there."""
    keys: list[str] = []
    for m in _TOKEN.finditer(path):
        plain, quoted, _element = m.groups()
        if plain is None and quoted is None:
            break
        keys.append(plain if plain is not None else json.loads(f'"{quoted}"'))
    return keys[1:] if keys[:1] == ["values"] else keys


def _line(files: Sequence[ValuesFile], keys: Sequence[str]) -> tuple[str, int] | None:
    """The last file (Helm's order) that sets the longest prefix of ``keys``, and its line."""
    for n in range(len(keys), 0, -1):
        for f in reversed(files):
            line = node_line(f.node, list(keys[:n]))
            if line is not None:
                return str(f.path), line
    return None


def _shown(v: Any, width: int = 80) -> str:
    s = (
        "—"
        if v is None
        else v
        if isinstance(v, str)
        else json.dumps(v, sort_keys=True, default=str)
    )
    s = s.replace("\n", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


def finding_of(
    d: Difference,
    file: str,
    *,
    values: Sequence[ValuesFile] = (),
    lint: Mapping[str, Finding] | None = None,
    versions: tuple[str, str] = ("", ""),
) -> Finding:
    """One difference as a finding under its rule, placed in the user's files.

    ``values``: the user's values files (a values key they set is its line); ``lint``: the
    lint findings of both sides by the canary's policy-lint path (``DL006 name PATH``), whose
    place the difference takes; ``versions``: (from, to), said at the message's head.
    """
    rule = RULES[d.rule]
    where, line, origin = file, None, _ORIGIN.get(d.area, "")
    path = d.path
    if d.area == "values" and values:
        hit = _line(values, values_keys(d.path))
        if hit is not None:
            (where, line), origin = hit, ""
    elif d.area == "policy-lint" and lint is not None and d.path in lint:
        f = lint[d.path]
        where, line, origin, path = f.file, f.line, f.origin, f.path
    message = d.message.removeprefix(f"{rule.id} {rule.name}: ")
    head = f"{versions[0]} -> {versions[1]}: " if all(versions) else ""
    if d.area not in ("policy-lint", "metrics"):
        message += f" (from: {_shown(d.baseline)}; to: {_shown(d.candidate)})"
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        file=where,
        path=path,
        message=scrub_secrets(head + message),
        fix=rule.fix,
        line=line,
        origin=origin,
    )


def _lint_index(findings: Sequence[Finding]) -> dict[str, Finding]:
    """The canary's policy-lint path of each finding (see compare_lint): where it came from."""
    return {f"{f.rule} {f.name} {f.path}": f for f in findings}


def _renderer(rel: LintRelease, helm: Path, env: Mapping[str, str]) -> Callable[..., Any]:
    def render(files: Sequence[ValuesFile]) -> RenderedValues:
        return render_values(files, rel.chart, helm, env, chart_label=rel.chart_label)

    return render


def _policy_diffs(
    t_old: Target, t_new: Target, old: LintRelease, new: LintRelease
) -> tuple[list[Difference], dict[str, Finding]]:
    """One policy (a file's, or the one each chart renders) under both releases."""
    # DL019 names each side's chart: a "what runs" note, compared by the defaults (DD) instead
    f_old = [f for f in lint_targets([t_old], old.checker) if f.rule != "DL019"]
    f_new = [f for f in lint_targets([t_new], new.checker) if f.rule != "DL019"]
    diffs = compare_lint(f_old, f_new)
    if t_old.doc is not None and t_new.doc is not None:
        [r_old] = old.checker.check_many([(t_old.id, t_old.text)])  # answered from memory
        [r_new] = new.checker.check_many([(t_new.id, t_new.text)])
        if r_old.accepted and r_new.accepted:
            diffs += compare_defaults(
                r_old.effective,
                r_new.effective,
                baseline_protections=old.checker.facts().default_pod_protections,
                candidate_protections=new.checker.facts().default_pod_protections,
            )
    return diffs, _lint_index([*f_old, *f_new])


def migration_findings(
    files: Sequence[str | Path],
    values: Sequence[str | Path],
    old: LintRelease,
    new: LintRelease,
    helm: Path,
    env: Mapping[str, str],
) -> list[Finding]:
    """The differences an upgrade from ``old`` to ``new`` makes for the user's inputs.

    ``files`` are linted one by one (policies, ConfigMaps or values), ``values`` together
    (Helm's order), as plain `desched lint` reads them. Inputs are read before any render:
    bad input raises ConfigError first.
    """
    groups = [[read_values(v) for v in values]] if values else []
    r_old, r_new = _renderer(old, helm, env), _renderer(new, helm, env)
    pairs: list[tuple[Target, Target]] = []
    for f in files:
        pairs += zip(load_targets(f, r_old), load_targets(f, r_new), strict=True)
    for group in groups:
        pairs.append((values_target(r_old(group)), values_target(r_new(group))))
    versions = (old.version, new.version)
    out: list[Finding] = []
    for t_old, t_new in pairs:
        user = list(t_new.rendered.files) if t_new.rendered is not None else []
        diffs: list[Difference] = []
        if user:
            diffs += compare_charts(
                helm,
                old.chart,
                new.chart,
                env,
                values_files=[u.path for u in user],
                releases=(
                    (_chart_version(old.chart), old.version),
                    (_chart_version(new.chart), new.version),
                ),
                policies=[t.doc for t in (t_old, t_new) if t.doc],
            )
        policy, lint = _policy_diffs(t_old, t_new, old, new)
        diffs += policy
        out += [
            finding_of(d, t_new.file, values=user, lint=lint, versions=versions)
            for d in _unique(diffs)
        ]
    declared_old, declared_new = declared_metrics(old.tree), declared_metrics(new.tree)
    if declared_old is not None and declared_new is not None and (files or values):
        first = str(files[0] if files else values[-1])
        out += [
            finding_of(d, first, versions=versions)
            for d in compare_declared_metrics(declared_old, declared_new)
        ]
    return out


def _chart_version(chart: Path) -> str:
    """A chart's own version (Chart.yaml of a directory or a packaged .tgz), "" if unread:
    which known chart bugs (canary/static/chart_bugs.py) its render can have."""
    try:
        if chart.is_dir():
            meta = yaml.safe_load((chart / "Chart.yaml").read_text(errors="replace")) or {}
        else:
            meta = chart_meta(chart)
    except (OSError, tarfile.TarError, yaml.YAMLError, UnsafeRender):
        return ""
    return str(meta.get("version", "")) if isinstance(meta, dict) else ""


def _unique(diffs: Sequence[Difference]) -> list[Difference]:
    return list({(d.area, d.path, d.change, repr(d.candidate)): d for d in diffs}.values())
